package vsphere

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/capi"
)

func TestCAPIIdentity(t *testing.T) {
	long := strings.Repeat("n", 75)
	cases := []struct {
		name                 string
		vmName, specFD, asks string
		machineName          string
		wantVM, wantFD       string
		wantReason           string
	}{
		{name: "the template's failure domain", specFD: "DC0.C0", wantVM: "team-a-db-01", wantFD: "DC0.C0"},
		{name: "the Machine's failure domain", asks: "DC1.C1", wantVM: "team-a-db-01", wantFD: "DC1.C1"},
		{name: "both the same", specFD: "DC0.C0", asks: "DC0.C0", wantVM: "team-a-db-01", wantFD: "DC0.C0"},
		{name: "a name already set is kept", vmName: "kept", specFD: "DC0.C0", wantVM: "kept", wantFD: "DC0.C0"},
		{name: "the Machine asks for another", specFD: "DC0.C0", asks: "DC1.C1", wantReason: infrav1.ReasonFailureDomainMismatch},
		{name: "neither names one", wantReason: infrav1.ReasonNoFailureDomain},
		{name: "the Machine names the Provider (a LibvirtCluster's failure domain)", specFD: "DC0.C0", asks: "vc", wantVM: "team-a-db-01", wantFD: "DC0.C0"},
		{name: "the Provider only is no vCenter cluster", asks: "vc", wantReason: infrav1.ReasonNoFailureDomain},
		{name: "name too long for vCenter", machineName: long, specFD: "DC0.C0", wantReason: infrav1.ReasonNotPermitted},
		{name: "a set name is not rechecked", machineName: long, vmName: "kept", specFD: "DC0.C0", wantVM: "kept", wantFD: "DC0.C0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := testMachine(func(m *infrav1.VSphereMachine) {
				m.Spec.VMName, m.Spec.FailureDomain = c.vmName, c.specFD
				m.Spec.ProviderRef = &infrav1.ProviderReference{Name: "vc"}
				if c.machineName != "" {
					m.Name = c.machineName
				}
			})
			vm, fd, refusal := capiIdentity(m, &capi.Machine{Name: "md-0-abc", FailureDomain: c.asks})
			if c.wantReason != "" {
				if refusal == nil || refusal.Reason != c.wantReason || vm != "" || fd != "" {
					t.Fatalf("got %q %q %+v, want refusal %s", vm, fd, refusal, c.wantReason)
				}
				return
			}
			if refusal != nil || vm != c.wantVM || fd != c.wantFD {
				t.Fatalf("got %q %q %+v, want %q %q", vm, fd, refusal, c.wantVM, c.wantFD)
			}
		})
	}
}

func TestCAPIStatus(t *testing.T) {
	yes, no := true, false
	cases := []struct {
		name            string
		stored, pass    *bool
		notPaused       bool
		wantProvisioned bool
	}{
		{name: "provisioned stays true though the pass says not", stored: &yes, pass: &no, notPaused: true, wantProvisioned: true},
		{name: "never provisioned: the pass decides", stored: nil, pass: &no, notPaused: true, wantProvisioned: false},
		{name: "first provisioned", stored: &no, pass: &yes, notPaused: true, wantProvisioned: true},
		{name: "a refusal before the pause check keeps provisioned", stored: &yes, pass: &no, wantProvisioned: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := testMachine()
			m.Generation = 3
			if c.stored != nil {
				m.Status.Initialization = &banlieuev1.InitializationStatus{Provisioned: c.stored}
			}
			st := infrav1.VSphereMachineStatus{Initialization: &banlieuev1.InitializationStatus{Provisioned: c.pass}}
			capiStatus(m, &st, c.notPaused)
			if got := *st.Initialization.Provisioned; got != c.wantProvisioned {
				t.Errorf("provisioned %v, want %v", got, c.wantProvisioned)
			}
			p := meta.FindStatusCondition(st.Conditions, infrav1.ConditionPaused)
			switch {
			case c.notPaused && (p == nil || p.Status != metav1.ConditionFalse || p.Reason != infrav1.ReasonNotPaused || p.ObservedGeneration != 3):
				t.Errorf("Paused %+v, want False NotPaused for generation 3", p)
			case !c.notPaused && p != nil:
				t.Errorf("Paused %+v written by a pass that did not check it", p)
			}
		})
	}
}
