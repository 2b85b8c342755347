package pool

import (
	"net/netip"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
)

// TestPoolMembers: only the pool's own members and those a claim took from it are members; the
// pool's label alone makes none.
func TestPoolMembers(t *testing.T) {
	pool := &banlieuev1.VirtualMachinePool{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "pool-uid"}}
	made := func(mutate func(*banlieuev1.VirtualMachine)) banlieuev1.VirtualMachine {
		vm, err := newMember(pool, rev, netip.Addr{}, app.NewScheme())
		if err != nil {
			t.Fatal(err)
		}
		vm.Name = "web-abcde"
		mutate(vm)
		return *vm
	}
	controller := func(apiVersion, kind, name, uid string) func(*banlieuev1.VirtualMachine) {
		return func(vm *banlieuev1.VirtualMachine) {
			vm.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name,
				UID: types.UID(uid), Controller: ptr.To(true)}}
		}
	}
	tests := []struct {
		name string
		vm   banlieuev1.VirtualMachine
		want bool
	}{
		{"as newMember made it", made(func(*banlieuev1.VirtualMachine) {}), true},
		{"an earlier pool of the same name", made(controller("banlieue.io/v1alpha1", "VirtualMachinePool", "web", "old-pool-uid")), false},
		{"the pool as owner but not controller", made(func(vm *banlieuev1.VirtualMachine) {
			vm.OwnerReferences[0].Controller = nil
		}), false},
		{"controlled by the pool without its label", made(func(vm *banlieuev1.VirtualMachine) { vm.Labels[banlieuev1.LabelPool] = "db" }), false},
		{"the pool's label by hand, no owner", made(func(vm *banlieuev1.VirtualMachine) { vm.OwnerReferences = nil }), false},
		{"as takeMember left it", takenVM(t, "web-abcde", func(*banlieuev1.VirtualMachine) {}), true},
		{"a claim owner other than the claim label names", takenVM(t, "web-abcde",
			controller("banlieue.io/v1alpha1", "VirtualMachineClaim", "someone", "claim-uid")), false},
		{"a claim owner without a claim label", takenVM(t, "web-abcde", func(vm *banlieuev1.VirtualMachine) {
			delete(vm.Labels, banlieuev1.LabelClaim)
		}), false},
		{"a VirtualMachineClaim of another API group", takenVM(t, "web-abcde",
			controller("example.com/v1", "VirtualMachineClaim", "c", "claim-uid")), false},
		{"taken from another pool", takenVM(t, "web-abcde", func(vm *banlieuev1.VirtualMachine) { vm.Labels[banlieuev1.LabelPool] = "db" }), false},
	}
	for _, tc := range tests {
		got := len(poolMembers(pool, []banlieuev1.VirtualMachine{tc.vm})) == 1
		if got != tc.want {
			t.Errorf("%s: member = %v, want %v (%+v)", tc.name, got, tc.want, tc.vm.ObjectMeta)
		}
	}
}

func TestProjectMember(t *testing.T) {
	now := time.Date(2025, 5, 1, 12, 0, 0, 0, time.UTC)
	vm := func(mutate func(*banlieuev1.VirtualMachine)) *banlieuev1.VirtualMachine {
		v := &banlieuev1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{
			Name: "web-pool-abcde", CreationTimestamp: metav1.NewTime(now.Add(-time.Hour)),
			Labels: map[string]string{banlieuev1.LabelPool: "web-pool", banlieuev1.LabelPoolImageRevision: rev},
		}}
		mutate(v)
		return v
	}
	readyCond := func(typ string, status metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: "R", LastTransitionTime: metav1.NewTime(now.Add(-10 * time.Minute))}
	}
	deleted := metav1.NewTime(now)
	tests := []struct {
		name      string
		vm        *banlieuev1.VirtualMachine
		readiness banlieuev1.PoolReadiness
		want      member
	}{
		{"no condition is provisioning, unsignalled", vm(func(*banlieuev1.VirtualMachine) {}), banlieuev1.ReadinessGuestReady,
			member{Phase: phaseProvisioning}},
		{"False readiness is provisioning but signalled", vm(func(v *banlieuev1.VirtualMachine) {
			v.Status.Conditions = []metav1.Condition{readyCond("GuestReady", metav1.ConditionFalse)}
		}), banlieuev1.ReadinessGuestReady, member{Phase: phaseProvisioning, Signalled: true}},
		{"the other condition does not count", vm(func(v *banlieuev1.VirtualMachine) {
			v.Status.Conditions = []metav1.Condition{readyCond("InfrastructureReady", metav1.ConditionTrue)}
		}), banlieuev1.ReadinessGuestReady, member{Phase: phaseProvisioning}},
		{"True readiness is Ready since its transition", vm(func(v *banlieuev1.VirtualMachine) {
			v.Status.Conditions = []metav1.Condition{readyCond("InfrastructureReady", metav1.ConditionTrue)}
		}), banlieuev1.ReadinessInfrastructureReady, member{Phase: phaseReady, Signalled: true, ReadyFor: 10 * time.Minute}},
		{"the claim label beats Ready", vm(func(v *banlieuev1.VirtualMachine) {
			v.Labels[banlieuev1.LabelClaim] = "c"
			v.Status.Conditions = []metav1.Condition{readyCond("InfrastructureReady", metav1.ConditionTrue)}
		}), banlieuev1.ReadinessInfrastructureReady, member{Phase: phaseClaimed, Signalled: true}},
		{"deletion beats the claim", vm(func(v *banlieuev1.VirtualMachine) {
			v.Labels[banlieuev1.LabelClaim] = "c"
			v.DeletionTimestamp = &deleted
		}), banlieuev1.ReadinessInfrastructureReady, member{Phase: phaseDeleting}},
		{"the first override's IPv4 address is the member's", vm(func(v *banlieuev1.VirtualMachine) {
			v.Spec.NetworkOverrides = []banlieuev1.NetworkOverride{{Name: "nic0", Static: banlieuev1.StaticIpamConfig{Address: "192.0.2.10", Prefix: 24}},
				{Name: "nic1", Static: banlieuev1.StaticIpamConfig{Address: "192.0.2.11", Prefix: 24}}}
		}), banlieuev1.ReadinessGuestReady, member{Phase: phaseProvisioning, Address: netip.MustParseAddr("192.0.2.10")}},
		{"an IPv6 override is no pool address", vm(func(v *banlieuev1.VirtualMachine) {
			v.Spec.NetworkOverrides = []banlieuev1.NetworkOverride{{Name: "nic0", Static: banlieuev1.StaticIpamConfig{Address: "2001:db8::1", Prefix: 64}}}
		}), banlieuev1.ReadinessGuestReady, member{Phase: phaseProvisioning}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.want.Name, tc.want.Age, tc.want.Revision = "web-pool-abcde", time.Hour, rev
			if got := projectMember(tc.vm, tc.readiness, now); got != tc.want {
				t.Errorf("member = %+v, want %+v", got, tc.want)
			}
		})
	}
}
