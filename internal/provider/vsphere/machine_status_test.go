package vsphere

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

func TestProviderIDAndAddresses(t *testing.T) {
	if got := providerIDFor("4210ABCD-0000-1111-2222-333344445555"); got != "vsphere://4210abcd-0000-1111-2222-333344445555" {
		t.Errorf("providerIDFor = %q", got)
	}
	if got := providerIDFor(""); got != "" {
		t.Errorf("providerIDFor of no UUID = %q, want none", got)
	}
	got := addresses([]string{"192.0.2.10", "127.0.0.1", "fe80::1", "not-an-ip", "2001:db8::5", "0.0.0.0"})
	var ips []string
	for _, a := range got {
		if a.Type != banlieuev1.MachineInternalIP {
			t.Errorf("address %v is not InternalIP", a)
		}
		ips = append(ips, a.Address)
	}
	if !slices.Equal(ips, []string{"192.0.2.10", "2001:db8::5"}) {
		t.Errorf("addresses = %v, want the routable ones in order", ips)
	}
}

func TestTemplatePath(t *testing.T) {
	for _, c := range []struct {
		dc, tpl, want string
		ok            bool
	}{
		{"dc1", "/dc1/vm/templates/ubuntu", "templates/ubuntu", true},
		{"/dc1", "/dc1/vm/ubuntu", "ubuntu", true},
		{"dc1", "/dc2/vm/templates/ubuntu", "", false},
		{"dc1", "/dc1/host/ubuntu", "", false},
		{"dc1", "/dc1/vm/", "", false},
	} {
		got, err := templatePath(c.dc, c.tpl)
		if got != c.want || (err == nil) != c.ok {
			t.Errorf("templatePath(%q, %q) = %q, %v; want %q, ok %v", c.dc, c.tpl, got, err, c.want, c.ok)
		}
	}
}

func TestSucceededStatus(t *testing.T) {
	m := &infrav1.VSphereMachine{ObjectMeta: metav1.ObjectMeta{Generation: 3}, Spec: infrav1.VSphereMachineSpec{
		VMName: "web-0", Template: "/dc1/vm/t", FailureDomain: "dc1.c1", DesiredPowerState: banlieuev1.PoweredOn}}
	for _, c := range []struct {
		name        string
		vm          Machine
		blocked     *Refusal
		ready       metav1.ConditionStatus
		reason      string
		guestReason string
	}{
		{"running with tools", Machine{Ref: "VirtualMachine:vm-1", PowerState: PowerStateOn, ToolsRunning: true, IPs: []string{"192.0.2.1"}},
			nil, metav1.ConditionTrue, infrav1.ReasonVMRunning, infrav1.ReasonToolsReporting},
		{"off while on is asked", Machine{Ref: "VirtualMachine:vm-1", PowerState: PowerStateOff},
			nil, metav1.ConditionFalse, infrav1.ReasonVMNotRunning, infrav1.ReasonToolsNotReporting},
		{"blocked", Machine{Ref: "VirtualMachine:vm-1", PowerState: PowerStateOn},
			&Refusal{Reason: infrav1.ReasonToolsNotRunning, Message: "x"}, metav1.ConditionFalse, infrav1.ReasonToolsNotRunning, infrav1.ReasonToolsNotReporting},
	} {
		st := succeededStatus(m, c.vm, c.blocked)
		r := meta.FindStatusCondition(st.Conditions, banlieuev1.ConditionReady)
		g := meta.FindStatusCondition(st.Conditions, banlieuev1.ConditionGuestReady)
		if r.Status != c.ready || r.Reason != c.reason || g.Reason != c.guestReason || st.ObservedGeneration != 3 || st.VMRef != c.vm.Ref {
			t.Errorf("%s: Ready %+v, GuestReady %+v, status %+v", c.name, r, g, st)
		}
		if want := c.vm.PowerState == PowerStateOn; *st.Initialization.Provisioned != want {
			t.Errorf("%s: provisioned %v, want %v", c.name, *st.Initialization.Provisioned, want)
		}
	}
	failed := failedStatus(m, infrav1.ReasonReconcileFailed, "clone: no")
	if r := meta.FindStatusCondition(failed.Conditions, banlieuev1.ConditionReady); r.Status != metav1.ConditionFalse || r.Message != "clone: no" {
		t.Errorf("failedStatus Ready = %+v", r)
	}
}

// fakeBackend counts its closes; only Close is called by Sessions.
type fakeBackend struct {
	Backend
	closed *atomic.Int32
}

func (f fakeBackend) Close(context.Context) error { f.closed.Add(1); return nil }

// TestSessionsRedialOnChange: one session per Provider, reused while its objects are unchanged,
// replaced (and the old one closed) when they change; a failed dial is not kept.
func TestSessionsRedialOnChange(t *testing.T) {
	dials := 0
	var closed atomic.Int32
	fail := false
	s := &Sessions{Dial: func(context.Context, Endpoint) (Backend, error) {
		if fail {
			return nil, errors.New("log in: refused")
		}
		dials++
		return fakeBackend{closed: &closed}, nil
	}}
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "ns", Name: "vc"}
	e := Endpoint{URL: "https://vc/sdk"}
	for range 3 {
		if _, err := s.Get(ctx, key, e, "v1"); err != nil {
			t.Fatal(err)
		}
	}
	if dials != 1 {
		t.Fatalf("%d dials for one version, want 1", dials)
	}
	fail = true
	if _, err := s.Get(ctx, key, e, "v2"); err == nil {
		t.Fatal("a failed dial returned a session")
	}
	fail = false
	if _, err := s.Get(ctx, key, e, "v2"); err != nil || dials != 2 {
		t.Fatalf("after a change: %d dials, %v; want 2", dials, err)
	}
	s.CloseAll()
	if n := closed.Load(); n < 1 {
		t.Errorf("%d sessions closed, want the live one at least", n)
	}
}
