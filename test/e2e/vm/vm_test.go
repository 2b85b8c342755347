package vm

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"libvirt.org/go/libvirtxml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/internal/testenv/labhost"
	"banlieue.io/banlieue/pkg/libvirt"
)

const userData = "#cloud-config\r\nhostname: ${VM_NAME}\nfqdn: ${FQDN}\nwrite_files:\n  - content: \"h\u00e9llo \u4e16\u754c\"\n# no final newline"

func TestVirtualMachinesOnLab(t *testing.T) {
	ctx, s := newSuite(t)
	ex := loadExample17(t)

	// The example's objects, pointed at this lab: the image is the tiny guest already in the
	// pool (a BackingFile source), the class is small enough for TCG.
	img := ex.image
	img.Spec.Sources = []banlieuev1.ImageSource{{ProviderClass: "libvirt", Kind: banlieuev1.SourceBackingFile, Ref: "/images/" + s.diskVol}}
	installer := img.DeepCopy()
	installer.Name = "tiny-linux-installer"
	installer.Spec.Sources[0].Ref = s.isoVol
	installer.Spec.Template = &banlieuev1.VMImageTemplate{InstallMode: banlieuev1.InstallDeferred}
	small := ex.class
	small.Spec.Hardware.CPUs, small.Spec.Hardware.MemoryMiB = 1, 256
	// NIC-less: a started libvirt network would put a bridge with DHCP on this machine.
	small.Spec.Network.Interfaces = nil
	smallBIOS := small.DeepCopy()
	smallBIOS.Name, smallBIOS.Spec.Firmware = "small-bios", banlieuev1.FirmwareBIOS
	sealed := small.DeepCopy()
	sealed.Name, sealed.Spec.TPMEnabled = "sealed", true
	ex.userData.Namespace = s.ns
	ex.userData.Data["user-data"] = userData
	for _, obj := range []client.Object{img, installer, small, smallBIOS, sealed, ex.userData} {
		if err := s.env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}

	web := ex.vm
	web.Namespace = s.ns
	bios := vmLike(web, "bios-01", smallBIOS.Name, img.Name)
	tpm := vmLike(web, "sealed-01", sealed.Name, installer.Name)
	start := time.Now()
	readyBefore, _ := testenv.RegistrySample(t, "banlieue_vm_time_to_ready_seconds", map[string]string{})
	for _, vm := range []*banlieuev1.VirtualMachine{web, bios, tpm} {
		if err := s.env.Client.Create(ctx, vm); err != nil {
			t.Fatal(err)
		}
	}
	for _, vm := range []*banlieuev1.VirtualMachine{web, bios, tpm} {
		s.waitVMReady(ctx, t, vm)
	}
	t.Logf("3 VirtualMachines Ready in %s", time.Since(start).Round(time.Millisecond))
	// The controller that wrote each Ready records its time to Ready just after the write, once
	// per VM, however many passes see it Ready since.
	testenv.Eventually(t, 5*time.Second, "3 VMs in banlieue_vm_time_to_ready_seconds", func() error {
		got, _ := testenv.RegistrySample(t, "banlieue_vm_time_to_ready_seconds", map[string]string{})
		return testenv.Unmet(got-readyBefore == 3, fmt.Sprintf("%v recorded", got-readyBefore))
	})

	t.Run("efi backingVolume from examples/17", func(t *testing.T) {
		s.checkMachine(ctx, t, web, img, checks{firmware: "efi", tpm: "none", shape: infrav1.BootBackingVolume})
	})
	t.Run("bios backingVolume", func(t *testing.T) {
		s.checkMachine(ctx, t, bios, img, checks{firmware: "bios", tpm: "none", shape: infrav1.BootBackingVolume})
	})
	t.Run("efi with vTPM, installMedia", func(t *testing.T) {
		s.checkMachine(ctx, t, tpm, installer, checks{firmware: "efi", tpm: "2", shape: infrav1.BootInstallMedia})
	})
	t.Run("deletion removes domain, volumes, NVRAM and swtpm state", func(t *testing.T) {
		s.checkDeletion(ctx, t, tpm, false)
	})
	t.Run("deletion blocks while libvirtd is down, then completes", func(t *testing.T) {
		s.checkDeletion(ctx, t, web, true)
	})
	t.Run("crash safety", func(t *testing.T) { s.checkCrashSafety(ctx, t, smallBIOS.Name, img.Name) })
	t.Run("a pool of 3 on real domains, a claim, and its release", func(t *testing.T) {
		s.checkPool(ctx, t, smallBIOS.Name, img.Name)
	})
	_ = s.env.Client.Delete(ctx, bios)
	s.waitVMGone(ctx, t, bios)
}

