package hardening

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
)

const ns = "banlieue-hardening"

// secretNeedles are the strings whose presence anywhere proves a leak: every line of the
// client key's PEM body, and every 40-character run of the PEM's base64 encoding (the form
// the key takes in a Secret's JSON).
func secretNeedles(keyPEM []byte) []string {
	var needles []string
	for line := range strings.SplitSeq(string(keyPEM), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "-----") {
			continue
		}
		needles = append(needles, line)
	}
	enc := base64.StdEncoding.EncodeToString(keyPEM)
	for i := 0; i+40 <= len(enc); i += 40 {
		needles = append(needles, enc[i:i+40])
	}
	return needles
}

// leak returns the first needle found in b, or "".
func leak(b []byte, needles []string) string {
	for _, n := range needles {
		if bytes.Contains(b, []byte(n)) {
			return n
		}
	}
	return ""
}

type proc struct {
	name string
	*testenv.Process
}

// startRole runs one role of the binary, watching ns, until the test ends.
func startRole(t *testing.T, bin, kubeconfig, name string, args ...string) *proc {
	t.Helper()
	args = append(args, "--namespace", ns, "--no-leader-elect",
		"--health-port", strconv.Itoa(testenv.FreePort(t)), "--metrics-port", "0")
	return &proc{name: name, Process: testenv.StartRole(t, bin, kubeconfig, args...)}
}

// banlieuePIDs are the running processes executing bin (the roles and anything they start).
func banlieuePIDs(bin string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err == nil && (exe == bin || strings.HasPrefix(exe, bin+" ")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// scanProc checks /proc/<pid>/cmdline and environ of every banlieue process; it returns how
// many it scanned.
func scanProc(t *testing.T, bin string, needles []string) int {
	t.Helper()
	pids := banlieuePIDs(bin)
	for _, pid := range pids {
		for _, f := range []string{"cmdline", "environ"} {
			b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), f))
			if err != nil {
				continue // exited meanwhile
			}
			if n := leak(b, needles); n != "" {
				t.Errorf("/proc/%d/%s contains client key material %q", pid, f, n)
			}
		}
	}
	return len(pids)
}

func TestSecretsNeverLeak(t *testing.T) {
	lab := testenv.RequireLibvirtLab(t)
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	bin := testenv.Banlieue(t)
	if abs, err := filepath.EvalSymlinks(bin); err == nil {
		bin = abs
	}
	kubeconfig := env.Kubeconfig(t)
	keyPEM := lab.Read(t, "clientkey.pem")
	needles := secretNeedles(keyPEM)
	if len(needles) < 3 {
		t.Fatalf("only %d needles from the client key", len(needles))
	}

	c := env.Client
	must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	must(t, c.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "lab-ca", Namespace: ns},
		Data:       map[string]string{"ca.crt": string(lab.Read(t, "cacert.pem"))},
	}))
	for _, name := range []string{"edge-a", "edge-b"} {
		must(t, c.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-creds", Namespace: ns},
			Data:       map[string][]byte{"tls.crt": lab.Read(t, "clientcert.pem"), "tls.key": keyPEM},
		}))
		must(t, c.Create(ctx, &banlieuev1.Provider{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: banlieuev1.ProviderSpec{
				ProviderClassRef: banlieuev1.LocalObjectReference{Name: "libvirt"},
				Connection: banlieuev1.ProviderConnection{
					Endpoint:       lab.Endpoint,
					CredentialsRef: banlieuev1.LocalObjectReference{Name: name + "-creds"},
					CABundle:       &banlieuev1.CABundleSource{ConfigMapRef: &banlieuev1.KeySelector{Name: "lab-ca"}},
				},
				Capabilities: banlieuev1.ProviderCapabilities{
					StorageClasses: []banlieuev1.StorageClassMapping{{Name: "standard", Target: map[string]string{"pool": "default"}}},
				},
			},
		}))
	}
	// A Provider whose key is wrong: the failure path must not quote the key either.
	must(t, c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "broken-creds", Namespace: ns},
		Data:       map[string][]byte{"tls.crt": keyPEM, "tls.key": keyPEM},
	}))
	must(t, c.Create(ctx, &banlieuev1.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: "broken", Namespace: ns},
		Spec: banlieuev1.ProviderSpec{
			ProviderClassRef: banlieuev1.LocalObjectReference{Name: "libvirt"},
			Connection: banlieuev1.ProviderConnection{
				Endpoint:       lab.Endpoint,
				CredentialsRef: banlieuev1.LocalObjectReference{Name: "broken-creds"},
				CABundle:       &banlieuev1.CABundleSource{ConfigMapRef: &banlieuev1.KeySelector{Name: "lab-ca"}},
			},
		},
	}))

	procs := []*proc{
		startRole(t, bin, kubeconfig, "provider edge-a", "provider", "libvirt", "--provider-name", "edge-a", "--import-service-account", "edge-a-import"),
		startRole(t, bin, kubeconfig, "provider broken", "provider", "libvirt", "--provider-name", "broken", "--import-service-account", "broken-import"),
		startRole(t, bin, kubeconfig, "controller", "controller"),
	}

	// While they run: scan /proc until edge-a has probed the host and broken has failed.
	scanned := 0
	deadline := time.Now().Add(60 * time.Second)
	var edgeA, broken banlieuev1.Provider
	for {
		scanned += scanProc(t, bin, needles)
		must(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "edge-a"}, &edgeA))
		must(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "broken"}, &broken))
		if meta.FindStatusCondition(edgeA.Status.Conditions, banlieuev1.ConditionProviderReachable) != nil &&
			meta.FindStatusCondition(broken.Status.Conditions, banlieuev1.ConditionReady) != nil {
			break
		}
		if time.Now().After(deadline) {
			for _, p := range procs {
				t.Logf("%s output:\n%s", p.name, p.Output())
			}
			t.Fatalf("providers never reported: edge-a %+v, broken %+v", edgeA.Status.Conditions, broken.Status.Conditions)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("edge-a: %+v", edgeA.Status.Conditions)
	t.Logf("broken: %+v", broken.Status.Conditions)
	for range 5 { // a few more reconciles' worth
		scanned += scanProc(t, bin, needles)
		time.Sleep(200 * time.Millisecond)
	}
	if scanned == 0 {
		t.Fatal("found no banlieue process to scan")
	}

	// The import command, once: it reads the Provider's Secret itself. Its source does not
	// exist, so it fails after loading the credentials, on the error path.
	imp := exec.CommandContext(ctx, bin, "provider", "libvirt", "import", "--vmimage", "leak-check",
		"--provider", "edge-a", "--provider-namespace", ns, "--pool", "default",
		"--source", filepath.Join(t.TempDir(), "absent.raw"), "--kubeconfig", kubeconfig)
	impOut, _ := imp.CombinedOutput()
	t.Logf("import: %s", bytes.TrimSpace(impOut))
	if n := leak(impOut, needles); n != "" {
		t.Errorf("import output contains client key material %q", n)
	}

	for _, p := range procs {
		if n := leak(p.Output(), needles); n != "" {
			t.Errorf("%s output contains client key material %q", p.name, n)
		}
	}
	scanEvents(ctx, t, env.Config, needles)
	scanBanlieueObjects(ctx, t, env.Config, needles)
	t.Logf("scanned %d process snapshots, %d needles", scanned, len(needles))

	checkProviderRBAC(ctx, t, env)
}

