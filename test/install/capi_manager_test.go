package install

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"banlieue.io/banlieue/internal/testenv"
)

// capiLabel selects the ClusterRoles aggregated into Cluster API's manager role, as its
// aggregation rule does.
const capiLabel = "cluster.x-k8s.io/aggregate-to-manager"

// TestClusterAPIManagerAggregation: an account bound only to a ClusterRole that aggregates
// capiLabel, as Cluster API's manager is, may do what the InfraMachine and InfraCluster contracts
// ask on banlieue's infrastructure kinds, and nothing else of banlieue's. The aggregation is done
// by kube-controller-manager's own controller (hack/node-assets.sh builds it), never by the test.
func TestClusterAPIManagerAggregation(t *testing.T) {
	kcm := kubeControllerManager(t)
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	installCRDsAndNamespaces(t, c)
	if out, errOut, err := c.run("apply", "--server-side", "-k", defaultDir()); err != nil {
		t.Fatalf("kubectl apply --server-side -k config/default: %v\n%s%s", err, out, errOut)
	}

	// Cluster API's manager role, as its release ships it: rules only by aggregation.
	target := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "capi-aggregated-manager-role"},
		AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
			{MatchLabels: map[string]string{capiLabel: "true"}},
		}},
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "capi-manager"}}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "capi-manager"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: target.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: sa.Name}},
	}
	for _, o := range []client.Object{target, sa, binding} {
		if err := c.admin.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}

	c.startAggregation(t, kcm)
	start := time.Now()
	testenv.Eventually(t, time.Minute, "the manager role aggregates banlieue-capi-manager", func() error {
		var got rbacv1.ClusterRole
		if err := c.admin.Get(ctx, client.ObjectKeyFromObject(target), &got); err != nil {
			return err
		}
		return testenv.Unmet(len(got.Rules) > 0, "no rules aggregated yet")
	})
	t.Logf("aggregated in %v", time.Since(start).Round(time.Millisecond))

	as := c.as(t, sa.Namespace, sa.Name)
	user := testenv.ServiceAccountUser(sa.Namespace, sa.Name)
	for _, res := range []string{"libvirtmachines", "libvirtmachinetemplates", "libvirtclusters", "vspheremachines", "vspheremachinetemplates"} {
		for _, verb := range []string{"create", "delete", "get", "list", "patch", "update", "watch"} {
			if !can(ctx, t, c, user, "infrastructure.banlieue.io", res, "", verb) {
				t.Errorf("%s may not %s %s", user, verb, res)
			}
		}
	}
	// Only that: not the status the provider and banlieue-controller write, nor anything of
	// banlieue.io, nor a Secret.
	for _, deny := range []struct{ group, res, sub, verb string }{
		{"infrastructure.banlieue.io", "libvirtmachines", "status", "update"},
		{"infrastructure.banlieue.io", "libvirtmachines", "status", "patch"},
		{"infrastructure.banlieue.io", "libvirtclusters", "status", "patch"},
		{"infrastructure.banlieue.io", "vspheremachines", "status", "patch"},
		{"banlieue.io", "providers", "", "get"},
		{"banlieue.io", "virtualmachines", "", "create"},
		{"", "secrets", "", "get"},
	} {
		if can(ctx, t, c, user, deny.group, deny.res, deny.sub, deny.verb) {
			t.Errorf("%s may %s %s/%s, want denied", user, deny.verb, deny.res, deny.sub)
		}
	}

	// The real requests: a template created, a LibvirtMachine listed and relabelled, the
	// template deleted; a Provider read refused.
	tmpl := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "infrastructure.banlieue.io/v1alpha1", "kind": "LibvirtMachineTemplate",
		"metadata": map[string]any{"name": "md-0", "namespace": "default"},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"providerRef": map[string]any{"name": "p"}, "pool": "default",
			"bootSource": map[string]any{"kind": "backingVolume", "volume": "img.raw"},
			"vcpus":      int64(1), "memoryMiB": int64(512), "firmware": "efi",
			"disks": []any{map[string]any{"name": "os", "sizeGiB": int64(10)}},
		}}},
	}}
	testenv.Allowed(t, "create LibvirtMachineTemplate", as.Create(ctx, tmpl))
	machines := &unstructured.UnstructuredList{}
	machines.SetAPIVersion("infrastructure.banlieue.io/v1alpha1")
	machines.SetKind("LibvirtMachineList")
	testenv.Allowed(t, "list LibvirtMachines", as.List(ctx, machines))
	testenv.Allowed(t, "label LibvirtMachineTemplate", as.Patch(ctx, tmpl,
		client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"cluster.x-k8s.io/cluster-name":"c"}}}`))))
	testenv.Allowed(t, "delete LibvirtMachineTemplate", as.Delete(ctx, tmpl))
	p := &unstructured.Unstructured{}
	p.SetAPIVersion("banlieue.io/v1alpha1")
	p.SetKind("ProviderList")
	testenv.Forbidden(t, "list Providers", as.List(ctx, p))
}

// can asks the API server whether user may verb the resource (a SubjectAccessReview).
func can(ctx context.Context, t *testing.T, c *cluster, user, group, res, sub, verb string) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   user,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: "default", Group: group, Resource: res, Subresource: sub, Verb: verb,
		},
	}}
	if err := c.admin.Create(ctx, sar); err != nil {
		t.Fatalf("SubjectAccessReview: %v", err)
	}
	return sar.Status.Allowed
}

// kubeControllerManager is the path of kube-controller-manager, built from the Go module proxy
// by hack/node-assets.sh (cached after the first build).
func kubeControllerManager(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "node-assets.sh"))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/node-assets.sh: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return filepath.Join(lines[len(lines)-1], "kube-controller-manager")
}

// kubeconfigOf is cfg (envtest's administrator, a client certificate) as a kubeconfig.
// startAggregation runs kube-controller-manager (the binary kcm) against the cluster with only
// its ClusterRole aggregation controller: nothing else of kube-controller-manager's runs.
func (c *cluster) startAggregation(t *testing.T, kcm string) {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kubeconfigOf(c.cfg), kubeconfig); err != nil {
		t.Fatal(err)
	}
	testenv.StartProcess(t, exec.Command(kcm, "--kubeconfig", kubeconfig, "--controllers", "clusterrole-aggregation",
		"--leader-elect=false", "--secure-port=0", "--use-service-account-credentials=false"))
}

func kubeconfigOf(cfg *rest.Config) *clientcmdapi.Config {
	k := clientcmdapi.NewConfig()
	k.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	k.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	k.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	k.CurrentContext = "envtest"
	return k
}
