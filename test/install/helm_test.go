package install

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
)

// The chart (charts/banlieue) must render, with its default values, exactly the objects of
// config/default; these tests hold the two to each other and to the API server.

func chartDir() string { return filepath.Join(testenv.RepoRoot(), "charts", "banlieue") }

var helmBuild struct {
	once sync.Once
	path string
	err  error
	took time.Duration
}

// helmBinary builds (first time, a few minutes) or reuses the pinned helm via hack/helm.sh. A
// helm that cannot be built skips the test on a workstation and fails it under CI.
func helmBinary(t *testing.T) string {
	t.Helper()
	helmBuild.once.Do(func() {
		start := time.Now()
		var out, errOut bytes.Buffer
		cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "helm.sh"))
		cmd.Dir = testenv.RepoRoot()
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			helmBuild.err = fmt.Errorf("hack/helm.sh: %v\n%s", err, errOut.String())
			return
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		helmBuild.path = lines[len(lines)-1]
		helmBuild.took = time.Since(start)
	})
	if helmBuild.err != nil {
		testenv.MissingPrerequisite(t, helmBuild.err.Error())
	}
	t.Logf("helm: %s (hack/helm.sh took %v)", helmBuild.path, helmBuild.took.Round(time.Millisecond))
	return helmBuild.path
}

// renderChart runs `helm template banlieue charts/banlieue` into banlieue-system
// with extra args (a later --namespace wins).
func renderChart(t *testing.T, helm string, args ...string) []byte {
	t.Helper()
	start := time.Now()
	out, errOut, err := helmTemplate(helm, args...)
	if err != nil {
		t.Fatalf("helm template %q: %v\n%s", args, err, errOut)
	}
	t.Logf("helm template (%d value flags): %d bytes in %v", len(args)/2, len(out), time.Since(start).Round(time.Millisecond))
	return out
}

// helmTemplate runs `helm template banlieue charts/banlieue --namespace banlieue-system` with
// extra args and returns its output, its error output and how it exited.
func helmTemplate(helm string, args ...string) ([]byte, string, error) {
	return helmTemplateChart(helm, chartDir(), args...)
}

// helmTemplateChart is helmTemplate for the chart in dir.
func helmTemplateChart(helm, dir string, args ...string) ([]byte, string, error) {
	var out, errOut bytes.Buffer
	cmd := exec.Command(helm, append([]string{"template", "banlieue", dir, "--namespace", systemNS}, args...)...)
	cmd.Dir = testenv.RepoRoot()
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	return out.Bytes(), errOut.String(), err
}

func renderKustomize(t *testing.T) []byte {
	t.Helper()
	out, errOut, err := runKubectl(kubectlBinary(t), "kustomize", defaultDir())
	if err != nil {
		t.Fatalf("kubectl kustomize config/default: %v\n%s", err, errOut)
	}
	return []byte(out)
}

// parseObjects splits a multi-document YAML stream into objects, skipping empty documents.
func parseObjects(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("reading YAML: %v", err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			t.Fatalf("parsing YAML document: %v\n%s", err, doc)
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}

func objectKey(o *unstructured.Unstructured) string {
	gvk := o.GroupVersionKind()
	key := gvk.Kind
	if gvk.Group != "" {
		key += "." + gvk.Group
	}
	key += " "
	if ns := o.GetNamespace(); ns != "" {
		key += ns + "/"
	}
	return key + o.GetName()
}

// helmOnlyLabels are the chart's bookkeeping labels, which kustomize does not set.
var helmOnlyLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance"}

// helmOnlyAnnotations: the CRDs' keep policy (crds.keep) means nothing to kubectl.
var helmOnlyAnnotations = []string{"helm.sh/resource-policy"}

// normalise drops what only one rendering can carry: helm's own labels and annotations.
func normalise(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	byKey := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		o = o.DeepCopy()
		labels := o.GetLabels()
		for _, l := range helmOnlyLabels {
			delete(labels, l)
		}
		if len(labels) == 0 {
			unstructured.RemoveNestedField(o.Object, "metadata", "labels")
		} else {
			o.SetLabels(labels)
		}
		annotations := o.GetAnnotations()
		for _, a := range helmOnlyAnnotations {
			delete(annotations, a)
		}
		if len(annotations) == 0 {
			unstructured.RemoveNestedField(o.Object, "metadata", "annotations")
		} else {
			o.SetAnnotations(annotations)
		}
		byKey[objectKey(o)] = o
	}
	return byKey
}