func scanEvents(ctx context.Context, t *testing.T, cfg *rest.Config, needles []string) {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(cfg)
	evs, err := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	must(t, err)
	for _, ev := range evs.Items {
		b, _ := json.Marshal(ev)
		if n := leak(b, needles); n != "" {
			t.Errorf("event %s/%s contains client key material %q", ev.Namespace, ev.Name, n)
		}
	}
	t.Logf("scanned %d events", len(evs.Items))
}

// scanBanlieueObjects checks every object of every banlieue.io kind, status and all.
func scanBanlieueObjects(ctx context.Context, t *testing.T, cfg *rest.Config, needles []string) {
	t.Helper()
	dc := discovery.NewDiscoveryClientForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	gv := banlieuev1.GroupVersion
	rl, err := dc.ServerResourcesForGroupVersion(gv.String())
	must(t, err)
	objects := 0
	for _, r := range rl.APIResources {
		if strings.Contains(r.Name, "/") {
			continue
		}
		list, err := dyn.Resource(schema.GroupVersionResource{Group: gv.Group, Version: gv.Version, Resource: r.Name}).
			List(ctx, metav1.ListOptions{})
		must(t, err)
		for _, o := range list.Items {
			objects++
			b, _ := json.Marshal(o.Object)
			if n := leak(b, needles); n != "" {
				t.Errorf("%s %s/%s contains client key material %q", r.Kind, o.GetNamespace(), o.GetName(), n)
			}
		}
	}
	t.Logf("scanned %d banlieue objects", objects)
}

// checkProviderRBAC grants two provider workloads the Role the operator gives each (see
// internal/operator roleRules: get on its own credentials Secret by name) and checks, by
// impersonating one ServiceAccount, that it cannot read the other Provider's Secret, nor list
// Secrets.
func checkProviderRBAC(ctx context.Context, t *testing.T, env *testenv.Env) {
	t.Helper()
	c := env.Client
	for _, name := range []string{"edge-a", "edge-b"} {
		sa := "libvirt-" + name
		must(t, c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}}))
		must(t, c.Create(ctx, &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: []string{name + "-creds"}},
				{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}, ResourceNames: []string{"lab-ca"}},
			},
		}))
		must(t, c.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: sa},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}},
		}))
	}
	cs := kubernetes.NewForConfigOrDie(testenv.Impersonating(env.Config, testenv.ServiceAccountUser(ns, "libvirt-edge-a")))
	// RBAC is cached by the authorizer for a moment after the binding is created.
	var own error
	for range 50 {
		if _, own = cs.CoreV1().Secrets(ns).Get(ctx, "edge-a-creds", metav1.GetOptions{}); own == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if own != nil {
		t.Fatalf("edge-a cannot read its own Secret: %v", own)
	}
	for _, other := range []string{"edge-b-creds", "broken-creds"} {
		if _, err := cs.CoreV1().Secrets(ns).Get(ctx, other, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("edge-a reading %s: err = %v, want Forbidden", other, err)
		}
	}
	if _, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("edge-a listing Secrets: err = %v, want Forbidden", err)
	}
	// The same, as the authorizer sees it.
	sar := &authv1.SubjectAccessReview{Spec: authv1.SubjectAccessReviewSpec{
		User: "system:serviceaccount:" + ns + ":libvirt-edge-a",
		ResourceAttributes: &authv1.ResourceAttributes{
			Namespace: ns, Verb: "get", Resource: "secrets", Name: "edge-b-creds",
		},
	}}
	admin := kubernetes.NewForConfigOrDie(env.Config)
	res, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	must(t, err)
	if res.Status.Allowed {
		t.Errorf("SubjectAccessReview allows edge-a to get edge-b-creds: %+v", res.Status)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
