package controller

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// ErrMissingResolvedImageRef means the image row names no volume to boot from on the chosen
// Provider; the VM reports it as InfraBuildFailed.
var ErrMissingResolvedImageRef = errors.New("MissingResolvedImageRef")

// defaultPowerOffTimeout is spec.powerOffTimeout's default on both kinds (their CRDs say 2m).
const defaultPowerOffTimeout = 2 * time.Minute

var libvirtKind = infraKind{
	GVK:              infrav1.GroupVersion.WithKind("LibvirtMachine"),
	newObject:        func() client.Object { return &infrav1.LibvirtMachine{} },
	newList:          func() client.ObjectList { return &infrav1.LibvirtMachineList{} },
	build:            func(in buildInput) (client.Object, error) { return buildLibvirtMachine(in) },
	view:             func(o client.Object) infraView { return libvirtView(o.(*infrav1.LibvirtMachine)) },
	providerOf:       func(o client.Object) types.NamespacedName { return o.(*infrav1.LibvirtMachine).ProviderKey() },
	userDataSecretOf: func(o client.Object) string { return secretName(o.(*infrav1.LibvirtMachine).Spec.UserDataSecretRef) },
}

// buildLibvirtMachine is the LibvirtMachine of a scheduled VM (docs/guides/libvirt-provider.md, "7. Run a VM"). spec.providerID
// is left empty on purpose: the provider owns it, and an applied empty value would not be sent.
func buildLibvirtMachine(in buildInput) (*infrav1.LibvirtMachine, error) {
	vm, class, d := in.VM, in.Class, in.Decision
	if len(d.ResolvedStorage) == 0 {
		return nil, fmt.Errorf("VMClass %s has no disks, so there is no storage pool to place the machine in", class.Name)
	}
	volume, err := bootVolume(in.Image, d)
	if err != nil {
		return nil, err
	}
	bootKind := infrav1.BootBackingVolume
	if installMode(in.Image) != banlieuev1.InstallImmediate {
		bootKind = infrav1.BootInstallMedia
	}
	// A rebuilt image is imported as a new volume and the row moves to it; an existing machine
	// keeps the volume it was created from. Its overlay backs onto that base, and an installer
	// still attached must not change under a running install.
	if m, ok := in.Existing.(*infrav1.LibvirtMachine); ok && m.Spec.BootSource.Volume != "" {
		volume, bootKind = m.Spec.BootSource.Volume, m.Spec.BootSource.Kind
	}
	firmware := class.Spec.Firmware
	if firmware == "" {
		firmware = banlieuev1.FirmwareEFI
	}
	power, offMode, offTimeout := machinePower(vm)
	if in.HeldOff {
		// An export copies the stopped disk (ADR-0157): the VM stays off until the host's copy
		// exists, its desiredPowerState untouched so the user's wish applies after.
		power = banlieuev1.PoweredOff
	}
	cpus, memory, diskOverrides := machineSize(vm, class)
	nics, err := libvirtNetwork(vm, class, d)
	if err != nil {
		return nil, err
	}
	userDataRef, userDataHash := userDataFields(in)
	return &infrav1.LibvirtMachine{
		ObjectMeta: machineMeta(vm),
		Spec: infrav1.LibvirtMachineSpec{
			FailureDomain:     d.FailureDomain.Name,
			ProviderRef:       &infrav1.ProviderReference{Name: d.Provider.Name, Namespace: d.Provider.Namespace},
			Pool:              d.ResolvedStorage[0].BackendID,
			DomainName:        vm.Namespace + "-" + vm.Name,
			BootSource:        infrav1.BootSource{Kind: bootKind, Volume: volume},
			VCPUs:             cpus,
			MemoryMiB:         memory,
			Firmware:          firmware,
			TPMEnabled:        class.Spec.TPMEnabled,
			ConsoleLog:        class.Spec.ConsoleLog,
			Disks:             libvirtDisks(class.Spec.Hardware.Disks, diskOverrides),
			Network:           nics,
			UserDataSecretRef: userDataRef,
			UserDataHash:      userDataHash,
			DesiredPowerState: power,
			PowerOffMode:      offMode,
			PowerOffTimeout:   offTimeout,
			NextRestartTime:   vm.Spec.NextRestartTime.DeepCopy(),
		},
	}, nil
}

