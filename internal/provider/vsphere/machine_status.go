package vsphere

import (
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// providerIDPrefix is how the vSphere cloud provider names nodes: vsphere://<bios-uuid>.
const providerIDPrefix = "vsphere://"

// providerIDFor is the machine's spec.providerID for a virtual machine's BIOS UUID, "" when
// vCenter reported none.
func providerIDFor(biosUUID string) string {
	if biosUUID == "" {
		return ""
	}
	return providerIDPrefix + strings.ToLower(biosUUID)
}

// observedPower is vCenter's power state in the API's words.
func observedPower(state string) banlieuev1.PowerState {
	switch state {
	case PowerStateOn:
		return banlieuev1.PoweredOn
	case PowerStateOff:
		return banlieuev1.PoweredOff
	case PowerStateSuspended:
		return banlieuev1.Suspended
	}
	return ""
}

// addresses are the guest's IPs as InternalIP, loopback, link-local and unparsable ones left out.
func addresses(ips []string) []banlieuev1.MachineAddress {
	var out []banlieuev1.MachineAddress
	for _, ip := range ips {
		a, err := netip.ParseAddr(ip)
		if err != nil || a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsUnspecified() || len(out) == 32 {
			continue
		}
		out = append(out, banlieuev1.MachineAddress{Type: banlieuev1.MachineInternalIP, Address: a.String()})
	}
	return out
}

// succeededStatus is the status of a pass that brought vm as far as it goes: Ready says whether
// it is in the desired power state (blocked, when set, is why not), GuestReady whether Tools
// report from the guest.
func succeededStatus(m *infrav1.VSphereMachine, vm Machine, blocked *Refusal) infrav1.VSphereMachineStatus {
	st := *m.Status.DeepCopy()
	desired := m.Spec.DesiredPowerState
	if desired == "" {
		desired = banlieuev1.PoweredOn
	}
	power := observedPower(vm.PowerState)
	tools := vm.ToolsRunning
	st.FailureDomain = m.Spec.FailureDomain
	st.VMRef = vm.Ref
	st.BIOSUUID = strings.ToLower(vm.BIOSUUID)
	if st.Template == "" {
		st.Template = m.Spec.Template
	}
	st.ObservedPowerState = power
	st.ToolsRunning = &tools
	st.Addresses = addresses(vm.IPs)
	st.PowerOffRequestedAt = nil
	st.ObservedGeneration = m.Generation
	inState := power == desired
	st.Initialization = &banlieuev1.InitializationStatus{Provisioned: &inState}
	ready := metav1.Condition{Type: banlieuev1.ConditionReady, Status: metav1.ConditionTrue, Reason: infrav1.ReasonVMRunning,
		Message: "virtual machine " + m.Spec.VMName + " is " + string(power), ObservedGeneration: m.Generation}
	switch {
	case blocked != nil:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, blocked.Reason, blocked.Message
	case !inState:
		ready.Status, ready.Reason = metav1.ConditionFalse, infrav1.ReasonVMNotRunning
		ready.Message = "virtual machine " + m.Spec.VMName + " is " + string(power) + ", spec.desiredPowerState is " + string(desired)
	}
	meta.SetStatusCondition(&st.Conditions, ready)
	guest := metav1.Condition{Type: banlieuev1.ConditionGuestReady, Status: metav1.ConditionTrue, Reason: infrav1.ReasonToolsReporting,
		Message: "VMware Tools run in the guest", ObservedGeneration: m.Generation}
	if !tools {
		guest.Status, guest.Reason, guest.Message = metav1.ConditionFalse, infrav1.ReasonToolsNotReporting, "VMware Tools do not run in the guest"
	}
	meta.SetStatusCondition(&st.Conditions, guest)
	return st
}

// failedStatus is the status of a pass that stopped at reason: Ready False with the message,
// everything observed before left as it was.
func failedStatus(m *infrav1.VSphereMachine, reason, message string) infrav1.VSphereMachineStatus {
	st := *m.Status.DeepCopy()
	st.ObservedGeneration = m.Generation
	if st.Initialization != nil {
		no := false
		st.Initialization = &banlieuev1.InitializationStatus{Provisioned: &no}
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: banlieuev1.ConditionReady, Status: metav1.ConditionFalse,
		Reason: reason, Message: message, ObservedGeneration: m.Generation})
	return st
}