// diffPaths lists the paths at which a and b differ (at most a few per object).
func diffPaths(path string, a, b any, out *[]string) {
	if len(*out) >= 10 {
		return
	}
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			break
		}
		keys := map[string]bool{}
		for k := range av {
			keys[k] = true
		}
		for k := range bv {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			diffPaths(path+"."+k, av[k], bv[k], out)
		}
		return
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			break
		}
		for i := range av {
			diffPaths(fmt.Sprintf("%s[%d]", path, i), av[i], bv[i], out)
		}
		return
	}
	if !reflect.DeepEqual(a, b) {
		*out = append(*out, fmt.Sprintf("%s: kustomize %s, helm %s", path, short(a), short(b)))
	}
}

func short(v any) string {
	if v == nil {
		return "<unset>"
	}
	data, _ := yaml.Marshal(v)
	s := strings.TrimSpace(string(data))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return strings.ReplaceAll(s, "\n", " ")
}

// TestChartCopiesInSync: charts/banlieue/files/crds, files/rbac and files/admission are
// byte-for-byte copies of the
// generated config/crd/bases and config/rbac/<role>/role.yaml (see charts/banlieue/README.md).
func TestChartCopiesInSync(t *testing.T) {
	root := testenv.RepoRoot()
	bases, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(bases) == 0 {
		t.Fatalf("no CRDs in config/crd/bases: %v", err)
	}
	copies, _ := filepath.Glob(filepath.Join(chartDir(), "files", "crds", "*.yaml"))
	pairs := map[string]string{}
	for _, b := range bases {
		pairs[filepath.Join(chartDir(), "files", "crds", filepath.Base(b))] = b
	}
	for _, c := range copies {
		if _, ok := pairs[c]; !ok {
			t.Errorf("charts/banlieue/files/crds/%s has no source in config/crd/bases: delete it", filepath.Base(c))
		}
	}
	// helm installs crds/ once and never upgrades it: the CRDs are templates (templates/crds.yaml).
	if _, err := os.Stat(filepath.Join(chartDir(), "crds")); !os.IsNotExist(err) {
		t.Errorf("charts/banlieue/crds exists (%v): helm would install it besides templates/crds.yaml", err)
	}
	for _, role := range []string{"controller", "operator", "imagebuilder", "provider-libvirt"} {
		pairs[filepath.Join(chartDir(), "files", "rbac", role+".yaml")] = filepath.Join(root, "config", "rbac", role, "role.yaml")
	}
	for _, f := range []string{"provider-accounts.yaml", "import-jobs.yaml", "provider-writes.yaml", "controller-secrets.yaml", "operator-workloads.yaml"} {
		pairs[filepath.Join(chartDir(), "files", "admission", f)] = filepath.Join(root, "config", "admission", f)
	}
	stale := 0
	for dst, src := range pairs {
		want, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(dst)
		if err != nil || !bytes.Equal(got, want) {
			rel, _ := filepath.Rel(root, dst)
			srcRel, _ := filepath.Rel(root, src)
			t.Errorf("%s is not a copy of %s", rel, srcRel)
			stale++
		}
	}
	if stale > 0 {
		t.Log(`refresh them with:
  cp config/crd/bases/*.yaml charts/banlieue/files/crds/
  for r in controller operator imagebuilder provider-libvirt; do cp config/rbac/$r/role.yaml charts/banlieue/files/rbac/$r.yaml; done
  cp config/admission/provider-accounts.yaml config/admission/import-jobs.yaml config/admission/provider-writes.yaml config/admission/controller-secrets.yaml config/admission/operator-workloads.yaml charts/banlieue/files/admission/`)
	}
}

