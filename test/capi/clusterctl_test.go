//go:build capi

package capi

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"banlieue.io/banlieue/internal/testenv"
)

// TestClusterctlGeneratesTheClusterTemplate: Cluster API's own clusterctl (built by
// hack/capi-assets.sh) lists the template's variables as the guide does and fills
// templates/cluster-template.yaml; what it writes is admitted by banlieue's CRDs and Cluster
// API's webhooks (a server-side dry run through the manager), its LibvirtMachineTemplates naming
// no Provider and its LibvirtCluster the one given. No management cluster is needed for it, so
// none is given (clusterctl init is not run here: it installs cert-manager and the providers'
// images from registries this machine cannot reach).
func TestClusterctlGeneratesTheClusterTemplate(t *testing.T) {
	ctx, s := newSuite(t)
	template := filepath.Join(testenv.RepoRoot(), "templates", "cluster-template.yaml")
	clusterctl := func(env []string, args ...string) []byte {
		t.Helper()
		cmd := exec.CommandContext(ctx, filepath.Join(s.assets, "clusterctl"), args...)
		// A HOME of its own: no clusterctl.yaml of the user's, and no version check against GitHub.
		cmd.Env = append([]string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH"), "CLUSTERCTL_DISABLE_VERSIONCHECK=true"}, env...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("clusterctl %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return out
	}

	// Without a management cluster, clusterctl asks for the target namespace even to list.
	ns := "capi-" + testenv.RunID()
	out := clusterctl(nil, "generate", "cluster", "edge", "--from", template, "--target-namespace", ns, "--list-variables")
	var required []string
	inRequired := false
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(line, "Required Variables:"):
			inRequired = true
		case strings.HasPrefix(line, "Optional Variables:"):
			inRequired = false
		case inRequired && strings.HasPrefix(strings.TrimSpace(line), "- "):
			required = append(required, strings.TrimPrefix(strings.TrimSpace(line), "- "))
		}
	}
	slices.Sort(required)
	// clusterctl fills CLUSTER_NAME, NAMESPACE and the machine counts itself (its arguments and the
	// counts' defaults), so it lists as required only the rest of the guide's table:
	// KUBERNETES_VERSION (its --kubernetes-version) and banlieue's four.
	want := []string{"CONTROL_PLANE_ENDPOINT_HOST", "KUBERNETES_VERSION", "LIBVIRT_POOL", "LIBVIRT_PROVIDER", "LIBVIRT_VMIMAGE"}
	if !slices.Equal(required, want) {
		t.Errorf("clusterctl --list-variables: required %v, want %v\n%s", required, want, out)
	}

	s.env.Create(ctx, t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	out = clusterctl([]string{"LIBVIRT_PROVIDER=kvm-1", "LIBVIRT_POOL=default", "LIBVIRT_VMIMAGE=ubuntu-2404.qcow2",
		"CONTROL_PLANE_ENDPOINT_HOST=192.0.2.100"},
		"generate", "cluster", "edge", "--from", template, "--target-namespace", ns, "--kubernetes-version", "v1.37.2",
		"--control-plane-machine-count", "3", "--worker-machine-count", "2")

	kinds := map[string]int{}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding clusterctl's output: %v\n%s", err, out)
		}
		if len(u.Object) == 0 {
			continue
		}
		kinds[u.GetKind()]++
		if u.GetNamespace() != ns {
			t.Errorf("%s %s in namespace %q, want %q", u.GetKind(), u.GetName(), u.GetNamespace(), ns)
		}
		switch u.GetKind() {
		case "LibvirtMachineTemplate":
			if _, found, _ := unstructured.NestedMap(u.Object, "spec", "template", "spec", "providerRef"); found {
				t.Errorf("LibvirtMachineTemplate %s names a Provider: its machines would not follow their failure domains", u.GetName())
			}
		case "LibvirtCluster":
			providers, _, _ := unstructured.NestedSlice(u.Object, "spec", "providers")
			if len(providers) != 1 || providers[0].(map[string]any)["name"] != "kvm-1" {
				t.Errorf("LibvirtCluster spec.providers %v, want [kvm-1]", providers)
			}
		case "KubeadmControlPlane", "KubeadmConfigTemplate":
			// Kubeadm's CRDs are not the core manager's: test/api dry-runs them against Cluster
			// API's own kubeadm CRDs.
			continue
		}
		if err := s.env.Client.Create(ctx, u, client.DryRunAll); err != nil {
			t.Errorf("%s %s as clusterctl wrote it: %v", u.GetKind(), u.GetName(), err)
		}
	}
	wantKinds := map[string]int{"Cluster": 1, "LibvirtCluster": 1, "KubeadmControlPlane": 1, "LibvirtMachineTemplate": 2,
		"MachineDeployment": 1, "KubeadmConfigTemplate": 1}
	for k, n := range wantKinds {
		if kinds[k] != n {
			t.Errorf("clusterctl wrote %d %s, want %d (all: %v)", kinds[k], k, n, kinds)
		}
	}
}
