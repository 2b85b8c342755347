package libvirt

import (
	"cmp"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/pkg/libvirt"
)

// succeededStatus is the machine's status after a converge pass (docs/guides/libvirt-provider.md, "7. Run a VM"). It starts
// from the existing status so sticky fields and other conditions survive.
func succeededStatus(m *infrav1.LibvirtMachine, obs observation) infrav1.LibvirtMachineStatus {
	st := *m.Status.DeepCopy()
	st.Initialization = &banlieuev1.InitializationStatus{Provisioned: ptr.To(provisioned(m, obs.state))}
	st.DomainUUID = obs.domain.UUID.String()
	st.ObservedPowerState = powerState(obs.state)
	st.Addresses = nil
	for _, a := range obs.addresses {
		if usableAddress(a.Addr) && len(st.Addresses) < banlieuev1.MaxMachineAddresses {
			st.Addresses = append(st.Addresses, banlieuev1.MachineAddress{Type: banlieuev1.MachineInternalIP, Address: a.Addr})
		}
	}
	st.AddressSource = obs.addressSource
	st.FailureDomain = m.Spec.FailureDomain
	st.TPMAttached = nil
	if m.Spec.TPMEnabled {
		st.TPMAttached = ptr.To(true)
	}
	installed := ptrTrue(st.GuestInstalled) || obs.phase == installed
	st.GuestInstalled = ptr.To(installed)
	st.InstallMediaDetached = nil
	if m.Spec.BootSource.Kind == infrav1.BootInstallMedia {
		st.InstallMediaDetached = ptr.To(ptrTrue(m.Status.InstallMediaDetached) || obs.mediaDetached)
	}
	st.ObservedGeneration = m.Generation
	st.DiskSizes = obs.grow.sizes
	if obs.grow.refusal != "" {
		setMachineCondition(&st, m, infrav1.ConditionDisksGrown, metav1.ConditionFalse, infrav1.ReasonDiskGrowUnsupported, obs.grow.refusal)
	} else {
		meta.RemoveStatusCondition(&st.Conditions, infrav1.ConditionDisksGrown)
	}

	st.PowerOffRequestedAt = obs.power.requestedAt()
	if obs.power.plan.servesRestart {
		st.LastRestartTime = m.Spec.NextRestartTime.DeepCopy()
	}
	reason, msg := readyOf(m, obs)
	status := metav1.ConditionFalse
	if reason == infrav1.ReasonDomainRunning {
		status = metav1.ConditionTrue
	}
	setMachineCondition(&st, m, banlieuev1.ConditionReady, status, reason, msg)
	// GuestReady is absent while no agent answers: the provider cannot tell, and pools wait for
	// a signal rather than reading silence as failure.
	switch {
	case installed && m.Spec.BootSource.Kind == infrav1.BootInstallMedia && !ptrTrue(st.InstallMediaDetached):
		setMachineCondition(&st, m, banlieuev1.ConditionGuestReady, metav1.ConditionFalse, infrav1.ReasonInstallMediaAttached,
			"the installed guest announced itself; ejecting the install media")
	case installed:
		setMachineCondition(&st, m, banlieuev1.ConditionGuestReady, metav1.ConditionTrue, infrav1.ReasonGuestAnnounced,
			"the installed guest announced itself through the guest agent")
	case obs.phase == notAnnounced:
		setMachineCondition(&st, m, banlieuev1.ConditionGuestReady, metav1.ConditionFalse, infrav1.ReasonGuestNotAnnounced,
			"the guest agent answers but "+phaseFile+" does not say installed")
	}
	return st
}

