//go:build node

package node

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/internal/testenv/labhost"
)

// TestProviderPodProbesTheLabHost follows docs/guides/libvirt-provider.md on the real node after
// the helm install: the guide's credentials Secret and CA ConfigMap, a Provider for the lab host
// at the address pods reach (hack/libvirt-lab.sh's BANLIEUE_LIBVIRT_POD_ENDPOINT) → the operator
// creates the workload (ServiceAccount, Role, RoleBinding, ClusterRoleBinding, Deployment) → the
// provider pod goes Ready on the node and probes the host: the Provider is Ready and
// ProviderReachable with its failure domains.
func TestProviderPodProbesTheLabHost(t *testing.T) {
	n := requireNode(t)
	lab := testenv.RequirePodLibvirtLab(t)
	importImage(t)
	installChart(t, n)
	waitRolesReady(t, n, corev1.PullNever)
	ctx := t.Context()
	c := n.client(t)

	// A pool of its own: the lab host holds no pool before a test makes one (a "default" left
	// by an earlier suite made this pass only after those suites).
	pool := "node-" + testenv.RunID()
	labhost.CreatePool(ctx, t, labhost.Dial(t, lab), lab, pool)
	p := labProvider(t, c, lab, banlieuev1.StorageClassMapping{Name: "standard", Target: map[string]string{"pool": pool}})
	got := waitProviderReady(t, n, c, p)
	w := got.Status.Workload
	t.Logf("Provider %s Ready through %s/%s; failure domains %+v", p.Name, w.Namespace, w.DeploymentName, got.Status.FailureDomains)

	// The operator's objects, and the pod really on the node under the workload's account.
	if _, err := n.cs.CoreV1().ServiceAccounts(w.Namespace).Get(ctx, w.DeploymentName, metav1.GetOptions{}); err != nil {
		t.Errorf("the workload's ServiceAccount: %v", err)
	}
	if _, err := n.cs.RbacV1().ClusterRoleBindings().Get(ctx, w.DeploymentName, metav1.GetOptions{}); err != nil {
		t.Errorf("the workload's ClusterRoleBinding: %v", err)
	}
	instance := metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + w.DeploymentName}
	if roles, err := n.cs.RbacV1().Roles("").List(ctx, instance); err != nil || len(roles.Items) == 0 {
		t.Errorf("the workload's Roles: %v (%d)", err, len(roles.Items))
	}
	if bindings, err := n.cs.RbacV1().RoleBindings("").List(ctx, instance); err != nil || len(bindings.Items) == 0 {
		t.Errorf("the workload's RoleBindings: %v (%d)", err, len(bindings.Items))
	}
	pods, err := n.cs.CoreV1().Pods(w.Namespace).List(ctx, instance)
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("the provider's pods: %v", err)
	}
	for _, pod := range pods.Items {
		if pod.Spec.NodeName != n.name || pod.Spec.ServiceAccountName != w.DeploymentName || !mountsServiceAccountToken(pod.Spec.Containers[0]) ||
			pod.Spec.HostNetwork || !podReady(&pod) {
			t.Errorf("provider pod %s: node %q, ServiceAccount %q, host network %v, ready %v; want node %s, ServiceAccount %s with its token, the pod network",
				pod.Name, pod.Spec.NodeName, pod.Spec.ServiceAccountName, pod.Spec.HostNetwork, podReady(&pod), n.name, w.DeploymentName)
		}
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// labProvider creates for t the lab host's credentials Secret and CA ConfigMap, as the guide's
// step 2 does, and Provider lab-host on them with classes. They are deleted, the Provider
// waited out, when t ends: before the release goes (cleanups run last first), since the operator
// removes the workload.
func labProvider(t *testing.T, c client.Client, lab testenv.LibvirtLab, classes ...banlieuev1.StorageClassMapping) *banlieuev1.Provider {
	t.Helper()
	const name, secret, ca = "lab-host", "libvirt-lab-creds", "libvirt-lab-ca"
	creds, err := lab.Credentials(systemNS, secret, ca)
	if err != nil {
		t.Fatal(err)
	}
	p := lab.Provider(systemNS, name, secret, ca, banlieuev1.ProviderCapabilities{StorageClasses: classes})
	for _, o := range append(creds, p) {
		create(t, c, o)
	}
	return p
}

// waitProviderReady waits until p is Ready and reachable with failure domains and the
// operator's workload has a Ready replica, and returns it.
func waitProviderReady(t *testing.T, n node, c client.Client, p *banlieuev1.Provider) banlieuev1.Provider {
	t.Helper()
	ctx := t.Context()
	var got banlieuev1.Provider
	testenv.Eventually(t, 4*time.Minute, "Provider "+p.Name+" Ready with failure domains", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), &got); err != nil {
			return err
		}
		ready := meta.IsStatusConditionTrue(got.Status.Conditions, banlieuev1.ConditionReady)
		reachable := meta.IsStatusConditionTrue(got.Status.Conditions, banlieuev1.ConditionProviderReachable)
		// The provider may report the host before its own pod passes the readiness probe; the
		// operator then records the Ready replica in status.workload.
		w := got.Status.Workload
		return testenv.Unmet(ready && reachable && len(got.Status.FailureDomains) > 0 && w != nil && w.ReadyReplicas >= 1,
			fmt.Sprintf("status %+v; pods: %s", got.Status, podStates(ctx, n, systemNS)))
	})
	return got
}
