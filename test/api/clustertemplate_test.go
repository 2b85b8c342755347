package api

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"banlieue.io/banlieue/internal/testenv"
)

// variable is clusterctl's variable syntax the template uses: ${NAME} or ${NAME:=default}.
var variable = regexp.MustCompile(`\$\{([A-Z][A-Z0-9_]*)(?::=([^}]*))?\}`)

// substitute replaces the template's variables as clusterctl does (drone/envsubst): a set value,
// else the default, else the variable is reported missing.
func substitute(t *testing.T, text string, vars map[string]string) string {
	t.Helper()
	var missing []string
	out := variable.ReplaceAllStringFunc(text, func(m string) string {
		sub := variable.FindStringSubmatch(m)
		if v, ok := vars[sub[1]]; ok {
			return v
		}
		if strings.Contains(m, ":=") {
			return sub[2]
		}
		missing = append(missing, sub[1])
		return m
	})
	if len(missing) > 0 {
		t.Fatalf("variables without a value or a default: %v", missing)
	}
	return out
}

// TestClusterTemplate: templates/cluster-template.yaml uses only clusterctl's variable syntax,
// the common variables clusterctl generate cluster fills and banlieue's, and, substituted, is
// accepted by a server-side dry run against banlieue's CRDs and Cluster API's own (core,
// kubeadm control plane and bootstrap, from its module).
func TestClusterTemplate(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "templates", "cluster-template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// Every ${…} is of the supported form: a stray $VAR or ${VAR:-x} would reach the cluster.
	if n, m := strings.Count(string(data), "${"), len(variable.FindAllString(string(data), -1)); n != m {
		t.Fatalf("%d ${ in the template, %d of clusterctl's form ${VAR} or ${VAR:=default}", n, m)
	}
	var required []string
	for _, m := range variable.FindAllStringSubmatch(string(data), -1) {
		if !strings.Contains(m[0], ":=") && !slices.Contains(required, m[1]) {
			required = append(required, m[1])
		}
	}
	slices.Sort(required)
	want := []string{"CLUSTER_NAME", "CONTROL_PLANE_ENDPOINT_HOST", "CONTROL_PLANE_MACHINE_COUNT", "KUBERNETES_VERSION",
		"LIBVIRT_POOL", "LIBVIRT_PROVIDER", "LIBVIRT_VMIMAGE", "NAMESPACE", "WORKER_MACHINE_COUNT"}
	if !slices.Equal(required, want) {
		t.Errorf("required variables %v, want %v (docs/guides/cluster-api.md lists them)", required, want)
	}

	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env.InstallClusterAPICRDs(t, testenv.CAPIClusters, testenv.CAPIMachineDeployments,
		testenv.CAPIKubeadmControlPlanes, testenv.CAPIKubeadmConfigTemplates)
	env.Create(ctx, t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "capi-team"}})
	rendered := substitute(t, string(data), map[string]string{
		"CLUSTER_NAME": "edge", "NAMESPACE": "capi-team", "KUBERNETES_VERSION": "v1.37.2",
		"CONTROL_PLANE_MACHINE_COUNT": "3", "WORKER_MACHINE_COUNT": "2", "CONTROL_PLANE_ENDPOINT_HOST": "192.0.2.100",
		"LIBVIRT_PROVIDER": "kvm-1", "LIBVIRT_POOL": "default", "LIBVIRT_VMIMAGE": "ubuntu-2404.qcow2",
	})
	file := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(file, []byte(rendered), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := env.Kubectl(t, "apply", "--server-side", "--dry-run=server", "-f", file)
	if err != nil {
		t.Fatalf("kubectl apply --server-side --dry-run=server: %v\n%s", err, out)
	}
	for _, want := range []string{
		"cluster.cluster.x-k8s.io/edge serverside-applied",
		"libvirtcluster.infrastructure.banlieue.io/edge serverside-applied",
		"kubeadmcontrolplane.controlplane.cluster.x-k8s.io/edge-control-plane serverside-applied",
		"libvirtmachinetemplate.infrastructure.banlieue.io/edge-control-plane serverside-applied",
		"machinedeployment.cluster.x-k8s.io/edge-md-0 serverside-applied",
		"libvirtmachinetemplate.infrastructure.banlieue.io/edge-md-0 serverside-applied",
		"kubeadmconfigtemplate.bootstrap.cluster.x-k8s.io/edge-md-0 serverside-applied",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run lacks %q:\n%s", want, out)
		}
	}
	// A template that names a domain is refused: the check is real.
	bad := strings.Replace(rendered, "      pool: default\n", "      pool: default\n      domainName: capi-team-edge\n", 1)
	if err := os.WriteFile(file, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := env.Kubectl(t, "apply", "--server-side", "--dry-run=server", "-f", file); err == nil || !strings.Contains(out, "domainName must be unset") {
		t.Errorf("a template naming a domain was not refused: %v\n%s", err, out)
	}
}
