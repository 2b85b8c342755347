package v1alpha1

// NamespacesFrom says which namespaces may place VMs on a Provider.
// +kubebuilder:validation:Enum=Same;Selector;All
type NamespacesFrom string

// The values of allowedNamespaces.from, as Gateway API's allowedRoutes.namespaces.from spells
// them.
const (
	// NamespacesFromSame admits only the Provider's own namespace.
	NamespacesFromSame NamespacesFrom = "Same"
	// NamespacesFromSelector admits the Provider's namespace and the namespaces whose labels
	// match allowedNamespaces.selector.
	NamespacesFromSelector NamespacesFrom = "Selector"
	// NamespacesFromAll admits every namespace.
	NamespacesFromAll NamespacesFrom = "All"
)

// AllowedNamespaces is the namespaces whose VirtualMachines and LibvirtMachines may use a
// Provider. The Provider's own namespace is always admitted.
// +kubebuilder:validation:XValidation:rule="self.from == 'Selector' ? has(self.selector) : !has(self.selector)",message="allowedNamespaces.selector is required when from is Selector and forbidden otherwise"
type AllowedNamespaces struct {
	// from is Same (the Provider's namespace only), Selector (also the namespaces whose labels
	// match selector) or All.
	// +kubebuilder:default=Same
	// +optional
	From NamespacesFrom `json:"from,omitempty"`
	// selector over Namespace labels; required when from is Selector. An empty selector ({})
	// matches every namespace.
	// +optional
	Selector *LabelSelector `json:"selector,omitempty"`
}