// bootVolume is the volume the chosen Provider holds the image in: the row's resolvedRef, else
// the zone named after the failure domain, else (libvirt names zones after pools) the zone of
// the machine's pool.
func bootVolume(image *banlieuev1.VMImage, d decision) (string, error) {
	row := imageRow(image, d.Provider)
	if row == nil {
		return "", fmt.Errorf("%w: VMImage %s has no status row for Provider %s/%s",
			ErrMissingResolvedImageRef, image.Name, d.Provider.Namespace, d.Provider.Name)
	}
	if row.ResolvedRef != "" {
		return row.ResolvedRef, nil
	}
	for _, zone := range []string{d.FailureDomain.Name, d.ResolvedStorage[0].BackendID} {
		if i := slices.IndexFunc(row.Zones, func(z banlieuev1.ImageZoneStatus) bool { return z.Name == zone }); i >= 0 && row.Zones[i].ResolvedRef != "" {
			return row.Zones[i].ResolvedRef, nil
		}
	}
	return "", fmt.Errorf("%w: VMImage %s has no resolvedRef for Provider %s/%s (neither on its row nor on zone %s or %s)",
		ErrMissingResolvedImageRef, image.Name, d.Provider.Namespace, d.Provider.Name, d.FailureDomain.Name, d.ResolvedStorage[0].BackendID)
}

func libvirtDisks(disks []banlieuev1.ClassDisk, overrides []banlieuev1.DiskOverride) []infrav1.LibvirtDisk {
	out := make([]infrav1.LibvirtDisk, 0, len(disks))
	for _, d := range disks {
		size := d.SizeGiB
		if i := slices.IndexFunc(overrides, func(o banlieuev1.DiskOverride) bool { return o.Name == d.Name }); i >= 0 {
			size = overrides[i].SizeGiB
		}
		out = append(out, infrav1.LibvirtDisk{Name: d.Name, SizeGiB: size, Bus: infrav1.BusVirtio})
	}
	return out
}

// libvirtNetwork zips the class's interfaces with the resolved networks.
func libvirtNetwork(vm *banlieuev1.VirtualMachine, class *banlieuev1.VMClass, d decision) ([]infrav1.LibvirtNetworkInterface, error) {
	nics := class.Spec.Network.Interfaces
	if len(nics) != len(d.ResolvedNetworks) {
		return nil, fmt.Errorf("VMClass %s has %d interface(s) but %d network(s) were resolved", class.Name, len(nics), len(d.ResolvedNetworks))
	}
	out := make([]infrav1.LibvirtNetworkInterface, 0, len(nics))
	for i, nic := range nics {
		mapping := networkMapping(d.Provider, nic.NetworkClass)
		kind := infrav1.SourceNetwork
		if mapping != nil {
			if _, ok := mapping.Target["bridge"]; ok {
				kind = infrav1.SourceBridge
			}
		}
		out = append(out, infrav1.LibvirtNetworkInterface{
			Name:   nic.Name,
			Source: infrav1.NetworkSource{Kind: kind, Name: d.ResolvedNetworks[i].BackendID},
			IPAM:   interfaceIPAM(vm, nic, mapping),
		})
	}
	return out, nil
}

// interfaceIPAM is the override's static address completed field by field from the network
// class's subnet, or the class's pool (DHCP when it has none).
func interfaceIPAM(vm *banlieuev1.VirtualMachine, nic banlieuev1.ClassInterface, mapping *banlieuev1.NetworkClassMapping) banlieuev1.IpamSpec {
	i := slices.IndexFunc(vm.Spec.NetworkOverrides, func(o banlieuev1.NetworkOverride) bool { return o.Name == nic.Name })
	if i < 0 {
		return banlieuev1.IpamSpec{Pool: nic.IPAM.Pool}
	}
	static := *vm.Spec.NetworkOverrides[i].Static.DeepCopy()
	if mapping != nil && mapping.Subnet != nil {
		if static.Gateway == "" {
			static.Gateway = mapping.Subnet.Gateway
		}
		if len(static.Nameservers) == 0 {
			static.Nameservers = slices.Clone(mapping.Subnet.Nameservers)
		}
		if static.Domain == "" {
			static.Domain = mapping.Subnet.Domain
		}
	}
	return banlieuev1.IpamSpec{Static: &static}
}

func libvirtView(m *infrav1.LibvirtMachine) infraView {
	return infraView{
		Ready:           meta.FindStatusCondition(m.Status.Conditions, banlieuev1.ConditionReady),
		GuestReady:      meta.FindStatusCondition(m.Status.Conditions, banlieuev1.ConditionGuestReady),
		DisksGrown:      meta.FindStatusCondition(m.Status.Conditions, banlieuev1.ConditionDisksGrown),
		Initialization:  m.Status.Initialization,
		Addresses:       m.Status.Addresses,
		PowerState:      m.Status.ObservedPowerState,
		LastRestartTime: m.Status.LastRestartTime,
	}
}
