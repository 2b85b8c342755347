// Package tenancy holds the one decision of which namespaces may use a Provider, shared by the
// controller (which schedules onto it) and the provider (which serves its machines).
package tenancy

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// AdmitsNamespace reports whether Provider p admits VMs and machines of namespace ns, whose
// labels are nsLabels. The controller (scheduling) and the provider (serving a machine) both
// decide with it, so the two can never disagree. When the namespace is refused, rule is the
// Provider's rule in words, for the NamespaceNotAllowed message.
func AdmitsNamespace(p *banlieuev1.Provider, ns string, nsLabels map[string]string) (ok bool, rule string) {
	if ns == p.Namespace {
		return true, ""
	}
	a := p.Spec.AllowedNamespaces
	if a == nil || a.From == "" || a.From == banlieuev1.NamespacesFromSame {
		return false, fmt.Sprintf("allowedNamespaces.from is %s: only namespace %s may use it", banlieuev1.NamespacesFromSame, p.Namespace)
	}
	switch a.From {
	case banlieuev1.NamespacesFromAll:
		return true, ""
	case banlieuev1.NamespacesFromSelector:
		if a.Selector == nil {
			// Admission refuses this (CEL); refusing here keeps an object written before the
			// rule from admitting everyone.
			return false, "allowedNamespaces.from is Selector but allowedNamespaces.selector is missing"
		}
		sel, err := metav1.LabelSelectorAsSelector(metaSelector(a.Selector))
		if err != nil {
			return false, fmt.Sprintf("allowedNamespaces.selector is invalid (%v)", err)
		}
		if sel.Matches(labels.Set(nsLabels)) {
			return true, ""
		}
		return false, fmt.Sprintf("allowedNamespaces.selector %q does not match the labels of namespace %s", sel.String(), ns)
	}
	return false, fmt.Sprintf("allowedNamespaces.from %q is not Same, Selector or All", a.From)
}

// metaSelector is s as Kubernetes' own selector type, whose parser refuses a malformed key or
// value where banlieue's type, bounded for admission, carries them as written.
func metaSelector(s *banlieuev1.LabelSelector) *metav1.LabelSelector {
	out := &metav1.LabelSelector{MatchLabels: s.MatchLabels}
	for _, r := range s.MatchExpressions {
		out.MatchExpressions = append(out.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: r.Key, Operator: metav1.LabelSelectorOperator(r.Operator), Values: r.Values})
	}
	return out
}
