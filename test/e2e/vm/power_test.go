package vm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/pkg/libvirt"
)

// TestPowerOnLab drives the power of real guests (hack/test-guest-image.sh) through their
// VirtualMachines: a Soft power-off the guest sees as its ACPI power button (libvirt says the
// domain shut off for reason shutdown, not destroyed), TrySoft falling back to destroy for a
// guest that ignores ACPI, suspend and resume, and restarts the guest sees (a new
// BANLIEUE-BOOT on its console), each with its condition and event (docs/adr/0118).
func TestPowerOnLab(t *testing.T) {
	ctx, s := newSuite(t)
	ex := loadExample17(t)
	img := ex.image
	img.Spec.Sources = []banlieuev1.ImageSource{{ProviderClass: "libvirt", Kind: banlieuev1.SourceBackingFile, Ref: "/images/" + s.diskVol}}
	class := ex.class
	class.Name, class.Spec.Firmware = "small-bios", banlieuev1.FirmwareBIOS
	class.Spec.Hardware.CPUs, class.Spec.Hardware.MemoryMiB = 1, 256
	class.Spec.Network.Interfaces = nil // NIC-less: no bridge with DHCP on this machine
	ignoring := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "ignore-acpi"},
		Data: map[string]string{"user-data": "#cloud-config\n# banlieue-ignore-acpi\n"}}
	for _, obj := range []client.Object{img, class, ignoring} {
		if err := s.env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	soft := vmLike(ex.vm, "soft-01", class.Name, img.Name)
	soft.Namespace, soft.Spec.UserData = s.ns, nil
	soft.Spec.PowerOffMode = banlieuev1.PowerOffSoft
	stubborn := vmLike(soft, "stubborn-01", class.Name, img.Name)
	stubborn.Spec.PowerOffMode = banlieuev1.PowerOffTrySoft
	stubborn.Spec.PowerOffTimeout = &metav1.Duration{Duration: 10 * time.Second}
	stubborn.Spec.UserData = &banlieuev1.UserDataSource{ConfigMapRef: &banlieuev1.KeySelector{Name: ignoring.Name}}
	for _, vm := range []*banlieuev1.VirtualMachine{soft, stubborn} {
		if err := s.env.Client.Create(ctx, vm); err != nil {
			t.Fatal(err)
		}
	}
	for _, vm := range []*banlieuev1.VirtualMachine{soft, stubborn} {
		s.waitVMReady(ctx, t, vm)
	}
	s.waitConsole(t, soft, "BANLIEUE-ACPI acpid", 1)
	s.waitConsole(t, stubborn, "BANLIEUE-ACPI ignored", 1)

	t.Run("Suspended suspends the domain, PoweredOn resumes it", func(t *testing.T) {
		s.setPower(ctx, t, soft, func(vm *banlieuev1.VirtualMachine) { vm.Spec.DesiredPowerState = banlieuev1.Suspended })
		s.waitDomain(ctx, t, soft, libvirt.DomainPaused, -1, 60*time.Second)
		s.waitMachineReason(ctx, t, soft, infrav1.ReasonDomainSuspended, 30*time.Second)
		s.waitVMPower(ctx, t, soft, banlieuev1.Suspended)
		s.setPower(ctx, t, soft, func(vm *banlieuev1.VirtualMachine) { vm.Spec.DesiredPowerState = banlieuev1.PoweredOn })
		s.waitDomain(ctx, t, soft, libvirt.DomainRunning, -1, 60*time.Second)
		s.waitVMPower(ctx, t, soft, banlieuev1.PoweredOn)
		s.waitEvent(ctx, t, soft, corev1.EventTypeNormal, infrav1.ReasonDomainSuspended)
		s.waitEvent(ctx, t, soft, corev1.EventTypeNormal, banlieuev1.ReasonDomainResumed)
		if boots := s.boots(t, soft); boots != 1 {
			t.Errorf("a resume must not reboot the guest: %d boots on its console", boots)
		}
	})

	t.Run("nextRestartTime reboots the guest through ACPI (Soft)", func(t *testing.T) {
		at := metav1.NewTime(time.Now().Truncate(time.Second))
		s.setPower(ctx, t, soft, func(vm *banlieuev1.VirtualMachine) { vm.Spec.NextRestartTime = &at })
		start := time.Now()
		s.waitConsole(t, soft, "BANLIEUE-BOOT", 2)
		// The first boot ended in the guest's own answer to the power button.
		s.waitConsole(t, soft, "BANLIEUE-ACPI-POWEROFF", 1)
		t.Logf("ACPI reboot seen on the console after %s", time.Since(start).Round(time.Millisecond))
		testenv.Eventually(t, 30*time.Second, "VM status.lastRestartTime", func() error {
			vm := s.getVM(ctx, t, soft)
			return testenv.Unmet(vm.Status.LastRestartTime != nil && vm.Status.LastRestartTime.Equal(&at), fmt.Sprintf("%v", vm.Status.LastRestartTime))
		})
		s.waitEvent(ctx, t, soft, corev1.EventTypeNormal, banlieuev1.ReasonDomainRestarted)
		time.Sleep(5 * time.Second) // more passes: a served request is never served again
		if boots := s.boots(t, soft); boots != 2 {
			t.Errorf("one request, %d boots", boots)
		}
	})

	t.Run("Soft: the guest shuts down on the ACPI button; libvirt says shutdown, not destroyed", func(t *testing.T) {
		s.waitConsole(t, soft, "BANLIEUE-ACPI acpid", 2) // the rebooted guest listens again
		s.setPower(ctx, t, soft, func(vm *banlieuev1.VirtualMachine) { vm.Spec.DesiredPowerState = banlieuev1.PoweredOff })
		start := time.Now()
		s.waitDomain(ctx, t, soft, libvirt.DomainShutOff, libvirt.DomainShutoffShutdown, 90*time.Second)
		s.waitConsole(t, soft, "BANLIEUE-ACPI-POWEROFF", 2) // the guest saw the button
		t.Logf("Soft power-off took %s", time.Since(start).Round(time.Millisecond))
		s.waitEvent(ctx, t, soft, corev1.EventTypeNormal, infrav1.ReasonShuttingDown)
		s.waitEvent(ctx, t, soft, corev1.EventTypeNormal, banlieuev1.ReasonDomainStopped)
		s.waitMachineReason(ctx, t, soft, infrav1.ReasonDomainNotRunning, 30*time.Second)
		m := s.machine(ctx, t, soft)
		if m.Status.PowerOffRequestedAt != nil {
			t.Errorf("status.powerOffRequestedAt = %v after the domain went off, want it cleared", m.Status.PowerOffRequestedAt)
		}
		if n := len(s.events(ctx, t, soft, infrav1.ReasonShutdownTimedOut)); n != 0 {
			t.Errorf("%d ShutdownTimedOut events for a guest that shut down", n)
		}
	})

	t.Run("TrySoft: a guest that ignores ACPI is destroyed after powerOffTimeout", func(t *testing.T) {
		s.setPower(ctx, t, stubborn, func(vm *banlieuev1.VirtualMachine) { vm.Spec.DesiredPowerState = banlieuev1.PoweredOff })
		start := time.Now()
		s.waitMachineReason(ctx, t, stubborn, infrav1.ReasonShuttingDown, 30*time.Second)
		if m := s.machine(ctx, t, stubborn); m.Status.PowerOffRequestedAt == nil {
			t.Error("status.powerOffRequestedAt is not recorded while shutting down")
		}
		s.waitDomain(ctx, t, stubborn, libvirt.DomainShutOff, libvirt.DomainShutoffDestroyed, 60*time.Second)
		took := time.Since(start)
		if strings.Contains(s.consoleLog(stubborn), "BANLIEUE-ACPI-POWEROFF") {
			t.Error("the guest that ignores ACPI answered the power button")
		}
		t.Logf("TrySoft with a 10s timeout destroyed the ACPI-ignoring guest after %s", took.Round(time.Millisecond))
		if took < 9*time.Second {
			t.Errorf("destroyed after %s, before the 10s timeout", took)
		}
		s.waitMachineReason(ctx, t, stubborn, infrav1.ReasonShutdownTimedOut, 30*time.Second)
		s.waitEvent(ctx, t, stubborn, corev1.EventTypeNormal, infrav1.ReasonShuttingDown)
		s.waitEvent(ctx, t, stubborn, corev1.EventTypeWarning, infrav1.ReasonShutdownTimedOut)
		testenv.Eventually(t, 30*time.Second, "VM InfrastructureReady says ShutdownTimedOut", func() error {
			vm := s.getVM(ctx, t, stubborn)
			c := meta.FindStatusCondition(vm.Status.Conditions, banlieuev1.ConditionInfrastructureReady)
			return testenv.Unmet(c != nil && c.Reason == infrav1.ReasonShutdownTimedOut && vm.Status.ObservedPowerState == banlieuev1.PoweredOff,
				fmt.Sprintf("%+v, power %s", c, vm.Status.ObservedPowerState))
		})
	})

	t.Run("Hard: nextRestartTime destroys and starts the domain", func(t *testing.T) {
		s.setPower(ctx, t, stubborn, func(vm *banlieuev1.VirtualMachine) { vm.Spec.DesiredPowerState = banlieuev1.PoweredOn })
		s.waitDomain(ctx, t, stubborn, libvirt.DomainRunning, -1, 60*time.Second)
		s.waitConsole(t, stubborn, "BANLIEUE-ACPI ignored", 2)
		before := s.domainID(ctx, t, stubborn)
		at := metav1.NewTime(time.Now().Truncate(time.Second))
		s.setPower(ctx, t, stubborn, func(vm *banlieuev1.VirtualMachine) {
			vm.Spec.PowerOffMode, vm.Spec.NextRestartTime = banlieuev1.PowerOffHard, &at
		})
		s.waitConsole(t, stubborn, "BANLIEUE-BOOT", 3)
		if after := s.domainID(ctx, t, stubborn); after == before {
			t.Errorf("domain id %d before and after a Hard restart: not started again", after)
		}
		s.waitEvent(ctx, t, stubborn, corev1.EventTypeNormal, banlieuev1.ReasonDomainRestarted)
	})

	for _, vm := range []*banlieuev1.VirtualMachine{soft, stubborn} {
		_ = s.env.Client.Delete(ctx, vm)
	}
	for _, vm := range []*banlieuev1.VirtualMachine{soft, stubborn} {
		s.waitVMGone(ctx, t, vm)
	}
}