// TestChartMatchesKustomize: `helm template -n banlieue-system` with the default values and
// `kubectl kustomize config/default` render the same objects, field for field, up to the labels
// helm alone sets and the release namespace itself, which helm creates (--create-namespace).
func TestChartMatchesKustomize(t *testing.T) {
	helm := helmBinary(t)
	kust := normalise(parseObjects(t, renderKustomize(t)))
	if _, ok := kust["Namespace "+systemNS]; !ok {
		t.Fatalf("config/default renders no Namespace %s", systemNS)
	}
	delete(kust, "Namespace "+systemNS)
	// As `helm upgrade` renders it, the API serving ProviderClasses (a first install's
	// rendering lacks only the ProviderClass: TestChartFirstInstallProviderClass).
	chart := normalise(parseObjects(t, renderChart(t, helm, "--api-versions", providerClassAPI)))
	var keys []string
	for k := range kust {
		keys = append(keys, k)
	}
	for k := range chart {
		if _, ok := kust[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		a, inKust := kust[k]
		b, inChart := chart[k]
		switch {
		case !inChart:
			t.Errorf("%s: rendered by config/default, not by the chart", k)
		case !inKust:
			t.Errorf("%s: rendered by the chart, not by config/default", k)
		default:
			var diffs []string
			diffPaths("", a.Object, b.Object, &diffs)
			if len(diffs) > 0 {
				t.Errorf("%s differs:\n  %s", k, strings.Join(diffs, "\n  "))
			}
		}
	}
	t.Logf("%d objects compared", len(keys))
	// Every object carries part-of on both sides (the comparison kept it).
	for k, o := range chart {
		if o.GetLabels()["app.kubernetes.io/part-of"] != "banlieue" {
			t.Errorf("%s lacks app.kubernetes.io/part-of: banlieue", k)
		}
	}
}

// providerClassAPI is how helm's capabilities name the ProviderClass kind.
const providerClassAPI = "banlieue.io/v1alpha1/ProviderClass"

// TestChartFirstInstallProviderClass: where the API does not serve ProviderClasses yet (a first
// install, the CRDs in the same release) the default ProviderClass is left out, and NOTES.txt
// says how to create it; with the kind served (an upgrade) or crds.enabled=false (the CRDs
// installed beforehand) it is rendered. Nothing else changes.
func TestChartFirstInstallProviderClass(t *testing.T) {
	helm := helmBinary(t)
	first := normalise(parseObjects(t, renderChart(t, helm)))
	upgrade := normalise(parseObjects(t, renderChart(t, helm, "--api-versions", providerClassAPI)))
	const class = "ProviderClass.banlieue.io libvirt"
	if _, ok := first[class]; ok {
		t.Errorf("a first install renders %s", class)
	}
	if _, ok := upgrade[class]; !ok {
		t.Errorf("an upgrade renders no %s", class)
	}
	delete(upgrade, class)
	if !reflect.DeepEqual(first, upgrade) {
		t.Errorf("a first install and an upgrade differ beyond the ProviderClass")
	}
	noCRDs := parseObjects(t, renderChart(t, helm, "--set", "crds.enabled=false"))
	if !slices.ContainsFunc(noCRDs, func(o *unstructured.Unstructured) bool { return objectKey(o) == class }) {
		t.Errorf("crds.enabled=false renders no %s", class)
	}
}

// TestChartCRDValues: crds.enabled=false renders no CRD and nothing else less; crds.keep=false
// drops the keep policy, which the default sets on every CRD.
func TestChartCRDValues(t *testing.T) {
	helm := helmBinary(t)
	count := func(args ...string) (crds, others, kept int) {
		// With the kind served, so that the ProviderClass is rendered either way.
		for _, o := range parseObjects(t, renderChart(t, helm, append(args, "--api-versions", providerClassAPI)...)) {
			if o.GetKind() != "CustomResourceDefinition" {
				others++
				continue
			}
			crds++
			if o.GetAnnotations()["helm.sh/resource-policy"] == "keep" {
				kept++
			}
		}
		return crds, others, kept
	}
	n, others, kept := count()
	if n != len(crds) || kept != n {
		t.Errorf("defaults: %d CRDs, %d with the keep policy; want %d, all kept", n, kept, len(crds))
	}
	if n, o, _ := count("--set", "crds.enabled=false"); n != 0 || o != others {
		t.Errorf("crds.enabled=false: %d CRDs and %d other objects, want 0 and %d", n, o, others)
	}
	if n, _, kept := count("--set", "crds.keep=false"); n != len(crds) || kept != 0 {
		t.Errorf("crds.keep=false: %d CRDs, %d kept; want %d, none kept", n, kept, len(crds))
	}
}

// TestChartValues renders the chart with non-default values and checks that each lands where
// the docs say.
func TestChartValues(t *testing.T) {
	helm := helmBinary(t)
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	objs := parseObjects(t, renderChart(t, helm, append(nonDefaultValues(digest), "--api-versions", providerClassAPI)...))
	byKind := map[string][]*unstructured.Unstructured{}
	for _, o := range objs {
		byKind[o.GetKind()] = append(byKind[o.GetKind()], o)
	}
	if n := len(byKind["Namespace"]); n != 0 {
		t.Errorf("namespaces.create=false still renders %d Namespaces", n)
	}
	if n := len(byKind["CustomResourceDefinition"]); n != len(crds) {
		t.Errorf("%d CRDs, want %d", n, len(crds))
	}
	if len(byKind["Deployment"]) != 3 {
		t.Fatalf("%d Deployments, want 3", len(byKind["Deployment"]))
	}
	for _, d := range byKind["Deployment"] {
		role := strings.TrimPrefix(d.GetName(), "banlieue-")
		str := func(f ...string) string { s, _, _ := unstructured.NestedString(d.Object, f...); return s }
		pod := []string{"spec", "template", "spec"}
		ctrs, _, _ := unstructured.NestedSlice(d.Object, append(pod, "containers")...)
		ctr := ctrs[0].(map[string]any)
		wantImage := "my.registry:5000/banlieue:v9@" + digest
		if ctr["image"] != wantImage || ctr["imagePullPolicy"] != "Always" {
			t.Errorf("%s: image %v pull %v, want %s Always", role, ctr["image"], ctr["imagePullPolicy"], wantImage)
		}
		args, _, _ := unstructured.NestedStringSlice(ctr, "args")
		for _, want := range []string{"--log-format=text", "--log-level=debug"} {
			if !slices.Contains(args, want) {
				t.Errorf("%s: args %q lack %s", role, args, want)
			}
		}
		if role == "operator" && !slices.Contains(args, "--watch-namespace=tenants") {
			t.Errorf("operator: args %q lack the extraArgs", args)
		}
		// Build Jobs must run the image the install runs, never the binary's default
		// banlieue:<version>, which no registry of the install has.
		if build := envValue(ctr, "BANLIEUE_BUILD_IMAGE"); (role == "imagebuilder") != (build != "") ||
			role == "imagebuilder" && build != wantImage {
			t.Errorf("%s: BANLIEUE_BUILD_IMAGE %q, want %s on the imagebuilder only", role, build, wantImage)
		}
		if sel := str(append(pod, "nodeSelector", "banlieue.io/infra")...); sel != "true" {
			t.Errorf("%s: nodeSelector %q", role, sel)
		}
		tol, _, _ := unstructured.NestedSlice(d.Object, append(pod, "tolerations")...)
		ps, _, _ := unstructured.NestedSlice(d.Object, append(pod, "imagePullSecrets")...)
		if len(tol) != 1 || len(ps) != 1 {
			t.Errorf("%s: tolerations %v, imagePullSecrets %v", role, tol, ps)
		}
		replicas, _, _ := unstructured.NestedFloat64(d.Object, "spec", "replicas") // JSON numbers
		mem, _, _ := unstructured.NestedString(ctr, "resources", "limits", "memory")
		if role == "controller" && (replicas != 2 || mem != "1Gi") {
			t.Errorf("controller: replicas %v memory limit %q, want 2 and 1Gi", replicas, mem)
		}
		if role != "controller" && mem != "512Mi" {
			t.Errorf("%s: memory limit %q, want the default 512Mi", role, mem)
		}
	}
	pvc := byKind["PersistentVolumeClaim"]
	if len(pvc) != 1 {
		t.Fatalf("%d PVCs", len(pvc))
	}
	class, _, _ := unstructured.NestedString(pvc[0].Object, "spec", "storageClassName")
	size, _, _ := unstructured.NestedString(pvc[0].Object, "spec", "resources", "requests", "storage")
	modes, _, _ := unstructured.NestedStringSlice(pvc[0].Object, "spec", "accessModes")
	if class != "cephfs" || size != "500Gi" || !slices.Equal(modes, []string{"ReadWriteOnce"}) {
		t.Errorf("PVC: class %q size %q modes %q", class, size, modes)
	}
	pcs := byKind["ProviderClass"]
	if len(pcs) != 1 || pcs[0].GetName() != "libvirt-custom" {
		t.Fatalf("ProviderClasses %v, want libvirt-custom", pcs)
	}
	img, _, _ := unstructured.NestedMap(pcs[0].Object, "spec", "image")
	wantImg := map[string]any{"repository": "my.registry:5000/banlieue", "tag": "v9", "digest": digest, "pullPolicy": "Always",
		"pullSecrets": []any{map[string]any{"name": "regcred"}}}
	if !reflect.DeepEqual(img, wantImg) {
		t.Errorf("ProviderClass image %v, want %v", img, wantImg)
	}
	level, _, _ := unstructured.NestedString(pcs[0].Object, "spec", "logging", "level")
	if level != "debug" {
		t.Errorf("ProviderClass logging.level %q", level)
	}

	// storageClassName "-" is an explicit empty class; providerClass.create=false drops it.
	objs = parseObjects(t, renderChart(t, helm, "--set", "artifacts.storageClassName=-", "--set", "providerClass.create=false",
		"--api-versions", providerClassAPI))
	for _, o := range objs {
		switch o.GetKind() {
		case "PersistentVolumeClaim":
			class, found, _ := unstructured.NestedString(o.Object, "spec", "storageClassName")
			if !found || class != "" {
				t.Errorf("storageClassName=-: got %q (set %v), want an explicit empty class", class, found)
			}
		case "ProviderClass":
			t.Errorf("providerClass.create=false still renders ProviderClass %s", o.GetName())
		}
	}
}

// nonDefaultValues sets every documented value to something other than its default.
func nonDefaultValues(digest string) []string {
	values := []string{
		"image.repository=my.registry:5000/banlieue", "image.tag=v9", "image.digest=" + digest,
		"image.pullPolicy=Always", "imagePullSecrets[0].name=regcred",
		"namespaces.create=false", "log.format=text", "log.level=debug",
		"controller.replicas=2", "controller.resources.limits.memory=1Gi", "controller.resources.requests.memory=256Mi",
		"operator.extraArgs[0]=--watch-namespace=tenants",
		"nodeSelector.banlieue\\.io/infra=true",
		"tolerations[0].key=dedicated", "tolerations[0].operator=Exists", "tolerations[0].effect=NoSchedule",
		"artifacts.size=500Gi", "artifacts.storageClassName=cephfs", "artifacts.accessModes[0]=ReadWriteOnce",
		"providerClass.name=libvirt-custom", "providerClass.pullSecrets[0].name=regcred",
		"podSecurityContext.runAsUser=1000", "podSecurityContext.runAsGroup=1000", "podSecurityContext.fsGroup=1000",
		"securityContext.capabilities.add[0]=NET_BIND_SERVICE",
		"topologySpreadConstraints[0].maxSkew=1", "topologySpreadConstraints[0].topologyKey=kubernetes.io/hostname",
		"topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway", "topologySpreadConstraints[0].matchLabelKeys[0]=pod-template-hash",
		"affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight=1",
		"affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].key=banlieue.io/infra",
		"affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].operator=Exists",
	}
	values = append(values, jobValues...)
	var args []string
	for _, v := range values {
		args = append(args, "--set", v)
	}
	// "true" would become a bool through --set; a nodeSelector value must stay a string.
	return append(args, "--set-string", "nodeSelector.banlieue\\.io/infra=true")
}

// installCRDsAndNamespaces is the documented first step: CRDs (Established) and namespaces.
func installCRDsAndNamespaces(t *testing.T, c *cluster) {
	t.Helper()
	for _, dir := range []string{"crd", "namespaces"} {
		if out, errOut, err := c.run("apply", "--server-side", "-k", filepath.Join(testenv.RepoRoot(), "config", dir)); err != nil {
			t.Fatalf("kubectl apply --server-side -k config/%s: %v\n%s%s", dir, err, out, errOut)
		}
	}
	if out, errOut, err := c.run("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all"); err != nil {
		t.Fatalf("kubectl wait for the CRDs: %v\n%s%s", err, out, errOut)
	}
}

// TestRenderingsApplyDryRun server-side applies (dry run) the kustomize rendering, the chart's
// default rendering and a rendering with every value changed to an API server that holds only
// the CRDs and the namespaces: every object must be accepted, without warnings.
func TestRenderingsApplyDryRun(t *testing.T) {
	helm := helmBinary(t)
	renderings := []struct {
		name string
		data []byte
	}{
		{"kubectl kustomize config/default", renderKustomize(t)},
		{"helm template (default values)", renderChart(t, helm)},
		{"helm template (every value set)", renderChart(t, helm, nonDefaultValues("sha256:"+strings.Repeat("ab", 32))...)},
	}
	start := time.Now()
	c := startCluster(t)
	installCRDsAndNamespaces(t, c)
	t.Logf("API server up with CRDs and namespaces in %v", time.Since(start).Round(time.Millisecond))
	for _, r := range renderings {
		objs := parseObjects(t, r.data)
		file := filepath.Join(t.TempDir(), "rendering.yaml")
		if err := os.WriteFile(file, r.data, 0o600); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		out, errOut, err := c.run("apply", "--server-side", "--dry-run=server", "-f", file)
		if err != nil {
			t.Errorf("%s | kubectl apply --server-side --dry-run=server: %v\n%s%s", r.name, err, out, errOut)
			continue
		}
		if strings.Contains(errOut, "Warning") {
			t.Errorf("%s | kubectl apply --dry-run=server printed warnings:\n%s", r.name, errOut)
		}
		if n := strings.Count(out, "serverside-applied (server dry run)"); n != len(objs) {
			t.Errorf("%s: %d of %d objects applied (dry run):\n%s", r.name, n, len(objs), out)
		}
		t.Logf("%s: %d objects accepted (dry run) in %v", r.name, len(objs), time.Since(start).Round(time.Millisecond))
	}
}

// helmCLI runs helm against the cluster, with a private helm home (no repositories, cache or
// config of the machine's user); it fails the test when helm fails.
func helmCLI(t *testing.T, helm string, c *cluster) func(args ...string) string {
	kubeconfig := c.kubectl[len(c.kubectl)-1] // --kubeconfig=<file>, as envtest's kubectl gets it
	if !strings.HasPrefix(kubeconfig, "--kubeconfig=") {
		t.Fatalf("envtest kubectl options %q carry no --kubeconfig", c.kubectl[1:])
	}
	home := t.TempDir()
	return func(args ...string) string {
		t.Helper()
		start := time.Now()
		var out, errOut bytes.Buffer
		cmd := exec.Command(helm, append(args, kubeconfig)...)
		cmd.Dir = testenv.RepoRoot()
		cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("helm %q: %v\n%s%s", args, err, out.String(), errOut.String())
		}
		t.Logf("helm %s in %v", strings.Join(args[:2], " "), time.Since(start).Round(time.Millisecond))
		return out.String() + errOut.String()
	}
}