func vmLike(base *banlieuev1.VirtualMachine, name, class, image string) *banlieuev1.VirtualMachine {
	vm := base.DeepCopy()
	vm.Name = name
	vm.Spec.ClassRef.Name = class
	vm.Spec.ImageRef.Name = image
	return vm
}

func (s *suite) waitVMReady(ctx context.Context, t *testing.T, vm *banlieuev1.VirtualMachine) {
	t.Helper()
	testenv.Eventually(t, 90*time.Second, "VirtualMachine "+vm.Name+" Ready", func() error {
		var got banlieuev1.VirtualMachine
		if err := s.env.Client.Get(ctx, client.ObjectKeyFromObject(vm), &got); err != nil {
			return testenv.Unmet(false, err.Error())
		}
		c := meta.FindStatusCondition(got.Status.Conditions, banlieuev1.ConditionReady)
		return testenv.Unmet(c != nil && c.Status == metav1.ConditionTrue, fmt.Sprintf("%+v", got.Status.Conditions))
	})
}

func (s *suite) machine(ctx context.Context, t *testing.T, vm *banlieuev1.VirtualMachine) *infrav1.LibvirtMachine {
	t.Helper()
	var m infrav1.LibvirtMachine
	if err := s.env.Client.Get(ctx, client.ObjectKeyFromObject(vm), &m); err != nil {
		t.Fatal(err)
	}
	return &m
}

type checks struct {
	firmware, tpm string
	shape         infrav1.BootSourceKind
}

func (s *suite) checkMachine(ctx context.Context, t *testing.T, vm *banlieuev1.VirtualMachine, img *banlieuev1.VMImage, want checks) {
	m := s.machine(ctx, t, vm)
	domName := s.ns + "-" + vm.Name
	if m.Spec.DomainName != domName || m.Spec.BootSource.Kind != want.shape || m.Spec.Pool != s.pool {
		t.Errorf("LibvirtMachine spec: %+v", m.Spec)
	}
	dom, err := s.host.DomainLookupByName(ctx, domName)
	if err != nil {
		t.Fatalf("domain %s: %v", domName, err)
	}
	if m.Status.DomainUUID != dom.UUID.String() {
		t.Errorf("status.domainUuid %q, domain %s", m.Status.DomainUUID, dom.UUID)
	}
	// The persistent definition: once started, libvirt replaces firmware='efi' in the live
	// XML with the loader it chose.
	xml, err := s.host.DomainXMLDesc(ctx, dom, libvirt.DomainXMLInactive)
	if err != nil {
		t.Fatal(err)
	}
	var def libvirtxml.Domain
	if err := def.Unmarshal(xml); err != nil {
		t.Fatal(err)
	}
	s.checkDomainXML(t, &def, domName, want)

	// vol-list: the machine's volumes and the shared images, nothing else of this domain.
	var mine []string
	for _, v := range s.volumes(ctx, t) {
		if strings.HasPrefix(v, domName+"-") {
			mine = append(mine, v)
		}
	}
	if got, w := strings.Join(mine, ","), domName+"-cidata.iso,"+domName+"-os.qcow2"; got != w {
		t.Errorf("volumes of %s: %s, want %s", domName, got, w)
	}

	// The guest: what it printed on its serial console.
	rep := s.guestReport(ctx, t, dom, &def)
	if rep == nil {
		return
	}
	wantUser := strings.NewReplacer("${VM_NAME}", vm.Name, "${FQDN}", vm.Name+".").Replace(userData)
	if got := rep.files["meta-data"]; got != fmt.Sprintf("instance-id: %s\nlocal-hostname: %s\n", dom.UUID, domName) {
		t.Errorf("guest meta-data %q", got)
	}
	if got := rep.files["user-data"]; got != wantUser {
		t.Errorf("guest user-data %q, want %q", got, wantUser)
	}
	if rep.firmware != want.firmware || rep.tpm != want.tpm {
		t.Errorf("guest saw firmware %s tpm %s, want %s %s", rep.firmware, rep.tpm, want.firmware, want.tpm)
	}
	if !strings.HasPrefix(rep.agent, "/dev/vport") {
		t.Errorf("guest agent: %s", rep.agent)
	}
	if rep.replica {
		return // the real domain runs no guest code here, so there is no agent to probe
	}
	// The agent answers and the guest announced itself: GuestReady mirrored, media ejected.
	testenv.Eventually(t, 60*time.Second, vm.Name+" GuestReady=True", func() error {
		var got banlieuev1.VirtualMachine
		_ = s.env.Client.Get(ctx, client.ObjectKeyFromObject(vm), &got)
		c := meta.FindStatusCondition(got.Status.Conditions, banlieuev1.ConditionGuestReady)
		return testenv.Unmet(c != nil && c.Status == metav1.ConditionTrue, fmt.Sprintf("%+v", got.Status.Conditions))
	})
	if want.shape == infrav1.BootInstallMedia {
		m = s.machine(ctx, t, vm)
		if m.Status.InstallMediaDetached == nil || !*m.Status.InstallMediaDetached {
			t.Errorf("install media not detached: %+v", m.Status)
		}
	}
}