func (s *suite) getVM(ctx context.Context, t *testing.T, vm *banlieuev1.VirtualMachine) *banlieuev1.VirtualMachine {
	t.Helper()
	var got banlieuev1.VirtualMachine
	if err := s.env.Client.Get(ctx, client.ObjectKeyFromObject(vm), &got); err != nil {
		t.Fatal(err)
	}
	return &got
}

// setPower changes the VM's spec as a user would.
func (s *suite) setPower(ctx context.Context, t *testing.T, vm *banlieuev1.VirtualMachine, change func(*banlieuev1.VirtualMachine)) {
	t.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var got banlieuev1.VirtualMachine
		if err := s.env.Client.Get(ctx, client.ObjectKeyFromObject(vm), &got); err != nil {
			return err
		}
		change(&got)
		return s.env.Client.Update(ctx, &got)
	}); err != nil {
		t.Fatal(err)
	}
}

// waitDomain waits for the VM's domain to be in state, for reason unless it is negative.
func (s *suite) waitDomain(ctx context.Context, t *testing.T, vm *banlieuev1.VirtualMachine, state libvirt.DomainState,
	reason libvirt.DomainStateReason, timeout time.Duration) {
	t.Helper()
	testenv.Eventually(t, timeout, fmt.Sprintf("domain of %s %s (reason %d)", vm.Name, state, reason), func() error {
		dom, err := s.host.DomainLookupByName(ctx, s.ns+"-"+vm.Name)
		if err != nil {
			return testenv.Unmet(false, err.Error())
		}
		got, why, err := s.host.DomainState(ctx, dom)
		if err != nil {
			return testenv.Unmet(false, err.Error())
		}
		return testenv.Unmet(got == state && (reason < 0 || why == reason), fmt.Sprintf("%s reason %d", got, why))
	})
}