// TestHelmInstall runs the documented `helm install -n banlieue-system --create-namespace`
// against an empty API server, a `helm upgrade`, one with a changed CRD, then `helm uninstall`.
func TestHelmInstall(t *testing.T) {
	helm := helmBinary(t)
	start := time.Now()
	c := startCluster(t)
	t.Logf("API server up in %v", time.Since(start).Round(time.Millisecond))
	runHelm := helmCLI(t, helm, c)
	// A first install cannot create the ProviderClass (its CRD is in the same release): NOTES.txt
	// says to upgrade once, which does.
	notes := runHelm("install", "banlieue", chartDir(), "--namespace", systemNS, "--create-namespace")
	if !strings.Contains(notes, "helm upgrade banlieue <this chart> -n "+systemNS+" --reuse-values") {
		t.Errorf("helm install output lacks the upgrade that creates the ProviderClass:\n%s", notes)
	}
	if out, _, err := c.run("get", "providerclass", "libvirt", "-o", "name"); err == nil {
		t.Errorf("after a first helm install: %s exists", strings.TrimSpace(out))
	}
	notes = runHelm("upgrade", "banlieue", chartDir(), "--namespace", systemNS, "--reuse-values")
	if !strings.Contains(notes, "kubectl get providerclass libvirt") {
		t.Errorf("helm upgrade output lacks the ProviderClass:\n%s", notes)
	}

	// What the install created, read back as the objects config/default would have created
	// (its Namespace banlieue-system is helm's --create-namespace here).
	want := normalise(parseObjects(t, renderKustomize(t)))
	byNamespace := map[string][]string{}
	for _, o := range want {
		resource := strings.ToLower(o.GetKind())
		if g := o.GroupVersionKind().Group; g != "" {
			resource += "." + g
		}
		byNamespace[o.GetNamespace()] = append(byNamespace[o.GetNamespace()], resource+"/"+o.GetName())
	}
	for ns, names := range byNamespace {
		args := append([]string{"get", "-o", "name"}, names...)
		if ns != "" {
			args = append(args, "-n", ns)
		}
		if out, errOut, err := c.run(args...); err != nil {
			t.Errorf("objects of config/default in namespace %q after helm install: %v\n%s%s", ns, err, out, errOut)
		} else if n := strings.Count(out, "\n"); n != len(names) {
			t.Errorf("namespace %q: %d of %d objects found after helm install:\n%s", ns, n, len(names), out)
		}
	}
	if out, errOut, err := c.run("get", "providerclass", "libvirt", "-o", "jsonpath={.spec.image.repository}:{.spec.image.tag}"); err != nil || out != image {
		t.Errorf("ProviderClass libvirt image %q (%v %s), want %s", out, err, errOut, image)
	}

	// A changed CRD reaches the API server through helm upgrade alone (the CRDs are templates).
	changed := t.TempDir()
	if err := os.CopyFS(changed, os.DirFS(chartDir())); err != nil {
		t.Fatal(err)
	}
	crdFile := filepath.Join(changed, "files", "crds", "banlieue.io_vmimages.yaml")
	data, err := os.ReadFile(crdFile)
	if err != nil {
		t.Fatal(err)
	}
	const column = "  - additionalPrinterColumns:\n"
	if !strings.Contains(string(data), column) {
		t.Fatalf("%s: no additionalPrinterColumns to extend", crdFile)
	}
	data = []byte(strings.Replace(string(data), column, column+"    - jsonPath: .metadata.uid\n      name: UpgradeProbe\n      type: string\n", 1))
	if err := os.WriteFile(crdFile, data, 0o600); err != nil {
		t.Fatal(err)
	}
	runHelm("upgrade", "banlieue", changed, "--namespace", systemNS)
	if out, errOut, err := c.run("get", "crd", "vmimages.banlieue.io", "-o", "jsonpath={.spec.versions[0].additionalPrinterColumns[*].name}"); err != nil ||
		!strings.Contains(out, "UpgradeProbe") {
		t.Errorf("vmimages.banlieue.io printer columns after helm upgrade of a changed CRD: %q (%v %s), want UpgradeProbe", out, err, errOut)
	}

	runHelm("uninstall", "banlieue", "--namespace", systemNS, "--wait=false")
	for _, role := range roles {
		if out, _, err := c.run("get", "clusterrole", "banlieue-"+role, "-o", "name"); err == nil {
			t.Errorf("after helm uninstall: %s still exists", strings.TrimSpace(out))
		}
	}
	// The CRDs carry helm.sh/resource-policy: keep (crds.keep), so uninstall leaves them and
	// every VirtualMachine with them (the guide says so); the ProviderClass, a release object, goes.
	for _, name := range crds {
		if out, errOut, err := c.run("get", "crd", name, "-o", "name"); err != nil {
			t.Errorf("after helm uninstall CRD %s should stay: %v\n%s%s", name, err, out, errOut)
		}
	}
	if out, _, err := c.run("get", "providerclass", "libvirt", "-o", "name"); err == nil {
		t.Errorf("after helm uninstall: %s still exists", strings.TrimSpace(out))
	}
}