// checkDomainXML compares the definition with docs/guides/libvirt-provider.md, "The domain definition".
func (s *suite) checkDomainXML(t *testing.T, def *libvirtxml.Domain, domName string, want checks) {
	t.Helper()
	// libvirt reads memory back in KiB whatever unit it was defined in.
	if def.Name != domName || def.Memory.Value != 256*1024 || def.Memory.Unit != "KiB" || def.VCPU.Value != 1 {
		t.Errorf("name/memory/vcpu: %s %+v %+v", def.Name, def.Memory, def.VCPU)
	}
	if (def.Type == "kvm") != (def.CPU != nil && def.CPU.Mode == "host-passthrough") {
		t.Errorf("type %s with cpu %+v", def.Type, def.CPU)
	}
	if efi := def.OS.Firmware == "efi"; efi != (want.firmware == "efi") {
		t.Errorf("os firmware %q", def.OS.Firmware)
	}
	var boots []string
	for _, b := range def.OS.BootDevices {
		boots = append(boots, b.Dev)
	}
	wantBoot := "hd"
	if want.shape == infrav1.BootInstallMedia {
		wantBoot = "cdrom,hd" // until the guest announced itself and the media was ejected
	}
	if got := strings.Join(boots, ","); got != wantBoot && got != "hd" {
		t.Errorf("boot order %s, want %s", got, wantBoot)
	}
	if def.OnPoweroff != "destroy" || def.OnReboot != "restart" || def.OnCrash != "destroy" {
		t.Errorf("lifecycle %s/%s/%s", def.OnPoweroff, def.OnReboot, def.OnCrash)
	}
	var disks []string
	for _, d := range def.Devices.Disks {
		src := "-"
		if d.Source != nil && d.Source.File != nil {
			src = filepath.Base(d.Source.File.File)
		}
		ro := ""
		if d.ReadOnly != nil {
			ro = ",ro"
		}
		disks = append(disks, fmt.Sprintf("%s:%s:%s/%s:%s%s", d.Device, d.Driver.Type, d.Target.Dev, d.Target.Bus, src, ro))
	}
	wantDisks := []string{fmt.Sprintf("disk:qcow2:vda/virtio:%s-os.qcow2", domName)}
	if want.shape == infrav1.BootInstallMedia {
		wantDisks = append(wantDisks, "cdrom:raw:sda/sata:"+s.isoVol+",ro", fmt.Sprintf("cdrom:raw:sdb/scsi:%s-cidata.iso,ro", domName))
	} else {
		wantDisks = append(wantDisks, fmt.Sprintf("cdrom:raw:sda/scsi:%s-cidata.iso,ro", domName))
	}
	ejected := slices.Clone(wantDisks)
	if want.shape == infrav1.BootInstallMedia {
		ejected[1] = "cdrom:raw:sda/sata:-,ro"
	}
	if got := strings.Join(disks, " "); got != strings.Join(wantDisks, " ") && got != strings.Join(ejected, " ") {
		t.Errorf("disks:\n got %s\nwant %s", got, strings.Join(wantDisks, " "))
	}
	if len(def.Devices.Interfaces) != 0 {
		t.Errorf("NIC-less classes, yet interfaces: %+v", def.Devices.Interfaces)
	}
	tpms := def.Devices.TPMs
	if want.tpm == "2" {
		if len(tpms) != 1 || tpms[0].Model != "tpm-crb" || tpms[0].Backend.Emulator == nil || tpms[0].Backend.Emulator.Version != "2.0" {
			t.Errorf("tpm: %+v", tpms)
		}
	} else if len(tpms) != 0 {
		t.Errorf("unexpected tpm: %+v", tpms)
	}
	agent := false
	for _, c := range def.Devices.Channels {
		agent = agent || c.Target != nil && c.Target.VirtIO != nil && c.Target.VirtIO.Name == "org.qemu.guest_agent.0"
	}
	if !agent || len(def.Devices.Serials) != 1 || len(def.Devices.Consoles) != 1 || def.Devices.MemBalloon.Model != "virtio" {
		t.Errorf("agent channel %v, serials %d, consoles %d, balloon %+v", agent, len(def.Devices.Serials),
			len(def.Devices.Consoles), def.Devices.MemBalloon)
	}
}

