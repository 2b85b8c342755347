package controller

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

var vsphereKind = infraKind{
	GVK:              infrav1.GroupVersion.WithKind("VSphereMachine"),
	newObject:        func() client.Object { return &infrav1.VSphereMachine{} },
	newList:          func() client.ObjectList { return &infrav1.VSphereMachineList{} },
	build:            func(in buildInput) (client.Object, error) { return buildVSphereMachine(in) },
	view:             func(o client.Object) infraView { return vsphereView(o.(*infrav1.VSphereMachine)) },
	providerOf:       func(o client.Object) types.NamespacedName { return o.(*infrav1.VSphereMachine).ProviderKey() },
	userDataSecretOf: func(o client.Object) string { return secretName(o.(*infrav1.VSphereMachine).Spec.UserDataSecretRef) },
}

// buildVSphereMachine is the VSphereMachine of a scheduled VM (docs/guides/vsphere-provider.md,
// "4. Run a VM"): a clone of the image's template, sized by the class, its disks on the
// datastores and its adapters on the port groups the Provider maps the class's storage and
// network classes to. spec.providerID is left to the provider, as for libvirt.
func buildVSphereMachine(in buildInput) (*infrav1.VSphereMachine, error) {
	vm, class, d := in.VM, in.Class, in.Decision
	template, rf := vsphereTemplate(in.Image, d.Provider.Spec.ProviderClassRef.Name)
	if rf != nil {
		return nil, rf
	}
	// A clone happens once: a machine that exists keeps the template it was cloned from, as a
	// libvirt machine keeps its boot volume when the image is rebuilt.
	if m, ok := in.Existing.(*infrav1.VSphereMachine); ok && m.Spec.Template != "" {
		template = m.Spec.Template
	}
	disks := class.Spec.Hardware.Disks
	if len(disks) == 0 || len(disks) != len(d.ResolvedStorage) {
		return nil, fmt.Errorf("VMClass %s has %d disk(s) but %d storage class(es) were resolved", class.Name, len(disks), len(d.ResolvedStorage))
	}
	nics := class.Spec.Network.Interfaces
	if len(nics) != len(d.ResolvedNetworks) {
		return nil, fmt.Errorf("VMClass %s has %d interface(s) but %d network(s) were resolved", class.Name, len(nics), len(d.ResolvedNetworks))
	}
	cpus, memory, diskOverrides := machineSize(vm, class)
	out := make([]infrav1.VSphereDisk, 0, len(disks))
	for i, disk := range disks {
		size := disk.SizeGiB
		if j := slices.IndexFunc(diskOverrides, func(o banlieuev1.DiskOverride) bool { return o.Name == disk.Name }); j >= 0 {
			size = diskOverrides[j].SizeGiB
		}
		out = append(out, infrav1.VSphereDisk{Name: disk.Name, SizeGiB: size, Datastore: d.ResolvedStorage[i].BackendID,
			Provisioning: cmp.Or(disk.Provisioning, banlieuev1.DiskThin)})
	}
	adapters := make([]infrav1.VSphereNetworkInterface, 0, len(nics))
	for i, nic := range nics {
		adapters = append(adapters, infrav1.VSphereNetworkInterface{
			Name:      nic.Name,
			PortGroup: d.ResolvedNetworks[i].BackendID,
			IPAM:      interfaceIPAM(vm, nic, networkMapping(d.Provider, nic.NetworkClass)),
		})
	}
	power, offMode, offTimeout := machinePower(vm)
	userDataRef, userDataHash := userDataFields(in)
	return &infrav1.VSphereMachine{
		ObjectMeta: machineMeta(vm),
		Spec: infrav1.VSphereMachineSpec{
			FailureDomain:     d.FailureDomain.Name,
			ProviderRef:       &infrav1.ProviderReference{Name: d.Provider.Name, Namespace: d.Provider.Namespace},
			VMName:            vm.Namespace + "-" + vm.Name,
			Template:          template,
			CPUs:              cpus,
			MemoryMiB:         memory,
			Firmware:          cmp.Or(class.Spec.Firmware, banlieuev1.FirmwareEFI),
			TPMEnabled:        class.Spec.TPMEnabled,
			Disks:             out,
			Network:           adapters,
			UserDataSecretRef: userDataRef,
			UserDataHash:      userDataHash,
			DesiredPowerState: power,
			PowerOffMode:      offMode,
			PowerOffTimeout:   offTimeout,
			NextRestartTime:   vm.Spec.NextRestartTime.DeepCopy(),
		},
	}, nil
}

// vsphereTemplate is the inventory path a vSphere machine of providerClass is cloned from: the
// ref of the image's Template source for that class. An image the vSphere provider cannot clone
// is refused with ImageSourceUnsupported, naming the field to change.
func vsphereTemplate(image *banlieuev1.VMImage, providerClass string) (string, *refusal) {
	refuse := func(format string, args ...any) (string, *refusal) {
		return "", &refusal{Reason: banlieuev1.ReasonImageSourceUnsupported, Message: fmt.Sprintf(format, args...)}
	}
	i := slices.IndexFunc(image.Spec.Sources, func(s banlieuev1.ImageSource) bool { return s.ProviderClass == providerClass })
	if i < 0 {
		return refuse("VMImage %s has no spec.sources entry for providerClass %s: add one of kind Template whose ref is the template's inventory path",
			image.Name, providerClass)
	}
	src := image.Spec.Sources[i]
	if src.Kind != banlieuev1.SourceTemplate {
		return refuse("VMImage %s: spec.sources[providerClass=%s].kind is %s; the vsphere provider clones a virtual machine template, so the kind must be Template",
			image.Name, providerClass, src.Kind)
	}
	if !strings.HasPrefix(src.Ref, "/") || strings.HasPrefix(src.Ref, "//") {
		return refuse("VMImage %s: spec.sources[providerClass=%s].ref %q is not an inventory path: name the template as /<datacenter>/vm/<folder>/<template>",
			image.Name, providerClass, src.Ref)
	}
	if mode := installMode(image); mode != banlieuev1.InstallImmediate {
		return refuse("VMImage %s: spec.template.installMode is %s; a vSphere machine is a clone of its template, so only immediate is supported",
			image.Name, mode)
	}
	return src.Ref, nil
}

func vsphereView(m *infrav1.VSphereMachine) infraView {
	return infraView{
		Ready:           meta.FindStatusCondition(m.Status.Conditions, banlieuev1.ConditionReady),
		GuestReady:      meta.FindStatusCondition(m.Status.Conditions, banlieuev1.ConditionGuestReady),
		Initialization:  m.Status.Initialization,
		Addresses:       m.Status.Addresses,
		PowerState:      m.Status.ObservedPowerState,
		LastRestartTime: m.Status.LastRestartTime,
	}
}
