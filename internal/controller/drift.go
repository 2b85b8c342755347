package controller

import (
	"slices"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// placementDrift names the first way next differs from the recorded placement, or "" when it
// does not (or nothing was recorded yet). The time of the decision is not part of it.
func placementDrift(prev *banlieuev1.ScheduledPlacement, next banlieuev1.ScheduledPlacement) string {
	switch {
	case prev == nil:
		return ""
	case prev.ProviderName != next.ProviderName || prev.ProviderNamespace != next.ProviderNamespace ||
		prev.ProviderClass != next.ProviderClass:
		return banlieuev1.ReasonProviderChanged
	case prev.FailureDomain != next.FailureDomain:
		return banlieuev1.ReasonFailureDomainChanged
	case !slices.Equal(prev.ResolvedStorage, next.ResolvedStorage):
		return banlieuev1.ReasonStorageMappingChanged
	case !slices.Equal(prev.ResolvedNetworks, next.ResolvedNetworks):
		return banlieuev1.ReasonNetworkMappingChanged
	}
	return ""
}
