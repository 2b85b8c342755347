package libvirt

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/pkg/libvirt"
)

// testCreatedOff: a machine created with desiredPowerState PoweredOff gets its domain defined
// and its disks created, never started, and reports exactly that: provisioned, observed
// PoweredOff, Ready=False DomainNotRunning "as spec.desiredPowerState PoweredOff asks"
// (docs/adr/0147-phases-of-a-vm-as-its-spec-asks.md).
func (s *machineSuite) testCreatedOff(ctx context.Context, t *testing.T) {
	m := s.machine(testNamespace, "created-off")
	m.Spec.DesiredPowerState = banlieuev1.PoweredOff
	s.env.Create(ctx, t, m)
	t.Cleanup(func() { s.deleteAndWait(context.Background(), t, m) })
	got := s.waitMachine(ctx, t, client.ObjectKeyFromObject(m), 60*time.Second, func(m *infrav1.LibvirtMachine) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, banlieuev1.ConditionReady)
		return c != nil && c.Reason == infrav1.ReasonDomainNotRunning && c.ObservedGeneration == m.Generation
	})
	ready := meta.FindStatusCondition(got.Status.Conditions, banlieuev1.ConditionReady)
	if want := "domain is defined and off (ShutOff), as spec.desiredPowerState PoweredOff asks"; ready.Status != metav1.ConditionFalse || ready.Message != want {
		t.Errorf("Ready = %s %q, want False %q", ready.Status, ready.Message, want)
	}
	if got.Status.Initialization == nil || !ptrTrue(got.Status.Initialization.Provisioned) || got.Status.ObservedPowerState != banlieuev1.PoweredOff {
		t.Errorf("status.initialization %+v, observedPowerState %q: want provisioned, PoweredOff", got.Status.Initialization, got.Status.ObservedPowerState)
	}
	dom, err := s.host.DomainLookupByName(ctx, m.Spec.DomainName)
	if err != nil || dom.UUID.String() != got.Status.DomainUUID {
		t.Fatalf("domain %s: %v (uuid %s, status %s)", m.Spec.DomainName, err, dom.UUID, got.Status.DomainUUID)
	}
	if state, _, err := s.host.DomainState(ctx, dom); err != nil || state != libvirt.DomainShutOff {
		t.Errorf("domain state %s (%v), want ShutOff: never started", state, err)
	}
	pool, err := s.host.StoragePoolLookupByName(ctx, s.pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, vol := range []string{diskVolume(m.Spec.DomainName, "os"), seedVolume(m.Spec.DomainName)} {
		if _, err := s.host.StorageVolLookupByName(ctx, pool, vol); err != nil {
			t.Errorf("volume %s: %v", vol, err)
		}
	}
}
