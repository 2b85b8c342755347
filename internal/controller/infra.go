package controller

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// buildInput is everything an infrastructure machine is built from.
type buildInput struct {
	VM       *banlieuev1.VirtualMachine
	Class    *banlieuev1.VMClass
	Image    *banlieuev1.VMImage
	Decision decision
	// UserData is the machine's per-machine Secret (name and hash), nil when the VM has none.
	UserData *machineUserData
	// Existing is the machine as it is now, nil before it exists. What a machine was built
	// from stays as it was: a rebuilt image is a new volume for new machines, while an existing
	// machine's disks back onto the one it was created with.
	Existing client.Object
	// HeldOff: an export of the VM is Exporting, so its machine is kept powered off.
	HeldOff bool
}

// infraView is what the mirror reads of any backend's machine (docs/guides/libvirt-provider.md, "Who does what"), so mirroring does
// not depend on a backend's types.
type infraView struct {
	Ready      *metav1.Condition
	GuestReady *metav1.Condition
	// DisksGrown is the machine's refusal to grow a disk, nil when there is none.
	DisksGrown     *metav1.Condition
	Initialization *banlieuev1.InitializationStatus
	Addresses      []banlieuev1.MachineAddress
	PowerState     banlieuev1.PowerState
	// LastRestartTime is the restart request the machine last served.
	LastRestartTime *metav1.Time
}

// infraKind is one backend's machine kind: the controller's whole knowledge of a backend. A new
// backend adds an entry to infraKinds and nothing else in the VM reconciler changes.
type infraKind struct {
	GVK       schema.GroupVersionKind
	newObject func() client.Object
	newList   func() client.ObjectList
	build     func(buildInput) (client.Object, error)
	view      func(client.Object) infraView
	// providerOf is the Provider a machine references, in its own namespace or a shared one:
	// the provider-in-use finalizer holds that Provider while the machine exists.
	providerOf func(client.Object) types.NamespacedName
	// userDataSecretOf is the name of the per-machine user-data Secret a machine references,
	// "" when none.
	userDataSecretOf func(client.Object) string
}

// infraKinds maps a ProviderClass name to its machine kind.
var infraKinds = map[string]infraKind{
	"libvirt": libvirtKind,
	"vsphere": vsphereKind,
}

// infraKindFor is the machine kind of a provider class.
func infraKindFor(providerClass string) (infraKind, error) {
	k, ok := infraKinds[providerClass]
	if !ok {
		return infraKind{}, fmt.Errorf("provider class '%s' has no infrastructure builder in banlieue-controller", providerClass)
	}
	return k, nil
}

// allInfraKinds lists every known kind in a fixed order, for deletion.
func allInfraKinds() []infraKind {
	classes := make([]string, 0, len(infraKinds))
	for c := range infraKinds {
		classes = append(classes, c)
	}
	slices.Sort(classes)
	out := make([]infraKind, 0, len(classes))
	for _, c := range classes {
		out = append(out, infraKinds[c])
	}
	return out
}

// machineMeta is the metadata every machine shares: named after the VM so deletion can find
// it by name alone, owned by it so garbage collection backs up the finalizer.
func machineMeta(vm *banlieuev1.VirtualMachine) metav1.ObjectMeta {
	labels := make(map[string]string, len(vm.Labels)+1)
	for k, v := range vm.Labels {
		labels[k] = v
	}
	labels[banlieuev1.LabelOwnedBy] = vm.Name
	yes := true
	return metav1.ObjectMeta{
		Name:      vm.Name,
		Namespace: vm.Namespace,
		Labels:    labels,
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion:         banlieuev1.GroupVersion.String(),
			Kind:               "VirtualMachine",
			Name:               vm.Name,
			UID:                vm.UID,
			Controller:         &yes,
			BlockOwnerDeletion: &yes,
		}},
	}
}

// infrastructureRef points status.infrastructureRef at a VM's machine of kind k.
func infrastructureRef(k infraKind, vm *banlieuev1.VirtualMachine) *banlieuev1.InfrastructureReference {
	return &banlieuev1.InfrastructureReference{APIGroup: k.GVK.Group, Kind: k.GVK.Kind, Name: vm.Name, Namespace: vm.Namespace}
}
