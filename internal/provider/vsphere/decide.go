package vsphere

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// Refusal is a machine the provider will not realise as it stands: Reason is the Ready
// condition's reason, Message names the field. Nothing in vCenter is called for it.
type Refusal struct {
	Reason, Message string
}

func (r *Refusal) Error() string { return r.Message }

// machineSpec is what Backend.Ensure gets for m: m cloned into its failure domain, found by
// name among fds (the provider's own inventory, never the machine's word for where it goes),
// with userData as guestinfo.userdata. Everything m names must be reachable there.
func machineSpec(m *infrav1.VSphereMachine, fds []FailureDomain, userData []byte) (MachineSpec, *Refusal) {
	refuse := func(reason, format string, args ...any) (MachineSpec, *Refusal) {
		return MachineSpec{}, &Refusal{Reason: reason, Message: fmt.Sprintf(format, args...)}
	}
	s := &m.Spec
	if s.VMName == "" {
		return refuse(infrav1.ReasonUnsupportedSpec, "spec.vmName is unset: banlieue-controller names each machine's virtual machine; a machine without one is not served yet")
	}
	i := slices.IndexFunc(fds, func(fd FailureDomain) bool { return fd.Name == s.FailureDomain })
	if i < 0 {
		return refuse(infrav1.ReasonFailureDomainUnknown, "spec.failureDomain %q is none of the failure domains of the Provider's inventory", s.FailureDomain)
	}
	fd := fds[i]
	disks := make([]int64, 0, len(s.Disks))
	for j, d := range s.Disks {
		if !slices.Contains(fd.Datastores, d.Datastore) {
			return refuse(infrav1.ReasonNotPermitted, "spec.disks[%d].datastore %q is not reachable in failure domain %s", j, d.Datastore, fd.Name)
		}
		if d.Datastore != s.Disks[0].Datastore {
			return refuse(infrav1.ReasonUnsupportedSpec, "spec.disks[%d].datastore is %q, but every disk of a vSphere machine is on the first disk's datastore (%q) for now",
				j, d.Datastore, s.Disks[0].Datastore)
		}
		disks = append(disks, int64(d.SizeGiB))
	}
	if len(disks) == 0 {
		return refuse(infrav1.ReasonUnsupportedSpec, "spec.disks is empty")
	}
	networks := make([]string, 0, len(s.Network))
	for j, n := range s.Network {
		if !slices.Contains(fd.Networks, n.PortGroup) {
			return refuse(infrav1.ReasonNotPermitted, "spec.network[%d].portGroup %q is not reachable in failure domain %s", j, n.PortGroup, fd.Name)
		}
		networks = append(networks, n.PortGroup)
	}
	if s.TPMEnabled && !fd.VTPM {
		return refuse(banlieuev1.ReasonTpmUnsupported, "spec.tpmEnabled: failure domain %s has no key provider for a virtual TPM", fd.Name)
	}
	// The instance ID is the machine's UID, so a machine recreated under the same name is a new
	// instance to cloud-init.
	meta, err := json.Marshal(map[string]string{"instance-id": string(m.UID), "local-hostname": s.VMName})
	if err != nil {
		return refuse(infrav1.ReasonUnsupportedSpec, "encoding guestinfo.metadata: %v", err)
	}
	return MachineSpec{
		Name: s.VMName, OwnerUID: string(m.UID), OwnerRef: m.Namespace + "/" + m.Name,
		Datacenter: fd.Datacenter, Folder: fd.Folder, ResourcePool: fd.ResourcePool,
		Datastore: s.Disks[0].Datastore, Template: s.Template,
		CPUs: s.CPUs, MemoryMiB: int64(s.MemoryMiB), DiskGiB: disks, Networks: networks,
		MetadataB64: base64.StdEncoding.EncodeToString(meta),
		UserDataB64: base64.StdEncoding.EncodeToString(userData),
		VTPM:        s.TPMEnabled,
	}, nil
}

// powerAction is what one pass does about a machine's power.
type powerAction string

const (
	powerNone powerAction = "None"
	// powerOn powers the virtual machine on.
	powerOn powerAction = "PowerOn"
	// powerShutdown asks the guest to shut down through VMware Tools and records when.
	powerShutdown powerAction = "Shutdown"
	// powerOff powers the virtual machine off at once.
	powerOff powerAction = "PowerOff"
	// powerWait waits for a guest shutdown already asked for.
	powerWait powerAction = "Wait"
	// powerNoTools cannot ask the guest: Soft needs VMware Tools, which are not running.
	powerNoTools powerAction = "NoTools"
	// powerUnsupported: the desired state is one the Backend cannot reach (Suspended).
	powerUnsupported powerAction = "Unsupported"
)

// decidePower is the power step of a pass over a machine whose virtual machine is vm
// (spec.powerOffMode semantics as for libvirt, docs/guides/vsphere-provider.md, "4. Run a VM"):
// TrySoft asks the guest through Tools and powers off once timeout has passed since
// requestedAt (at once when Tools are not running), Soft only asks, Hard powers off at once.
func decidePower(desired banlieuev1.PowerState, mode banlieuev1.PowerOffMode, timeout time.Duration,
	requestedAt *time.Time, vm Machine, now time.Time) powerAction {
	switch desired {
	case banlieuev1.Suspended:
		if vm.PowerState == PowerStateSuspended {
			return powerNone
		}
		return powerUnsupported
	case banlieuev1.PoweredOff:
	default:
		if vm.PowerState == PowerStateOn {
			return powerNone
		}
		return powerOn
	}
	if vm.PowerState != PowerStateOn {
		return powerNone
	}
	switch mode {
	case banlieuev1.PowerOffHard:
		return powerOff
	case banlieuev1.PowerOffSoft:
		switch {
		case requestedAt != nil:
			return powerWait
		case vm.ToolsRunning:
			return powerShutdown
		default:
			return powerNoTools
		}
	default: // TrySoft
		switch {
		case requestedAt != nil && now.Sub(*requestedAt) >= timeout:
			return powerOff
		case requestedAt != nil:
			return powerWait
		case vm.ToolsRunning:
			return powerShutdown
		default:
			return powerOff
		}
	}
}
