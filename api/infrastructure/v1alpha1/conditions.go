package v1alpha1

// A LibvirtMachine carries the condition types of api/v1alpha1 (Ready and GuestReady), which the
// controller mirrors onto the VM (docs/design/roles.md); these are the reasons it adds.

// LibvirtMachine Ready reasons.
const (
	// ReasonDomainRunning: the domain is defined and in the desired power state.
	ReasonDomainRunning = "DomainRunning"
	// ReasonDomainNotRunning: the domain is defined but not in the desired power state yet.
	ReasonDomainNotRunning = "DomainNotRunning"
	// ReasonReconcileFailed: a step against the host failed; the message names the step.
	ReasonReconcileFailed = "ReconcileFailed"
	// ReasonInstallMediaAttached: the install medium is still attached to a deferred install.
	ReasonInstallMediaAttached = "InstallMediaAttached"
	// ReasonDomainNameConflict: a domain of the machine's name exists that this machine did not
	// create (not banlieue's, or another LibvirtMachine's); it is left untouched.
	ReasonDomainNameConflict = "DomainNameConflict"
	// ReasonVolumeNameConflict: a volume the machine would create exists and is not recorded as
	// the machine's own; it is left untouched.
	ReasonVolumeNameConflict = "VolumeNameConflict"
	// ReasonNotPermitted: the machine names a domain, pool, network, bridge or boot volume that
	// its Provider and that Provider's VMImage rows do not grant it; nothing on the host was
	// called.
	ReasonNotPermitted = "NotPermitted"
	// ReasonWaitingForImage: the machine's boot volume is not granted yet, and a VMImage row of
	// its Provider that names it is not ready (an import or a host lookup in progress, or a host
	// outage); nothing on the host was called, and the provider checks again.
	ReasonWaitingForImage = "WaitingForImage"
)

// LibvirtMachine Ready reason of host protection (docs/adr/0133).
const (
	// ReasonHostUnavailable: the last connection attempts to the Provider's host failed, and
	// its circuit breaker holds further ones off for a cool-down; nothing was sent to the host,
	// and the machine is looked at again when the cool-down ends. The message names the
	// Provider, the attempts and the last error.
	ReasonHostUnavailable = "HostUnavailable"
)

// LibvirtMachine Ready reasons of a graceful power-off and of suspension (docs/adr/0118); each
// is also the reason of the event announcing it.
const (
	// ReasonShuttingDown: the provider pressed the domain's ACPI power button (powerOffMode Soft
	// or TrySoft) and waits for the guest to shut down.
	ReasonShuttingDown = "ShuttingDown"
	// ReasonShutdownTimedOut: the guest did not shut down within spec.powerOffTimeout of the
	// button (TrySoft); the domain was destroyed, a power cut.
	ReasonShutdownTimedOut = "ShutdownTimedOut"
	// ReasonDomainSuspended: the domain is suspended (paused), as spec.desiredPowerState asks.
	ReasonDomainSuspended = "DomainSuspended"
)

// LibvirtMachine GuestReady reasons.
const (
	// ReasonGuestAnnounced: the guest phoned home.
	ReasonGuestAnnounced = "GuestAnnounced"
	// ReasonGuestNotAnnounced: the guest has not phoned home yet.
	ReasonGuestNotAnnounced = "GuestNotAnnounced"
)

// FinalizerLibvirtMachine holds a LibvirtMachine until its domain and volumes are gone from the
// host.
const FinalizerLibvirtMachine = "banlieue.io/libvirtmachine"