func (s *suite) volumes(ctx context.Context, t *testing.T) []string {
	t.Helper()
	return labhost.VolumeNames(ctx, t, s.host, s.pool)
}

func (s *suite) checkDeletion(ctx context.Context, t *testing.T, vm *banlieuev1.VirtualMachine, daemonDown bool) {
	m := s.machine(ctx, t, vm)
	domName, uuid := m.Spec.DomainName, m.Status.DomainUUID
	nvram := filepath.Join(s.lab.Dir, "state", "lib", "qemu", "nvram", domName+"_VARS.fd")
	swtpm := filepath.Join(s.lab.Dir, "state", "lib", "swtpm", uuid)
	if _, err := os.Stat(nvram); err != nil {
		t.Errorf("EFI domain has no NVRAM file before deletion: %v", err)
	}
	if m.Spec.TPMEnabled {
		if _, err := os.Stat(swtpm); err != nil {
			t.Errorf("vTPM domain has no swtpm state before deletion: %v", err)
		}
	}
	if daemonDown {
		s.stopLibvirtd(t)
	}
	if err := s.env.Client.Delete(ctx, vm); err != nil {
		t.Fatal(err)
	}
	if daemonDown {
		testenv.Eventually(t, 60*time.Second, "deletion blocked with a message", func() error {
			var got infrav1.LibvirtMachine
			if err := s.env.Client.Get(ctx, client.ObjectKeyFromObject(m), &got); err != nil {
				return testenv.Unmet(false, err.Error())
			}
			c := meta.FindStatusCondition(got.Status.Conditions, banlieuev1.ConditionReady)
			return testenv.Unmet(!got.DeletionTimestamp.IsZero() && c != nil && c.Status == metav1.ConditionFalse &&
				c.Reason == "ReconcileFailed" && strings.Contains(c.Message, "connecting to Provider"), fmt.Sprintf("%+v", c))
		})
		var still banlieuev1.VirtualMachine
		if err := s.env.Client.Get(ctx, client.ObjectKeyFromObject(vm), &still); err != nil {
			t.Errorf("the VirtualMachine must wait for its machine: %v", err)
		}
		s.startLibvirtd(t)
	}
	s.waitVMGone(ctx, t, vm)
	if _, err := s.host.DomainLookupByName(ctx, domName); !libvirt.IsNotFound(err) {
		t.Errorf("domain %s still defined: %v", domName, err)
	}
	for _, v := range s.volumes(ctx, t) {
		if strings.HasPrefix(v, domName+"-") {
			t.Errorf("volume %s left behind", v)
		}
	}
	if vols := s.volumes(ctx, t); !slices.Contains(vols, s.diskVol) || !slices.Contains(vols, s.isoVol) {
		t.Errorf("boot images must stay: %v", vols)
	}
	for _, p := range []string{nvram, swtpm} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s left behind (%v)", p, err)
		}
	}
}