// readyOf is the reason and message of Ready after a converge pass: a power-off under way or
// forced, a suspended domain, and otherwise whether the domain runs. ShutdownTimedOut stays
// while the forced-off domain stays off, so the power cut is not taken for a clean shutdown.
func readyOf(m *infrav1.LibvirtMachine, obs observation) (string, string) {
	p := obs.power
	prev := meta.FindStatusCondition(m.Status.Conditions, banlieuev1.ConditionReady)
	off := !isRunning(obs.state)
	switch {
	case p.plan.action == powerForce || off && m.Spec.DesiredPowerState == banlieuev1.PoweredOff &&
		prev != nil && prev.Reason == infrav1.ReasonShutdownTimedOut:
		msg := "the guest did not shut down within spec.powerOffTimeout of the shutdown request; the domain was destroyed"
		if prev != nil && prev.Reason == infrav1.ReasonShutdownTimedOut && p.plan.action != powerForce {
			msg = prev.Message
		} else if !p.inputs.requestedAt.IsZero() {
			msg = fmt.Sprintf("the guest did not shut down within spec.powerOffTimeout (%s) of the shutdown request at %s; the domain was destroyed",
				p.inputs.timeout, p.inputs.requestedAt.UTC().Format(time.RFC3339))
		}
		return infrav1.ReasonShutdownTimedOut, msg
	case !off && !p.plan.requestedAt.IsZero():
		// Only the pass that asked knows the path (agent or button): the passes waiting after it
		// read it back from the message that pass wrote.
		asked := p.asked
		if p.plan.action != powerShutdown && prev != nil && prev.Reason == infrav1.ReasonShuttingDown {
			asked = askedIn(prev.Message)
		}
		at := p.plan.requestedAt.UTC().Format(time.RFC3339)
		if m.Spec.PowerOffMode == banlieuev1.PowerOffSoft {
			return infrav1.ReasonShuttingDown, fmt.Sprintf("%s at %s (spec.powerOffMode Soft); waiting for the guest to shut down", asked.requested(), at)
		}
		return infrav1.ReasonShuttingDown, fmt.Sprintf("%s at %s (spec.powerOffMode TrySoft); the domain is destroyed at %s if the guest has not shut down",
			asked.requested(), at, p.plan.requestedAt.Add(p.inputs.timeout).UTC().Format(time.RFC3339))
	case m.Spec.DesiredPowerState == banlieuev1.Suspended && powerState(obs.state) == banlieuev1.Suspended:
		return infrav1.ReasonDomainSuspended, "domain is suspended, as spec.desiredPowerState asks"
	case !off:
		msg := "domain is defined and running"
		if obs.domainType == "qemu" {
			msg += " (emulated: the host offers no KVM, so the guest runs under software emulation)"
		}
		return infrav1.ReasonDomainRunning, msg
	}
	if offAsAsked(m) {
		return infrav1.ReasonDomainNotRunning, fmt.Sprintf("domain is defined and off (%s), as spec.desiredPowerState %s asks", obs.state, m.Spec.DesiredPowerState)
	}
	return infrav1.ReasonDomainNotRunning, "domain is defined but " + obs.state.String()
}

// provisioned is status.initialization.provisioned after a converge pass: the domain is
// defined with its disks and in a power state its spec accepts, running (or suspended) or off
// when asked to be off. A VM created powered off is provisioned as soon as it is defined
// (docs/adr/0147-phases-of-a-vm-as-its-spec-asks.md).
func provisioned(m *infrav1.LibvirtMachine, state libvirt.DomainState) bool {
	return isRunning(state) || offAsAsked(m)
}

// offAsAsked says the spec accepts a domain that is off: PoweredOff, or Suspended, which never
// starts a domain that is off only to pause it.
func offAsAsked(m *infrav1.LibvirtMachine) bool {
	return m.Spec.DesiredPowerState == banlieuev1.PoweredOff || m.Spec.DesiredPowerState == banlieuev1.Suspended
}

// failedStatus keeps every observed field and reports the error on Ready: a name conflict, or a
// name the Provider does not grant (yet), under its own reason, anything else as
// ReconcileFailed. A refusal changes the condition only: the domain, its UUID and the volumes
// the machine recorded are still the machine's, and teardown needs them.
func failedStatus(m *infrav1.LibvirtMachine, err error) infrav1.LibvirtMachineStatus {
	st := *m.Status.DeepCopy()
	reason := cmp.Or(conflictReason(err), authorityReason(err), capiReason(err), hostReason(err), startLostReason(err),
		infrav1.ReasonReconcileFailed)
	setMachineCondition(&st, m, banlieuev1.ConditionReady, metav1.ConditionFalse, reason, err.Error())
	return st
}

func setMachineCondition(st *infrav1.LibvirtMachineStatus, m *infrav1.LibvirtMachine, typ string,
	status metav1.ConditionStatus, reason, msg string) {
	banlieuev1.SetCondition(&st.Conditions, m.Generation, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg})
}

func powerState(s libvirt.DomainState) banlieuev1.PowerState {
	switch s {
	case libvirt.DomainRunning, libvirt.DomainBlocked, libvirt.DomainShuttingDown:
		return banlieuev1.PoweredOn
	case libvirt.DomainPaused, libvirt.DomainPMSuspended:
		return banlieuev1.Suspended
	}
	return banlieuev1.PoweredOff
}
