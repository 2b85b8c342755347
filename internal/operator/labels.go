package operator

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/naming"
)

// Fixed label values on every workload object (docs/guides/libvirt-provider.md, "5. What the operator creates for it").
const (
	AppName   = "banlieue"
	ManagedBy = "banlieue-operator"
)

// workloadLabels are the labels of every object of p's workload under class. Provider and class
// names may be 253 characters long and a label value only 63, so both are capped; a namespace
// name is a DNS-1123 label and always fits. A capped value can be shared by two long names, so
// the labels only narrow a search: workloadAnnotations holds the exact identity.
func workloadLabels(p *banlieuev1.Provider, class *banlieuev1.ProviderClass) map[string]string {
	return map[string]string{
		banlieuev1.LabelName:              AppName,
		banlieuev1.LabelProvider:          naming.Capped(p.Name),
		banlieuev1.LabelProviderNamespace: p.Namespace,
		banlieuev1.LabelProviderClass:     naming.Capped(class.Name),
		banlieuev1.LabelComponent:         "provider-" + class.Spec.Backend,
		banlieuev1.LabelManagedBy:         ManagedBy,
		banlieuev1.LabelInstance:          workloadName(class.Name, p.Namespace, p.Name),
	}
}

// workloadAnnotations name the Provider (namespace/name) the object belongs to, uncapped, with
// the key import Jobs use for the same purpose.
func workloadAnnotations(p *banlieuev1.Provider) map[string]string {
	return map[string]string{banlieuev1.AnnotationProvider: p.Namespace + "/" + p.Name}
}

// selectorLabels select the Deployment's pods. A Deployment selector is immutable, so it leaves
// out everything a class edit could change; the instance is unique to this Deployment, even
// among the Deployments of other namespaces' Providers in a shared workloadNamespace, and
// changes only with the class's name, which gives a new Deployment anyway.
func selectorLabels(p *banlieuev1.Provider, class *banlieuev1.ProviderClass) map[string]string {
	return map[string]string{banlieuev1.LabelName: AppName, banlieuev1.LabelInstance: workloadName(class.Name, p.Namespace, p.Name)}
}

// ownedSelector narrows the search for p's workload objects, whatever class they were created
// for, which is what pruning and cleanup need; workloadOwner decides.
func ownedSelector(providerNamespace, provider string) labels.Selector {
	return labels.SelectorFromSet(labels.Set{banlieuev1.LabelProvider: naming.Capped(provider), banlieuev1.LabelProviderNamespace: providerNamespace})
}

// workloadOwner is the Provider a workload object belongs to. The annotation is exact. An object
// without it was written before it existed (docs/guides/install.md, "Upgrading to
// collision-free workload names"); such objects carry the names uncapped in their labels, since
// an earlier operator could not apply a longer one at all, so the labels are exact for them.
func workloadOwner(o metav1.Object) (client.ObjectKey, bool) {
	l := o.GetLabels()
	if l[banlieuev1.LabelManagedBy] != ManagedBy {
		return client.ObjectKey{}, false
	}
	if ref, ok := o.GetAnnotations()[banlieuev1.AnnotationProvider]; ok {
		ns, name, found := strings.Cut(ref, "/")
		return client.ObjectKey{Namespace: ns, Name: name}, found && ns != "" && name != ""
	}
	key := client.ObjectKey{Namespace: l[banlieuev1.LabelProviderNamespace], Name: l[banlieuev1.LabelProvider]}
	return key, key.Namespace != "" && key.Name != ""
}
