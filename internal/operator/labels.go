package operator

import (
	"k8s.io/apimachinery/pkg/labels"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// Fixed label values on every workload object (docs/guides/libvirt-provider.md, "5. What the operator creates for it").
const (
	AppName   = "banlieue"
	ManagedBy = "banlieue-operator"
)

// workloadLabels are the labels of every object of p's workload under class.
func workloadLabels(p *banlieuev1.Provider, class *banlieuev1.ProviderClass) map[string]string {
	return map[string]string{
		banlieuev1.LabelName:              AppName,
		banlieuev1.LabelProvider:          p.Name,
		banlieuev1.LabelProviderNamespace: p.Namespace,
		banlieuev1.LabelProviderClass:     class.Name,
		banlieuev1.LabelComponent:         "provider-" + class.Spec.Backend,
		banlieuev1.LabelManagedBy:         ManagedBy,
		banlieuev1.LabelInstance:          workloadName(class.Name, p.Name),
	}
}

// selectorLabels select the Deployment's pods. A Deployment selector is immutable, so it leaves
// out everything a class edit could change.
func selectorLabels(p *banlieuev1.Provider) map[string]string {
	return map[string]string{banlieuev1.LabelName: AppName, banlieuev1.LabelProvider: p.Name}
}

// ownedSelector finds every object of p's workload, whatever class it was created for, which
// is what pruning and cleanup need.
func ownedSelector(providerNamespace, provider string) labels.Selector {
	return labels.SelectorFromSet(labels.Set{banlieuev1.LabelProvider: provider, banlieuev1.LabelProviderNamespace: providerNamespace})
}
