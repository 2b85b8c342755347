package controller

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
)

func TestChooseFailureDomain(t *testing.T) {
	cluster := &infrav1.LibvirtCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "c1"},
		Status: infrav1.LibvirtClusterStatus{FailureDomains: []infrav1.FailureDomain{
			{Name: "kvm-1", ControlPlane: ptr.To(true), Attributes: map[string]string{AttributeProviderNamespace: "team"}},
			{Name: "kvm-2", ControlPlane: ptr.To(false), Attributes: map[string]string{AttributeProviderNamespace: "team"}},
			{Name: "shared", ControlPlane: ptr.To(true), Attributes: map[string]string{AttributeProviderNamespace: "infra"}},
		}}}
	tests := []struct {
		name         string
		asked        string
		controlPlane bool
		placed       map[string]int
		cluster      *infrav1.LibvirtCluster
		want         *infrav1.ProviderReference
		reason       string
		mentions     []string
	}{
		{name: "asked, in the machine's namespace", asked: "kvm-2", placed: map[string]int{"kvm-2": 5},
			want: &infrav1.ProviderReference{Name: "kvm-2"}},
		{name: "asked, a shared Provider of another namespace", asked: "shared",
			want: &infrav1.ProviderReference{Name: "shared", Namespace: "infra"}},
		{name: "asked, a control plane machine in a domain without controlPlane: honoured as asked", asked: "kvm-2", controlPlane: true,
			want: &infrav1.ProviderReference{Name: "kvm-2"}},
		{name: "asked, unknown", asked: "kvm-9", reason: infrav1.ReasonFailureDomainUnknown,
			mentions: []string{"Machine m1", `spec.failureDomain "kvm-9"`, "LibvirtCluster c1", "[kvm-1 kvm-2 shared]"}},
		{name: "none asked, none placed: the first", want: &infrav1.ProviderReference{Name: "kvm-1"}},
		{name: "none asked: the fewest placed", placed: map[string]int{"kvm-1": 2, "kvm-2": 1, "shared": 2},
			want: &infrav1.ProviderReference{Name: "kvm-2"}},
		{name: "none asked, a tie: the first in status order", placed: map[string]int{"kvm-1": 1, "kvm-2": 1, "shared": 1},
			want: &infrav1.ProviderReference{Name: "kvm-1"}},
		{name: "none asked, control plane: only controlPlane domains", controlPlane: true, placed: map[string]int{"kvm-1": 1},
			want: &infrav1.ProviderReference{Name: "shared", Namespace: "infra"}},
		{name: "none asked, no failure domains", cluster: &infrav1.LibvirtCluster{ObjectMeta: metav1.ObjectMeta{Name: "empty"}},
			reason: infrav1.ReasonNoFailureDomain, mentions: []string{"no spec.failureDomain", "LibvirtCluster empty", "[]"}},
		{name: "none asked, control plane, no controlPlane domain", controlPlane: true,
			cluster: &infrav1.LibvirtCluster{ObjectMeta: metav1.ObjectMeta{Name: "workers"}, Status: infrav1.LibvirtClusterStatus{
				FailureDomains: []infrav1.FailureDomain{{Name: "kvm-2", ControlPlane: ptr.To(false)}}}},
			reason: infrav1.ReasonNoFailureDomain, mentions: []string{"controlPlane true", "[kvm-2]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lc := cluster
			if tt.cluster != nil {
				lc = tt.cluster
			}
			got, err := chooseFailureDomain(machinePlacement{namespace: "team", machine: "m1", asked: tt.asked,
				controlPlane: tt.controlPlane, cluster: lc, placed: tt.placed})
			if tt.reason != "" {
				var refusal *placementRefusal
				if !errors.As(err, &refusal) || refusal.reason != tt.reason {
					t.Fatalf("got %v, %v; want a refusal %s", got, err, tt.reason)
				}
				for _, s := range tt.mentions {
					if !strings.Contains(refusal.message, s) {
						t.Errorf("message %q does not mention %q", refusal.message, s)
					}
				}
				return
			}
			if err != nil || got == nil || *got != *tt.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}