func (s *suite) domainID(ctx context.Context, t *testing.T, vm *banlieuev1.VirtualMachine) int32 {
	t.Helper()
	dom, err := s.host.DomainLookupByName(ctx, s.ns+"-"+vm.Name)
	if err != nil {
		t.Fatal(err)
	}
	return dom.ID
}

func (s *suite) waitMachineReason(ctx context.Context, t *testing.T, vm *banlieuev1.VirtualMachine, reason string, timeout time.Duration) {
	t.Helper()
	testenv.Eventually(t, timeout, "LibvirtMachine "+vm.Name+" Ready reason "+reason, func() error {
		var m infrav1.LibvirtMachine
		if err := s.env.Client.Get(ctx, client.ObjectKeyFromObject(vm), &m); err != nil {
			return testenv.Unmet(false, err.Error())
		}
		c := meta.FindStatusCondition(m.Status.Conditions, banlieuev1.ConditionReady)
		return testenv.Unmet(c != nil && c.Reason == reason, fmt.Sprintf("%+v", c))
	})
}

func (s *suite) waitVMPower(ctx context.Context, t *testing.T, vm *banlieuev1.VirtualMachine, want banlieuev1.PowerState) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "VM "+vm.Name+" observedPowerState "+string(want), func() error {
		got := s.getVM(ctx, t, vm).Status.ObservedPowerState
		return testenv.Unmet(got == want, string(got))
	})
}

