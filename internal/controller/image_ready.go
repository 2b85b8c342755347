package controller

import (
	"cmp"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// readyProviders is the image's "N/M": rows ready out of rows, for `kubectl get bimg`.
func readyProviders(rows []banlieuev1.ProviderImageStatus) string {
	ready := 0
	for _, r := range rows {
		if r.Ready {
			ready++
		}
	}
	return fmt.Sprintf("%d/%d", ready, len(rows))
}

// imageReady aggregates the per-Provider rows into the image's Ready condition.
func imageReady(rows []banlieuev1.ProviderImageStatus) metav1.Condition {
	c := metav1.Condition{Type: banlieuev1.ConditionReady}
	if len(rows) == 0 {
		c.Status, c.Reason = metav1.ConditionUnknown, banlieuev1.ReasonNoProviders
		return c
	}
	sorted := slices.Clone(rows)
	slices.SortFunc(sorted, func(a, b banlieuev1.ProviderImageStatus) int {
		return cmp.Or(cmp.Compare(a.ProviderNamespace, b.ProviderNamespace), cmp.Compare(a.ProviderName, b.ProviderName))
	})
	var unready []banlieuev1.ProviderImageStatus
	for _, r := range sorted {
		if !r.Ready {
			unready = append(unready, r)
		}
	}
	if len(unready) == 0 {
		c.Status, c.Reason = metav1.ConditionTrue, banlieuev1.ReasonReconciled
		c.Message = fmt.Sprintf("image available on %d provider(s)", len(rows))
		return c
	}
	c.Status, c.Reason = metav1.ConditionFalse, cmp.Or(unready[0].Reason, banlieuev1.ReasonNotReady)
	c.Message = fmt.Sprintf("%d of %d provider(s) do not have this image", len(unready), len(rows))
	return c
}