func (s *suite) waitVMGone(ctx context.Context, t *testing.T, vm *banlieuev1.VirtualMachine) {
	t.Helper()
	testenv.Eventually(t, 90*time.Second, "VirtualMachine "+vm.Name+" gone", func() error {
		var got banlieuev1.VirtualMachine
		err := s.env.Client.Get(ctx, client.ObjectKeyFromObject(vm), &got)
		var m infrav1.LibvirtMachine
		_ = s.env.Client.Get(ctx, client.ObjectKeyFromObject(vm), &m)
		return testenv.Unmet(apierrors.IsNotFound(err), fmt.Sprintf("%v machine %+v", err, m.Status.Conditions))
	})
}

func (s *suite) stopLibvirtd(t *testing.T) {
	t.Helper()
	pid := s.lab.DaemonPID(t)
	t.Cleanup(func() { s.startLibvirtd(t) })
	if err := unix.Kill(pid, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
}

func (s *suite) startLibvirtd(t *testing.T) {
	t.Helper()
	out, err := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "libvirt-lab.sh"), "start", s.lab.Dir).CombinedOutput()
	if err != nil {
		t.Fatalf("restarting libvirtd: %v\n%s", err, out)
	}
	s.host = labhost.Dial(t, s.lab)
}

// checkCrashSafety stops the manager (the provider's process, as far as the host can tell) at
// points of a realisation, starts a new one, and expects one domain with a stable UUID and
// exactly its two volumes.
func (s *suite) checkCrashSafety(ctx context.Context, t *testing.T, class, image string) {
	s.host = labhost.Dial(t, s.lab) // the deletion tests restarted libvirtd
	points := []struct {
		name string
		hit  func(domName string) bool
	}{
		{"os volume created", func(d string) bool { return slices.Contains(s.volumes(ctx, t), d+"-os.qcow2") }},
		{"domain defined", func(d string) bool { _, err := s.host.DomainLookupByName(ctx, d); return err == nil }},
		{"seed created", func(d string) bool { return slices.Contains(s.volumes(ctx, t), d+"-cidata.iso") }},
	}
	for i, p := range points {
		vm := vmLike(&banlieuev1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns},
			Spec: banlieuev1.VirtualMachineSpec{DesiredPowerState: banlieuev1.PoweredOn, MigrationPolicy: "never"}},
			fmt.Sprintf("crash-%d", i), class, image)
		domName := s.ns + "-" + vm.Name
		if err := s.env.Client.Create(ctx, vm); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 60*time.Second, "crash point "+p.name, func() error { return testenv.Unmet(p.hit(domName), "") })
		s.mgrStop()
		var firstUUID string
		if dom, err := s.host.DomainLookupByName(ctx, domName); err == nil {
			firstUUID = dom.UUID.String()
		}
		s.startManager()
		s.waitVMReady(ctx, t, vm)
		m := s.machine(ctx, t, vm)
		dom, err := s.host.DomainLookupByName(ctx, domName)
		if err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		if firstUUID != "" && dom.UUID.String() != firstUUID || m.Status.DomainUUID != dom.UUID.String() {
			t.Errorf("%s: uuid before %s, after %s, status %s", p.name, firstUUID, dom.UUID, m.Status.DomainUUID)
		}
		var mine []string
		for _, v := range s.volumes(ctx, t) {
			if strings.HasPrefix(v, domName+"-") {
				mine = append(mine, v)
			}
		}
		if got := strings.Join(mine, ","); got != domName+"-cidata.iso,"+domName+"-os.qcow2" {
			t.Errorf("%s: volumes %s", p.name, got)
		}
		doms, err := s.host.ListAllDomains(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, d := range doms {
			if strings.HasPrefix(d.Name, domName) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s: %d domains named like %s", p.name, n, domName)
		}
		// The seed the restarted provider reused must be whole: the guest reads it.
		seed := s.seedContent(ctx, t, domName)
		if !strings.Contains(seed, "instance-id: "+dom.UUID.String()) {
			t.Errorf("%s: seed does not carry the domain UUID", p.name)
		}
		if err := s.env.Client.Delete(ctx, vm); err != nil {
			t.Fatal(err)
		}
		s.waitVMGone(ctx, t, vm)
	}
}

// seedContent reads the seed volume's bytes straight from the pool directory.
func (s *suite) seedContent(ctx context.Context, t *testing.T, domName string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(s.poolDir, domName+"-cidata.iso"))
	if err != nil {
		t.Errorf("reading seed: %v", err)
		return ""
	}
	return string(data)
}

