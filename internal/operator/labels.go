package operator

import (
	"k8s.io/apimachinery/pkg/labels"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// Label keys and fixed values on every workload object (docs/guides/libvirt-provider.md, "5. What the operator creates for it").
const (
	LabelName              = "app.kubernetes.io/name"
	LabelComponent         = "app.kubernetes.io/component"
	LabelManagedBy         = "app.kubernetes.io/managed-by"
	LabelInstance          = "app.kubernetes.io/instance"
	LabelProvider          = "banlieue.io/provider"
	LabelProviderNamespace = "banlieue.io/provider-namespace"
	LabelProviderClass     = "banlieue.io/provider-class"

	AppName   = "banlieue"
	ManagedBy = "banlieue-operator"
)

// workloadLabels are the labels of every object of p's workload under class.
func workloadLabels(p *banlieuev1.Provider, class *banlieuev1.ProviderClass) map[string]string {
	return map[string]string{
		LabelName:              AppName,
		LabelProvider:          p.Name,
		LabelProviderNamespace: p.Namespace,
		LabelProviderClass:     class.Name,
		LabelComponent:         "provider-" + class.Spec.Backend,
		LabelManagedBy:         ManagedBy,
		LabelInstance:          workloadName(class.Name, p.Name),
	}
}

// selectorLabels select the Deployment's pods. A Deployment selector is immutable, so it leaves
// out everything a class edit could change.
func selectorLabels(p *banlieuev1.Provider) map[string]string {
	return map[string]string{LabelName: AppName, LabelProvider: p.Name}
}

// ownedSelector finds every object of p's workload, whatever class it was created for, which
// is what pruning and cleanup need.
func ownedSelector(providerNamespace, provider string) labels.Selector {
	return labels.SelectorFromSet(labels.Set{LabelProvider: provider, LabelProviderNamespace: providerNamespace})
}
