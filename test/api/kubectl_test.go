package api

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"

	"banlieue.io/banlieue/internal/testenv"
)

// Short names of the virtualisation kinds a banlieue cluster is likely to share with, read from
// their CRD definitions: KubeVirt (pkg/virt-operator/resource/generate/components/crds.go) and
// vm-operator (api/v1alpha*/ kubebuilder markers). Built-in kinds come from discovery.
var foreignShortNames = []string{
	// KubeVirt
	"vm", "vms", "vmi", "vmis", "vmipreset", "vmipresets", "vmirs", "vmirss", "vmim", "vmims", "kv", "kvs",
	"vmpool", "vmpools", "vmsnapshot", "vmsnapshots", "vmsnapshotcontent", "vmsnapshotcontents", "vmrestore",
	"vmrestores", "vmexport", "vmexports", "vminstancetype", "vminstancetypes", "vmf", "vmfs",
	"vmclusterinstancetype", "vmclusterinstancetypes", "vmcf", "vmcfs", "vmpref", "vmprefs", "vmp", "vmps",
	"vmcp", "vmcps", "vmclone", "vmclones",
	// vm-operator
	"vmclass", "vmclassbinding", "vmclassinstance", "vmimage", "cvmi", "cvmimage", "clustervmi", "clustervmimage",
	"vmic", "vmicache", "vmimagecache", "vmg", "vmpub",
}