// report is what the guest printed between BANLIEUE-GUEST-BEGIN and -END.
type report struct {
	firmware, tpm, seed, agent string
	files                      map[string]string
	// replica is set when the report came from a TCG copy of the definition (see guestReport).
	replica bool
}

// guestReport reads the guest's serial console. The domain's <serial type='pty'/> is a pty of
// the QEMU process on this machine; the guest repeats its report every 2 s, so opening the pty
// at any time yields a whole copy. Nothing is added to banlieue's definition for this.
//
// Some nested-KVM hosts advertise kvm but cannot run firmware code (QEMU stops the domain with
// "KVM internal error"). banlieue renders <domain type='kvm'> there, as it must; to still see
// what a guest makes of banlieue's disks, seed and devices, the definition is then booted as a
// TCG replica (type qemu, no <cpu>, a fresh overlay or empty disk, the same seed and installer).
func (s *suite) guestReport(ctx context.Context, t *testing.T, dom libvirt.Domain, def *libvirtxml.Domain) *report {
	t.Helper()
	state, _, err := s.host.DomainState(ctx, dom)
	if err != nil {
		t.Fatal(err)
	}
	log, _ := os.ReadFile(filepath.Join(s.lab.Dir, "state", "log", "qemu", def.Name+".log"))
	if state == libvirt.DomainPaused && strings.Contains(string(log), "KVM internal error") {
		t.Logf("KVM on this host cannot run guest code (%s is paused, KVM internal error); booting a TCG replica", def.Name)
		return s.replicaReport(ctx, t, def)
	}
	// The provider logs each domain's console on the host; the lab keeps libvirt's logs under
	// its state directory.
	return readSerialLog(t, filepath.Join(s.lab.Dir, "state", "log", "qemu", def.Name+"-serial.log"), 120*time.Second)
}

