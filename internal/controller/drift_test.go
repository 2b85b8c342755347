package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

func TestPlacementDrift(t *testing.T) {
	base := func() banlieuev1.ScheduledPlacement {
		return banlieuev1.ScheduledPlacement{
			ProviderName: "a", ProviderClass: "libvirt", FailureDomain: "a",
			ResolvedStorage:  []banlieuev1.ResolvedMapping{{ClassName: "standard", BackendID: "default"}},
			ResolvedNetworks: []banlieuev1.ResolvedMapping{{ClassName: "prod", BackendID: "br-prod"}},
		}
	}
	with := func(m func(*banlieuev1.ScheduledPlacement)) banlieuev1.ScheduledPlacement {
		p := base()
		m(&p)
		return p
	}
	now := metav1.Now()
	tests := []struct {
		name string
		prev *banlieuev1.ScheduledPlacement
		next banlieuev1.ScheduledPlacement
		want string
	}{
		{"no previous placement", nil, base(), ""},
		{"same placement", func() *banlieuev1.ScheduledPlacement { p := base(); return &p }(), base(), ""},
		{"time is not drift", func() *banlieuev1.ScheduledPlacement { p := base(); p.ScheduledAt = &now; return &p }(), base(), ""},
		{"provider", func() *banlieuev1.ScheduledPlacement { p := base(); return &p }(),
			with(func(p *banlieuev1.ScheduledPlacement) { p.ProviderName = "b"; p.FailureDomain = "b" }), banlieuev1.ReasonProviderChanged},
		{"provider of the same name in another namespace", func() *banlieuev1.ScheduledPlacement { p := base(); return &p }(),
			with(func(p *banlieuev1.ScheduledPlacement) { p.ProviderNamespace = "banlieue-system" }), banlieuev1.ReasonProviderChanged},
		{"failure domain", func() *banlieuev1.ScheduledPlacement { p := base(); return &p }(),
			with(func(p *banlieuev1.ScheduledPlacement) { p.FailureDomain = "z" }), banlieuev1.ReasonFailureDomainChanged},
		{"storage", func() *banlieuev1.ScheduledPlacement { p := base(); return &p }(),
			with(func(p *banlieuev1.ScheduledPlacement) { p.ResolvedStorage[0].BackendID = "nvme-pool" }), banlieuev1.ReasonStorageMappingChanged},
		{"network", func() *banlieuev1.ScheduledPlacement { p := base(); return &p }(),
			with(func(p *banlieuev1.ScheduledPlacement) { p.ResolvedNetworks[0].BackendID = "br0" }), banlieuev1.ReasonNetworkMappingChanged},
		{"storage checked before network", func() *banlieuev1.ScheduledPlacement { p := base(); return &p }(),
			with(func(p *banlieuev1.ScheduledPlacement) {
				p.ResolvedStorage[0].BackendID = "x"
				p.ResolvedNetworks[0].BackendID = "y"
			}), banlieuev1.ReasonStorageMappingChanged},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := placementDrift(tt.prev, tt.next); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