// TestKubectlSurface checks what `kubectl get` shows of banlieue: names no other kind answers to,
// the default columns, and `kubectl scale` on a pool.
func TestKubectlSurface(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("short names are banlieue's alone", func(t *testing.T) {
		dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
		if err != nil {
			t.Fatal(err)
		}
		lists, err := dc.ServerPreferredResources()
		if err != nil {
			t.Fatal(err)
		}
		taken := map[string]string{} // name a resource answers to → the resource
		ours := map[string][]string{}
		for _, l := range lists {
			for _, r := range l.APIResources {
				id := r.Name + "." + l.GroupVersion
				if strings.Contains(l.GroupVersion, "banlieue.io") {
					ours[id] = r.ShortNames
					continue
				}
				for _, n := range append([]string{r.Name, r.SingularName}, r.ShortNames...) {
					taken[n] = id
				}
			}
		}
		for _, n := range foreignShortNames {
			taken[n] = "KubeVirt or vm-operator"
		}
		// Every CRD of config/crd/bases is served, each with its one short name.
		if want := len(readCRDs(t)); len(ours) != want || want < 13 {
			t.Errorf("banlieue serves %d resources, want the %d of config/crd/bases (at least 13): %v", len(ours), want, ours)
		}
		for id, short := range ours {
			if len(short) != 1 {
				t.Errorf("%s has short names %v, want exactly one", id, short)
			}
			for _, n := range short {
				if other, ok := taken[n]; ok {
					t.Errorf("%s's short name %q is also %s", id, n, other)
				}
			}
		}
		if other, ok := taken["pc"]; !ok || !strings.HasPrefix(other, "priorityclasses") {
			t.Errorf("discovery must list PriorityClass's short name pc (the clash this test exists for); got %q", other)
		}
	})

	for _, ns := range []string{"default"} {
		_ = env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}

	t.Run("kubectl get bvm shows the phase and the IP", func(t *testing.T) {
		vm := parse(validVirtualMachine)
		if err := env.Client.Create(ctx, vm); err != nil {
			t.Fatal(err)
		}
		status := map[string]any{
			"phase":              "Ready",
			"observedPowerState": "PoweredOn",
			"addresses": []any{
				map[string]any{"type": "Hostname", "address": "default-vm"},
				map[string]any{"type": "InternalIP", "address": "192.0.2.10"},
				map[string]any{"type": "InternalIP", "address": "fd00::10"},
			},
		}
		if err := unstructured.SetNestedField(vm.Object, status, "status"); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Status().Update(ctx, vm); err != nil {
			t.Fatal(err)
		}
		out, err := env.Kubectl(t, "get", "bvm", "-n", "default", "vm")
		if err != nil {
			t.Fatalf("kubectl get bvm: %v\n%s", err, out)
		}
		header, row := table(t, out)
		want := []string{"NAME", "CLASS", "IMAGE", "PROVIDER", "PHASE", "POWER", "IP", "READY", "AGE"}
		if !slices.Equal(header, want) {
			t.Fatalf("columns %v, want %v", header, want)
		}
		// Unscheduled: PROVIDER and READY are empty; the first InternalIP is the one shown.
		if got := row[:8]; !slices.Equal(got, []string{"vm", "cls", "img", "", "Ready", "PoweredOn", "192.0.2.10", ""}) {
			t.Errorf("row %v", row)
		}
	})

	t.Run("kubectl get bimg and bpc show providers and the full image", func(t *testing.T) {
		img := parse(validVMImage)
		pc := parse(validProviderClass)
		for _, o := range []*unstructured.Unstructured{img, pc} {
			if err := env.Client.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		_ = unstructured.SetNestedField(img.Object, "5/6", "status", "readyProviders")
		_ = unstructured.SetNestedField(pc.Object, "registry.example/banlieue:v1", "status", "image")
		for _, o := range []*unstructured.Unstructured{img, pc} {
			if err := env.Client.Status().Update(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		for _, tt := range []struct {
			args   []string
			column string
			want   string
		}{
			{[]string{"get", "bimg", "img"}, "PROVIDERS", "5/6"},
			{[]string{"get", "bpc", "pc"}, "IMAGE", "registry.example/banlieue:v1"},
		} {
			out, err := env.Kubectl(t, tt.args...)
			if err != nil {
				t.Fatalf("kubectl %v: %v\n%s", tt.args, err, out)
			}
			header, row := table(t, out)
			if i := slices.Index(header, tt.column); i < 0 || row[i] != tt.want {
				t.Errorf("kubectl %v: column %s of %v / %v, want %q", tt.args, tt.column, header, row, tt.want)
			}
		}
	})

	t.Run("kubectl scale bpool sets warmReplicas within maxReplicas", func(t *testing.T) {
		pool := parse(validPool)
		if err := env.Client.Create(ctx, pool); err != nil {
			t.Fatal(err)
		}
		if out, err := env.Kubectl(t, "scale", "-n", "default", "bpool/pool", "--replicas=3"); err != nil {
			t.Fatalf("kubectl scale: %v\n%s", err, out)
		}
		out, err := env.Kubectl(t, "get", "-n", "default", "bpool", "pool", "-o", "jsonpath={.spec.warmReplicas}")
		if err != nil || out != "3" {
			t.Errorf("warmReplicas after scaling to 3: %q, %v", out, err)
		}
		out, err = env.Kubectl(t, "scale", "-n", "default", "bpool/pool", "--replicas=4")
		if err == nil || !strings.Contains(out, "warmReplicas must not exceed maxReplicas") {
			t.Errorf("scaling past maxReplicas 3: %v\n%s", err, out)
		}
	})
}

// table splits kubectl's one-object table output into its header and its row, cell by cell at
// the header's column offsets: an empty cell would shift every later one if split on spaces.
func table(t *testing.T, out string) (header, row []string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("want a header and one row, got:\n%s", out)
	}
	var starts []int
	for i, c := range lines[0] {
		if c != ' ' && (i == 0 || lines[0][i-1] == ' ') {
			starts = append(starts, i)
		}
	}
	cell := func(line string, i int) string {
		end := len(line)
		if i+1 < len(starts) {
			end = min(end, starts[i+1])
		}
		if starts[i] >= len(line) {
			return ""
		}
		return strings.TrimSpace(line[starts[i]:end])
	}
	for i := range starts {
		header = append(header, cell(lines[0], i))
		row = append(row, cell(lines[1], i))
	}
	return header, row
}