// TestHelmInstallReleaseNamespace installs the chart into a release namespace other than
// banlieue-system: every namespaced object of the roles lands there, nothing names
// banlieue-system, and the roles' accounts, impersonated there, hold what they need and nothing
// more (the same boundary checks as config/default's TestInstall).
func TestHelmInstallReleaseNamespace(t *testing.T) {
	const ns = "ops"
	helm := helmBinary(t)
	rendered := renderChart(t, helm, "--namespace", ns, "--set", "monitoring.service.enabled=true",
		"--set", "monitoring.serviceMonitor.enabled=true", "--set", "monitoring.prometheusRule.enabled=true",
		"--set", "monitoring.dashboard.enabled=true")
	if strings.Contains(string(rendered), systemNS) {
		for i, line := range strings.Split(string(rendered), "\n") {
			if strings.Contains(line, systemNS) {
				t.Errorf("helm template -n %s, line %d names %s: %s", ns, i+1, systemNS, strings.TrimSpace(line))
			}
		}
	}
	for _, o := range parseObjects(t, rendered) {
		switch {
		case o.GetKind() == "Namespace" && o.GetName() != buildNS:
			t.Errorf("helm template -n %s renders Namespace %s; helm's --create-namespace creates the release namespace", ns, o.GetName())
		case o.GetNamespace() != "" && o.GetNamespace() != ns && o.GetNamespace() != buildNS:
			t.Errorf("%s: namespace %q, want %s or %s", objectKey(o), o.GetNamespace(), ns, buildNS)
		}
	}
	if _, errOut, err := helmTemplate(helm, "--namespace", buildNS); err == nil ||
		!strings.Contains(errOut, "the release namespace may not be "+buildNS) {
		t.Errorf("helm template -n %s: err %v, output %q; want the chart's refusal", buildNS, err, errOut)
	}

	start := time.Now()
	c := startCluster(t)
	t.Logf("API server up in %v", time.Since(start).Round(time.Millisecond))
	runHelm := helmCLI(t, helm, c)
	runHelm("install", "banlieue", chartDir(), "--namespace", ns, "--create-namespace")
	ctx := context.Background()
	for _, role := range roles {
		var d appsv1.Deployment
		if err := c.admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "banlieue-" + role}, &d); err != nil {
			t.Fatalf("Deployment %s/banlieue-%s: %v", ns, role, err)
		}
		checkDeployment(t, role, &d)
	}
	if err := c.admin.Get(ctx, client.ObjectKey{Name: systemNS}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		t.Errorf("Namespace %s after helm install -n %s: want not found, got %v", systemNS, ns, err)
	}
	checkRoleBoundaries(t, c, ns)
	// An account of the same name in banlieue-system is nobody's: the bindings name ops only.
	if err := c.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: systemNS}}); err != nil {
		t.Fatal(err)
	}
	for _, role := range roles {
		testenv.Forbidden(t, systemNS+"/banlieue-"+role+" lists VirtualMachines",
			c.as(t, systemNS, "banlieue-"+role).List(ctx, &banlieuev1.VirtualMachineList{}))
	}
}

// envValue is the value of the container's environment variable name, or "".
func envValue(ctr map[string]any, name string) string {
	env, _, _ := unstructured.NestedSlice(ctr, "env")
	for _, e := range env {
		if m, ok := e.(map[string]any); ok && m["name"] == name {
			v, _ := m["value"].(string)
			return v
		}
	}
	return ""
}
