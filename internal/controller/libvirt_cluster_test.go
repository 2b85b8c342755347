package controller

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

func TestLibvirtClusterStatus(t *testing.T) {
	endpoint := &infrav1.APIEndpoint{Host: "192.0.2.100", Port: 6443}
	providers := []infrav1.ClusterProvider{{Name: "kvm-1"}, {Name: "kvm-2", Namespace: "banlieue-system", ControlPlane: ptr.To(false)}}
	p := &banlieuev1.Provider{}
	provisioned := infrav1.LibvirtClusterStatus{Initialization: &infrav1.ClusterInitializationStatus{Provisioned: ptr.To(true)}}
	for _, tc := range []struct {
		name        string
		endpoint    *infrav1.APIEndpoint
		found       []*banlieuev1.Provider
		before      infrav1.LibvirtClusterStatus
		domains     []string
		reason      string
		provisioned bool
	}{
		{"every Provider and the endpoint", endpoint, []*banlieuev1.Provider{p, p}, infrav1.LibvirtClusterStatus{}, []string{"kvm-1", "kvm-2"}, infrav1.ReasonClusterProvisioned, true},
		{"no endpoint yet", nil, []*banlieuev1.Provider{p, p}, infrav1.LibvirtClusterStatus{}, []string{"kvm-1", "kvm-2"}, infrav1.ReasonWaitingForControlPlaneEndpoint, false},
		{"a Provider missing", endpoint, []*banlieuev1.Provider{p, nil}, infrav1.LibvirtClusterStatus{}, []string{"kvm-1"}, infrav1.ReasonProviderNotFound, false},
		{"a Provider gone after provisioning: still provisioned", endpoint, []*banlieuev1.Provider{nil, p}, provisioned, []string{"kvm-2"}, infrav1.ReasonProviderNotFound, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lc := &infrav1.LibvirtCluster{
				ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "c1", Generation: 3},
				Spec:       infrav1.LibvirtClusterSpec{ControlPlaneEndpoint: tc.endpoint, Providers: providers},
				Status:     tc.before,
			}
			st := libvirtClusterStatus(lc, tc.found)
			var names []string
			for _, fd := range st.FailureDomains {
				names = append(names, fd.Name)
				want := fd.Name == "kvm-1"
				if fd.ControlPlane == nil || *fd.ControlPlane != want {
					t.Errorf("%s controlPlane %v, want %v", fd.Name, fd.ControlPlane, want)
				}
				if ns := map[string]string{"kvm-1": "team-a", "kvm-2": "banlieue-system"}[fd.Name]; fd.Attributes[AttributeProviderNamespace] != ns {
					t.Errorf("%s attributes %v, want provider-namespace %s", fd.Name, fd.Attributes, ns)
				}
			}
			if len(names) != len(tc.domains) || (len(names) > 0 && names[0] != tc.domains[0]) {
				t.Errorf("failure domains %v, want %v", names, tc.domains)
			}
			ready := meta.FindStatusCondition(st.Conditions, banlieuev1.ConditionReady)
			if ready == nil || ready.Reason != tc.reason || ready.ObservedGeneration != 3 {
				t.Errorf("Ready %+v, want reason %s", ready, tc.reason)
			}
			if got := st.Initialization != nil && ptr.Deref(st.Initialization.Provisioned, false); got != tc.provisioned {
				t.Errorf("provisioned %v, want %v", got, tc.provisioned)
			}
			if tc.reason == infrav1.ReasonProviderNotFound && (ready == nil || !strings.Contains(ready.Message, "spec.providers[")) {
				t.Errorf("the message names the field: %+v", ready)
			}
		})
	}
}