// events lists the events about the VM's LibvirtMachine (of the VM's name) with reason.
func (s *suite) events(ctx context.Context, t *testing.T, vm *banlieuev1.VirtualMachine, reason string) []eventsv1.Event {
	t.Helper()
	var list eventsv1.EventList
	if err := s.env.Client.List(ctx, &list, client.InNamespace(s.ns)); err != nil {
		t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Kind == "LibvirtMachine" && e.Regarding.Name == vm.Name && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

func (s *suite) waitEvent(ctx context.Context, t *testing.T, vm *banlieuev1.VirtualMachine, typ, reason string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, typ+" event "+reason+" on LibvirtMachine "+vm.Name, func() error {
		evs := s.events(ctx, t, vm, reason)
		return testenv.Unmet(len(evs) > 0 && evs[0].Type == typ, fmt.Sprintf("%d events", len(evs)))
	})
}

func (s *suite) consoleLog(vm *banlieuev1.VirtualMachine) string {
	data, _ := os.ReadFile(filepath.Join(s.lab.Dir, "state", "log", "qemu", s.ns+"-"+vm.Name+"-serial.log"))
	return strings.ReplaceAll(string(data), "\r", "")
}

// boots counts the guest's boots on its console log, which libvirt appends to across boots.
func (s *suite) boots(t *testing.T, vm *banlieuev1.VirtualMachine) int {
	t.Helper()
	return strings.Count(s.consoleLog(vm), "BANLIEUE-BOOT\n")
}

// waitConsole waits until line has appeared at least n times on the VM's console log; a
// report line counts once per boot (the report repeats every 2 s).
func (s *suite) waitConsole(t *testing.T, vm *banlieuev1.VirtualMachine, line string, n int) {
	t.Helper()
	testenv.Eventually(t, 120*time.Second, fmt.Sprintf("%q seen in %d boot(s) of %s", line, n, vm.Name), func() error {
		seen := 0
		for _, boot := range strings.Split(s.consoleLog(vm), "BANLIEUE-BOOT\n")[1:] {
			if strings.Contains(boot, line+"\n") || line == "BANLIEUE-BOOT" {
				seen++
			}
		}
		return testenv.Unmet(seen >= n, fmt.Sprintf("%d; console tail:\n%s", seen, tail(s.consoleLog(vm), 600)))
	})
}
