package testenv

import (
	"encoding/json"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ClusterAPIVersion is the Cluster API release whose CRDs tests install (hack/capi-assets.sh
// builds its manager).
const ClusterAPIVersion = "v1.14.2"

// Cluster API CRDs by their file in its module: <component>/<group>_<plural>.
const (
	CAPIMachines               = "core/cluster.x-k8s.io_machines"
	CAPIClusters               = "core/cluster.x-k8s.io_clusters"
	CAPIMachineDeployments     = "core/cluster.x-k8s.io_machinedeployments"
	CAPIKubeadmControlPlanes   = "controlplane/kubeadm/controlplane.cluster.x-k8s.io_kubeadmcontrolplanes"
	CAPIKubeadmConfigTemplates = "bootstrap/kubeadm/bootstrap.cluster.x-k8s.io_kubeadmconfigtemplates"
)

// InstallClusterAPICRDs creates Cluster API's own CRDs (CAPIMachines, …) from its module,
// downloaded through the Go module proxy (cached after the first time), and waits until they are
// served. banlieue's go.mod does not require the module.
func (e *Env) InstallClusterAPICRDs(t testing.TB, crds ...string) {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", "sigs.k8s.io/cluster-api@"+ClusterAPIVersion).Output()
	if err != nil {
		t.Fatalf("go mod download sigs.k8s.io/cluster-api@%s: %v", ClusterAPIVersion, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download: %v (%s)", err, out)
	}
	names := make([]string, 0, len(crds))
	for _, crd := range crds {
		dir, base := path.Split(crd)
		file := filepath.Join(mod.Dir, dir, "config", "crd", "bases", base+".yaml")
		if out, err := e.Kubectl(t, "apply", "--server-side", "-f", file); err != nil {
			t.Fatalf("kubectl apply %s: %v\n%s", file, err, out)
		}
		group, plural, _ := strings.Cut(base, "_")
		names = append(names, "crd/"+plural+"."+group)
	}
	// kubectl wait fails at once, rather than waits, on a CRD whose status has no conditions
	// yet ("accessor error"), as one just created may not: such a refusal is asked again.
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := e.Kubectl(t, append([]string{"wait", "--for=condition=Established", "--timeout=60s"}, names...)...)
		if err == nil {
			return
		}
		if !strings.Contains(string(out), "accessor error") || time.Now().After(deadline) {
			t.Fatalf("waiting for Cluster API's CRDs: %v\n%s", err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// CAPIObject is a Cluster API object of kind (cluster.x-k8s.io/v1beta2) in ns with spec, as
// Cluster API's controllers write it: tests speak to Cluster API's kinds as unstructured objects,
// as banlieue does (it does not depend on Cluster API's module).
func CAPIObject(kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion("cluster.x-k8s.io/v1beta2")
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}