// readSerialLog waits for a whole guest report in the domain's console log.
func readSerialLog(t *testing.T, path string, timeout time.Duration) *report {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var console []byte
	for time.Now().Before(deadline) {
		console, _ = os.ReadFile(path)
		if rep := parseReport(string(console)); rep != nil {
			return rep
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Errorf("no whole guest report in %s within %s; console tail:\n%s", path, timeout, tail(string(console), 2000))
	return nil
}

func ptyOf(t *testing.T, def *libvirtxml.Domain) string {
	t.Helper()
	if len(def.Devices.Serials) == 0 || def.Devices.Serials[0].Source == nil || def.Devices.Serials[0].Source.Pty == nil ||
		def.Devices.Serials[0].Source.Pty.Path == "" {
		t.Fatalf("domain %s has no serial pty", def.Name)
	}
	return def.Devices.Serials[0].Source.Pty.Path
}

func (s *suite) replicaReport(ctx context.Context, t *testing.T, def *libvirtxml.Domain) *report {
	t.Helper()
	name := def.Name + "-tcg"
	inactive, err := s.host.DomainLookupByName(ctx, def.Name)
	if err != nil {
		t.Fatal(err)
	}
	xml, err := s.host.DomainXMLDesc(ctx, inactive, libvirt.DomainXMLInactive)
	if err != nil {
		t.Fatal(err)
	}
	var r libvirtxml.Domain
	if err := r.Unmarshal(xml); err != nil {
		t.Fatal(err)
	}
	r.Type, r.CPU, r.Name, r.UUID = "qemu", nil, name, ""
	r.OS.Loader, r.OS.NVRam = nil, nil
	r.SecLabel = nil
	pool, err := s.host.StoragePoolLookupByName(ctx, s.pool)
	if err != nil {
		t.Fatal(err)
	}
	// The OS disk gets a fresh overlay shaped like banlieue's (the original is held by its QEMU).
	osDisk := &r.Devices.Disks[0]
	orig := osDisk.Source.File.File
	info, err := exec.Command("qemu-img", "info", "-U", "--output=json", orig).Output()
	if err != nil {
		t.Fatalf("qemu-img info: %v", err)
	}
	backing := ""
	if i := strings.Index(string(info), `"backing-filename": "`); i >= 0 {
		rest := string(info)[i+len(`"backing-filename": "`):]
		backing = rest[:strings.Index(rest, `"`)]
	}
	volXML := fmt.Sprintf(`<volume type='file'><name>%s-os.qcow2</name><capacity unit='G'>1</capacity><target><format type='qcow2'/></target>`, name)
	if backing != "" {
		volXML += fmt.Sprintf(`<backingStore><path>%s</path><format type='raw'/></backingStore>`, backing)
	}
	vol, err := s.host.StorageVolCreateXML(ctx, pool, volXML+`</volume>`, 0)
	if err != nil {
		t.Fatal(err)
	}
	osDisk.Source.File.File = vol.Key
	for i := range r.Devices.Interfaces {
		r.Devices.Interfaces[i].MAC, r.Devices.Interfaces[i].Target = nil, nil
	}
	for i := range r.Devices.Channels {
		r.Devices.Channels[i].Source = &libvirtxml.DomainChardevSource{UNIX: &libvirtxml.DomainChardevSourceUNIX{}}
	}
	out, err := r.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	rdom, err := s.host.DomainDefineXML(ctx, out, 0)
	if err != nil {
		t.Fatalf("defining the TCG replica: %v", err)
	}
	defer func() {
		c := context.Background()
		_ = s.host.DomainDestroy(c, rdom)
		_ = s.host.DomainUndefine(c, rdom, libvirt.UndefineManagedSave|libvirt.UndefineNVRAM|libvirt.UndefineTPM)
		_ = s.host.StorageVolDelete(c, vol)
	}()
	if _, err := s.host.DomainCreate(ctx, rdom, 0); err != nil {
		t.Fatalf("starting the TCG replica: %v", err)
	}
	live, err := s.host.DomainXMLDesc(ctx, rdom, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ldef libvirtxml.Domain
	if err := ldef.Unmarshal(live); err != nil {
		t.Fatal(err)
	}
	rep := readReport(t, ptyOf(t, &ldef), 120*time.Second)
	if rep != nil {
		rep.replica = true
	}
	return rep
}

// readReport opens the pty (raw, no echo) and reads until a whole report went by.
func readReport(t *testing.T, pty string, timeout time.Duration) *report {
	t.Helper()
	fd, err := unix.Open(pty, unix.O_RDWR|unix.O_NOCTTY|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Fatalf("opening the serial console %s: %v", pty, err)
	}
	f := os.NewFile(uintptr(fd), pty)
	defer func() { _ = f.Close() }() // only read from: closing it loses nothing
	if tio, err := unix.IoctlGetTermios(fd, unix.TCGETS); err == nil {
		tio.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
		tio.Oflag &^= unix.OPOST
		tio.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
		_ = unix.IoctlSetTermios(fd, unix.TCSETS, tio)
	}
	deadline := time.Now().Add(timeout)
	var buf []byte
	chunk := make([]byte, 4096)
	for time.Now().Before(deadline) {
		_ = f.SetReadDeadline(time.Now().Add(time.Second))
		n, _ := f.Read(chunk)
		buf = append(buf, chunk[:n]...)
		if rep := parseReport(string(buf)); rep != nil {
			return rep
		}
	}
	t.Errorf("no whole guest report on %s within %s; console tail:\n%s", pty, timeout, tail(string(buf), 2000))
	return nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func parseReport(console string) *report {
	console = strings.ReplaceAll(console, "\r", "")
	b := strings.Index(console, "BANLIEUE-GUEST-BEGIN\n")
	if b < 0 {
		return nil
	}
	e := strings.Index(console[b:], "BANLIEUE-GUEST-END\n")
	if e < 0 {
		return nil
	}
	rep := &report{files: map[string]string{}}
	lines := strings.Split(console[b:b+e], "\n")
	for i := 0; i < len(lines); i++ {
		f := strings.Fields(lines[i])
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "BANLIEUE-FIRMWARE":
			rep.firmware = f[1]
		case "BANLIEUE-TPM":
			rep.tpm = f[1]
		case "BANLIEUE-SEED":
			rep.seed = f[1]
		case "BANLIEUE-AGENT":
			rep.agent = f[1]
		case "BANLIEUE-FILE":
			var b64 strings.Builder
			for i++; i < len(lines) && lines[i] != "BANLIEUE-FILE-END"; i++ {
				b64.WriteString(lines[i])
			}
			data, err := base64.StdEncoding.DecodeString(b64.String())
			if err != nil {
				return nil // a torn copy; wait for the next one
			}
			if size, _ := strconv.Atoi(f[2]); size != len(data) {
				return nil
			}
			rep.files[f[1]] = string(data)
		}
	}
	return rep
}
