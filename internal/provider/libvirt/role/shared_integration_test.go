package role

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
)

const (
	sharedNS     = "banlieue-system"
	providerUser = "provider-lab"
	labLabel     = "banlieue.io/lab"
	sharedWait   = 20 * time.Second
)

// The provider of banlieue-system/lab, wired as the operator runs it (--provider-name lab
// --namespace banlieue-system) and acting as the installed provider ClusterRole, decides for
// itself which machines naming its Provider it serves: a tenant may hand-write a
// LibvirtMachine that names the shared Provider. A served machine goes on to the authority
// check (authority.go), which refuses its unmapped pool; a refused one reports
// NamespaceNotAllowed before anything else is checked or reached.
func TestSharedProviderRefusesNamespacesItDoesNotAdmit(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: sharedNS}},
		{ObjectMeta: metav1.ObjectMeta{Name: buildNamespace}},
		{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{labLabel: "allowed"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "team-b"}},
	} {
		env.Create(ctx, t, ns)
	}
	env.BindInstalledClusterRole(ctx, t, "config/rbac/provider-libvirt/role.yaml", providerUser)
	provider := func(ns string, a *banlieuev1.AllowedNamespaces) *banlieuev1.Provider {
		return &banlieuev1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lab"}, Spec: banlieuev1.ProviderSpec{
			ProviderClassRef: banlieuev1.LocalObjectReference{Name: "libvirt"},
			Connection: banlieuev1.ProviderConnection{Endpoint: "qemu+tls://127.0.0.1:1/system",
				CredentialsRef: banlieuev1.LocalObjectReference{Name: "libvirt-edge-creds"},
				CABundle:       &banlieuev1.CABundleSource{ConfigMapRef: &banlieuev1.KeySelector{Name: "libvirt-edge-ca"}}},
			AllowedNamespaces: a,
		}}
	}
	env.Create(ctx, t,
		provider(sharedNS, &banlieuev1.AllowedNamespaces{From: banlieuev1.NamespacesFromSelector,
			Selector: &banlieuev1.LabelSelector{MatchLabels: map[string]string{labLabel: "allowed"}}}),
		// team-b's own Provider of the same name, on another host, served by another process.
		provider("team-b", nil),
	)

	opts := Options{ProviderName: "lab", ProviderNamespace: sharedNS, BuildNamespace: buildNamespace, Resync: time.Second,
		ImportImage: "banlieue:test", ImportServiceAccount: "banlieue-import"}
	mopts := testenv.ManagerOptions()
	mopts.Cache.DefaultNamespaces = map[string]cache.Config{sharedNS: {}} // --namespace, as internal/app does
	mopts.Cache.ByObject = CacheByObject(opts)
	mgr := testenv.NewManagerWith(t, testenv.Impersonating(env.Config, providerUser), mopts)
	if err := Setup(mgr, opts); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)

	machine := func(ns, name, providerNs string) *infrav1.LibvirtMachine {
		return &infrav1.LibvirtMachine{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: infrav1.LibvirtMachineSpec{
				ProviderRef: &infrav1.ProviderReference{Name: "lab", Namespace: providerNs},
				Pool:        "default", DomainName: ns + "-" + name,
				BootSource: infrav1.BootSource{Kind: infrav1.BootBackingVolume, Volume: "ubuntu-2404.raw"},
				VCPUs:      1, MemoryMiB: 128, Firmware: banlieuev1.FirmwareBIOS,
				Disks: []infrav1.LibvirtDisk{{Name: "os", SizeGiB: 1}},
			},
		}
	}
	admitted, refused, other := machine("team-a", "web-01", sharedNS), machine("team-b", "web-01", sharedNS), machine("team-b", "own", "")
	env.Create(ctx, t, admitted, refused, other)

	// Served: past the namespace decision, the pass goes on to the authority check, which refuses
	// pool "default" (no storage class of the Provider maps it) — a reason only a pass that
	// admitted the namespace can write. The host itself is reached in TestMachineAgainstLabHost.
	served := func(m *infrav1.LibvirtMachine) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, banlieuev1.ConditionReady)
		return c != nil && c.Reason == infrav1.ReasonNotPermitted && strings.Contains(c.Message, "invalid spec.pool")
	}
	notAllowed := func(m *infrav1.LibvirtMachine) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, banlieuev1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == banlieuev1.ReasonNamespaceNotAllowed &&
			strings.Contains(c.Message, "invalid spec.providerRef: Provider banlieue-system/lab does not admit namespace "+m.Namespace) &&
			strings.Contains(c.Message, `allowedNamespaces.selector "banlieue.io/lab=allowed"`)
	}

	t.Run("an admitted namespace's machine is served (its host names are checked next)", func(t *testing.T) {
		waitMachine(ctx, t, env, admitted, "served", served)
	})
	t.Run("a namespace the Provider does not admit gets NamespaceNotAllowed and no finalizer", func(t *testing.T) {
		m := waitMachine(ctx, t, env, refused, "NamespaceNotAllowed", notAllowed)
		if controllerutil.ContainsFinalizer(m, infrav1.FinalizerLibvirtMachine) {
			t.Errorf("finalizers = %v; a refused machine must not be held", m.Finalizers)
		}
	})
	t.Run("a machine of another namespace naming its own Provider of the same name is not this process's", func(t *testing.T) {
		time.Sleep(3 * time.Second) // three resyncs of the served machines
		var m infrav1.LibvirtMachine
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(other), &m); err != nil {
			t.Fatal(err)
		}
		if len(m.Status.Conditions) != 0 || len(m.Finalizers) != 0 {
			t.Errorf("team-b/own was touched by banlieue-system/lab's provider: status %+v, finalizers %v", m.Status, m.Finalizers)
		}
	})
	t.Run("the decision is re-read on every pass: labels added and removed take effect", func(t *testing.T) {
		relabel(ctx, t, env, "team-b", map[string]string{labLabel: "allowed"})
		waitMachine(ctx, t, env, refused, "served once team-b is labelled", served)
		relabel(ctx, t, env, "team-a", nil)
		waitMachine(ctx, t, env, admitted, "NamespaceNotAllowed once team-a loses its label", notAllowed)
	})
}

func waitMachine(ctx context.Context, t *testing.T, env *testenv.Env, m *infrav1.LibvirtMachine, what string,
	ok func(*infrav1.LibvirtMachine) bool) *infrav1.LibvirtMachine {
	t.Helper()
	var got infrav1.LibvirtMachine
	testenv.Eventually(t, sharedWait, fmt.Sprintf("LibvirtMachine %s/%s %s", m.Namespace, m.Name, what), func() error {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), &got)
		return testenv.Unmet(err == nil && ok(&got), fmt.Sprintf("status %+v (%v)", got.Status, err))
	})
	return &got
}

func relabel(ctx context.Context, t *testing.T, env *testenv.Env, name string, labels map[string]string) {
	t.Helper()
	var ns corev1.Namespace
	if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, &ns); err != nil {
		t.Fatal(err)
	}
	ns.Labels = labels
	if err := env.Client.Update(ctx, &ns); err != nil {
		t.Fatal(err)
	}
}
