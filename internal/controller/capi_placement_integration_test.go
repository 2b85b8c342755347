package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/capi"
	"banlieue.io/banlieue/internal/testenv"
)

// TestCAPIPlacementAgainstAPIServer: the controller, as its installed ClusterRole, places each
// Cluster API machine made without providerRef in its Machine's failure domain, spreads those
// that ask for none over its LibvirtCluster's failure domains (control plane machines only where
// controlPlane is true), and refuses, with a condition naming the field, a failure domain the
// cluster does not have and a machine nothing owns. Cluster API's own Machine and Cluster CRDs.
func TestCAPIPlacementAgainstAPIServer(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	env.InstallClusterAPICRDs(t, testenv.CAPIClusters, testenv.CAPIMachines)
	env.BindInstalledClusterRole(ctx, t, "config/rbac/controller/role.yaml", controllerUser)
	mgr := testenv.NewManagerWith(t, testenv.Impersonating(env.Config, controllerUser), testenv.ManagerOptions())
	if err := Setup(mgr, Options{}); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)

	const ns = "capi-place"
	env.Create(ctx, t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	for _, name := range []string{"kvm-1", "kvm-2"} {
		env.Create(ctx, t, &banlieuev1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: banlieuev1.ProviderSpec{
			ProviderClassRef: banlieuev1.LocalObjectReference{Name: "libvirt"},
			Connection: banlieuev1.ProviderConnection{Endpoint: "qemu+tls://" + name + ".example/system",
				CredentialsRef: banlieuev1.LocalObjectReference{Name: "c"}}}})
	}
	cluster := testenv.CAPIObject("Cluster", ns, "c1", map[string]any{
		"infrastructureRef": map[string]any{"apiGroup": infrav1.GroupVersion.Group, "kind": "LibvirtCluster", "name": "c1"}})
	env.Create(ctx, t, cluster)
	env.Create(ctx, t, &infrav1.LibvirtCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: capi.Group + "/v1beta2", Kind: "Cluster", Name: "c1", UID: cluster.GetUID()}}},
		Spec: infrav1.LibvirtClusterSpec{
			Providers:            []infrav1.ClusterProvider{{Name: "kvm-1"}, {Name: "kvm-2", ControlPlane: ptr.To(false)}},
			ControlPlaneEndpoint: &infrav1.APIEndpoint{Host: "192.0.2.100", Port: 6443}},
	})
	testenv.Eventually(t, 30*time.Second, "the LibvirtCluster's two failure domains", func() error {
		var lc infrav1.LibvirtCluster
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c1"}, &lc)
		return testenv.Unmet(err == nil && len(lc.Status.FailureDomains) == 2, fmt.Sprintf("%+v (%v)", lc.Status, err))
	})

	// machine creates a LibvirtMachine as a MachineSet makes it from a template without
	// providerRef, and its Machine as its controller.
	machine := func(name, failureDomain string, labels map[string]string) client.ObjectKey {
		t.Helper()
		spec := map[string]any{
			"clusterName":       "c1",
			"bootstrap":         map[string]any{"dataSecretName": name},
			"infrastructureRef": map[string]any{"apiGroup": infrav1.GroupVersion.Group, "kind": "LibvirtMachine", "name": name},
		}
		if failureDomain != "" {
			spec["failureDomain"] = failureDomain
		}
		owner := testenv.CAPIObject("Machine", ns, name, spec)
		env.Create(ctx, t, owner)
		all := map[string]string{capi.LabelClusterName: "c1"}
		for k, v := range labels {
			all[k] = v
		}
		m := unplacedMachine(ns, name, all)
		m.OwnerReferences = []metav1.OwnerReference{{APIVersion: capi.Group + "/v1beta2", Kind: "Machine", Name: name,
			UID: owner.GetUID(), Controller: ptr.To(true)}}
		env.Create(ctx, t, m)
		return client.ObjectKeyFromObject(m)
	}
	wait := func(key client.ObjectKey, what string, ok func(*infrav1.LibvirtMachine) bool) *infrav1.LibvirtMachine {
		t.Helper()
		var got infrav1.LibvirtMachine
		testenv.Eventually(t, 30*time.Second, key.Name+": "+what, func() error {
			err := env.Client.Get(ctx, key, &got)
			return testenv.Unmet(err == nil && ok(&got), fmt.Sprintf("providerRef %+v, conditions %+v (%v)", got.Spec.ProviderRef, got.Status.Conditions, err))
		})
		return &got
	}
	placedOn := func(key client.ObjectKey) string {
		t.Helper()
		got := wait(key, "placed", func(m *infrav1.LibvirtMachine) bool { return m.Spec.ProviderRef != nil })
		if c := meta.FindStatusCondition(got.Status.Conditions, banlieuev1.ConditionScheduled); c == nil ||
			c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, got.Spec.ProviderRef.Name) {
			t.Errorf("%s: Scheduled %+v does not say it was placed on %s", key.Name, c, got.Spec.ProviderRef.Name)
		}
		return got.Spec.ProviderRef.Name
	}
	refused := func(key client.ObjectKey, reason string, mentions ...string) {
		t.Helper()
		got := wait(key, reason, func(m *infrav1.LibvirtMachine) bool {
			c := meta.FindStatusCondition(m.Status.Conditions, banlieuev1.ConditionScheduled)
			return c != nil && c.Status == metav1.ConditionFalse && c.Reason == reason
		})
		ready := meta.FindStatusCondition(got.Status.Conditions, banlieuev1.ConditionReady)
		if got.Spec.ProviderRef != nil || ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != reason {
			t.Errorf("%s: providerRef %+v, Ready %+v; want no providerRef and Ready False %s", key.Name, got.Spec.ProviderRef, ready, reason)
		}
		for _, s := range mentions {
			if !strings.Contains(ready.Message, s) {
				t.Errorf("%s: Ready message %q does not mention %q", key.Name, ready.Message, s)
			}
		}
	}

	t.Run("the Machine's failure domain", func(t *testing.T) {
		if got := placedOn(machine("asked", "kvm-2", nil)); got != "kvm-2" {
			t.Errorf("placed on %s, the Machine asked for kvm-2", got)
		}
		// The machine was created with no Provider: only its placement, an update, tells the
		// provider-in-use controller that kvm-2 is now in use (providerRefChanged).
		testenv.Eventually(t, 30*time.Second, "kvm-2 holds the provider-in-use finalizer", func() error {
			var p banlieuev1.Provider
			err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kvm-2"}, &p)
			return testenv.Unmet(err == nil && controllerutil.ContainsFinalizer(&p, banlieuev1.FinalizerProviderInUse),
				fmt.Sprintf("finalizers %v (%v)", p.Finalizers, err))
		})
	})
	t.Run("no failure domain asked: spread over the cluster's", func(t *testing.T) {
		count := map[string]int{"kvm-2": 1} // "asked"
		for _, name := range []string{"spread-a", "spread-b", "spread-c"} {
			count[placedOn(machine(name, "", nil))]++
		}
		if count["kvm-1"] != 2 || count["kvm-2"] != 2 {
			t.Errorf("four machines spread %v over kvm-1 and kvm-2; want two each", count)
		}
	})
	t.Run("a control plane machine only where controlPlane is true", func(t *testing.T) {
		if got := placedOn(machine("cp-0", "", map[string]string{capi.LabelControlPlane: ""})); got != "kvm-1" {
			t.Errorf("control plane machine placed on %s; kvm-2 has controlPlane false", got)
		}
	})
	t.Run("a failure domain the cluster has not", func(t *testing.T) {
		refused(machine("unknown", "kvm-9", nil), infrav1.ReasonFailureDomainUnknown, `spec.failureDomain "kvm-9"`, "[kvm-1 kvm-2]")
	})
	t.Run("no owner: nothing places it", func(t *testing.T) {
		m := unplacedMachine(ns, "orphan", nil)
		env.Create(ctx, t, m)
		refused(client.ObjectKeyFromObject(m), infrav1.ReasonProviderRefUnset, "set spec.providerRef")
	})
	t.Run("once placed, providerRef is neither changed nor removed", func(t *testing.T) {
		var m infrav1.LibvirtMachine
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "asked"}, &m); err != nil {
			t.Fatal(err)
		}
		for patch, want := range map[string]string{
			`{"spec":{"providerRef":null}}`:             "cannot be removed",
			`{"spec":{"providerRef":{"name":"kvm-1"}}}`: "providerRef is immutable",
		} {
			err := env.Client.Patch(ctx, &m, client.RawPatch("application/merge-patch+json", []byte(patch)))
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("patch %s: %v; want a refusal %q", patch, err, want)
			}
		}
	})
}

// unplacedMachine is a LibvirtMachine as a LibvirtMachineTemplate without providerRef makes it.
func unplacedMachine(ns, name string, labels map[string]string) *infrav1.LibvirtMachine {
	return &infrav1.LibvirtMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: infrav1.LibvirtMachineSpec{
			Pool:       "default",
			BootSource: infrav1.BootSource{Kind: infrav1.BootBackingVolume, Volume: "debian-12.qcow2"},
			VCPUs:      1, MemoryMiB: 512, Firmware: banlieuev1.FirmwareEFI,
			Disks: []infrav1.LibvirtDisk{{Name: "os", SizeGiB: 10}},
		},
	}
}
