package testenv

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"
)

// ClusterAPIVersion is the Cluster API release whose CRDs tests install (hack/capi-assets.sh
// builds its manager).
const ClusterAPIVersion = "v1.14.2"

// InstallClusterAPICRDs creates Cluster API's own CRDs of the given kinds' plurals (machines,
// clusters, …) from its module, downloaded through the Go module proxy (cached after the first
// time), and waits until they are served. banlieue's go.mod does not require the module.
func (e *Env) InstallClusterAPICRDs(t testing.TB, plurals ...string) {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", "sigs.k8s.io/cluster-api@"+ClusterAPIVersion).Output()
	if err != nil {
		t.Fatalf("go mod download sigs.k8s.io/cluster-api@%s: %v", ClusterAPIVersion, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download: %v (%s)", err, out)
	}
	bases := filepath.Join(mod.Dir, "core", "config", "crd", "bases")
	names := make([]string, 0, len(plurals))
	for _, p := range plurals {
		file := filepath.Join(bases, "cluster.x-k8s.io_"+p+".yaml")
		if out, err := e.Kubectl(t, "apply", "--server-side", "-f", file); err != nil {
			t.Fatalf("kubectl apply %s: %v\n%s", file, err, out)
		}
		names = append(names, "crd/"+p+".cluster.x-k8s.io")
	}
	if out, err := e.Kubectl(t, append([]string{"wait", "--for=condition=Established", "--timeout=60s"}, names...)...); err != nil {
		t.Fatalf("waiting for Cluster API's CRDs: %v\n%s", err, out)
	}
}
