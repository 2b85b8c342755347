package libvirt

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"libvirt.org/go/libvirtxml"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/provider/libvirt/hostconn"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/internal/testenv/labhost"
	"banlieue.io/banlieue/internal/userdata"
	"banlieue.io/banlieue/pkg/libvirt"
)

// machineSuite adds a storage pool of its own with a tiny boot volume to the lab suite.
type machineSuite struct {
	*providerSuite
	pool     string
	bootName string
}

func TestMachineAgainstLabHost(t *testing.T) {
	ctx, ps := startLabSuite(t, func(mgr ctrl.Manager, conns *hostconn.Connections) error {
		r := &MachineReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Connections: conns, Resync: time.Second}
		return r.SetupWithManager(mgr)
	})
	s := &machineSuite{providerSuite: ps, pool: "machines-" + testenv.RunID(), bootName: "tiny.raw"}
	s.createPool(ctx, t)
	p := s.guideProvider("lab")
	p.Spec.Capabilities = s.capabilities()
	if err := s.env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	s.createImage(ctx, t, s.pool, s.bootName)
	s.createImage(ctx, t, s.pool+"-vanished", "missing.raw")

	t.Run("a machine becomes a running domain with its seed", func(t *testing.T) { s.testRealise(ctx, t) })
	t.Run("a machine created powered off is defined, provisioned and says so", func(t *testing.T) { s.testCreatedOff(ctx, t) })
	t.Run("the same name in two namespaces makes two domains", func(t *testing.T) { s.testTwoNamespaces(ctx, t) })
	t.Run("a namespace the Provider admits by label runs on it; before the label, nothing reaches the host", func(t *testing.T) { s.testSharedProvider(ctx, t) })
	t.Run("a shared Provider's machine of another namespace gets its user-data seed", func(t *testing.T) { s.testSharedProviderUserData(ctx, t) })
	t.Run("a static NIC keeps its MAC; a stranger's seed is refused, an uncommitted own seed replaced", func(t *testing.T) { s.testStaticNICAndStraySeed(ctx, t) })
	t.Run("a domain defined by hand is never adopted", func(t *testing.T) { s.testForeignDomain(ctx, t) })
	t.Run("joined names that collide: the second machine is refused", func(t *testing.T) { s.testJoinedNamesCollide(ctx, t) })
	t.Run("volume names that collide: the second machine is refused", func(t *testing.T) { s.testVolumeNamesCollide(ctx, t) })
	t.Run("a disk dropped from the spec goes with the machine", func(t *testing.T) { s.testDroppedDisk(ctx, t) })
	t.Run("a raised disk size grows the disk, live while the domain runs", func(t *testing.T) { s.testDiskGrow(ctx, t) })
	t.Run("snapshots are taken live and off, merged away, restored, and go with the machine", func(t *testing.T) { s.testSnapshots(ctx, t) })
	t.Run("a snapshot switched by a pass that died before its record is taken once", func(t *testing.T) { s.testSnapshotResumed(ctx, t) })
	t.Run("a machine without userData gets a seed with both files", func(t *testing.T) { s.testSeedWithoutUserData(ctx, t) })
	t.Run("audit lists domains whose machine is gone", func(t *testing.T) { s.testAudit(ctx, t) })
	t.Run("a create libvirtd refuses leaves no record", func(t *testing.T) { s.testRefusedCreateLeavesNoRecord(ctx, t) })
	t.Run("failedStatus cuts libvirtd's own 1 MiB error so the API server takes it", func(t *testing.T) { s.testHugeLibvirtError(ctx, t) })
	t.Run("names the Provider does not grant are refused before any host call", func(t *testing.T) { s.testAuthority(ctx, t) })
	t.Run("an accepted machine keeps its boot volume while its row is empty", func(t *testing.T) { s.testAuthorityOutage(ctx, t) })
	t.Run("a user-data Secret that is not the machine's own is refused", func(t *testing.T) { s.testForeignUserDataSecret(ctx, t) })
	t.Run("a missing pool is reported on Ready", func(t *testing.T) {
		s.testReportedError(ctx, t, "nopool", func(m *infrav1.LibvirtMachine) { m.Spec.Pool = "no-such-pool" },
			`invalid spec.pool: storage pool "no-such-pool" does not exist on this host`)
	})
	t.Run("a missing boot volume is reported on Ready", func(t *testing.T) {
		s.testReportedError(ctx, t, "noimage", func(m *infrav1.LibvirtMachine) { m.Spec.BootSource.Volume = "missing.raw" },
			fmt.Sprintf(`invalid spec.bootSource.volume: volume "missing.raw" is not in pool %q; the VMImage for this machine has not finished importing`, s.pool))
	})
}

func (s *machineSuite) createPool(ctx context.Context, t *testing.T) {
	t.Helper()
	pool := labhost.CreatePool(ctx, t, s.host, s.lab, s.pool)
	xml, err := renderVolume(volumeSpec{name: s.bootName, capacity: 1 << 20, format: formatRaw})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.host.StorageVolCreateXML(ctx, pool, xml, 0); err != nil {
		t.Fatal(err)
	}
}

// machineNamespaces are the namespaces the suite's machines live in, each with a Provider "lab".
var machineNamespaces = []string{testNamespace, "team-b", "team", "team-x", "tenant-x"}

// capabilities grant the suite's machines their pool, "no-such-pool" (a storage class whose pool
// the host lacks) and the network of testStaticNICAndStraySeed.
func (s *machineSuite) capabilities() banlieuev1.ProviderCapabilities {
	return banlieuev1.ProviderCapabilities{
		StorageClasses: []banlieuev1.StorageClassMapping{
			{Name: "lab", Target: map[string]string{targetPool: s.pool}},
			{Name: "gone", Target: map[string]string{targetPool: "no-such-pool"}},
		},
		NetworkClasses: []banlieuev1.NetworkClassMapping{{Name: "lan", Target: map[string]string{targetNetwork: s.pool + "-net"}}},
	}
}

// createImage creates a VMImage whose row for Provider "lab" of every machine namespace
// resolved to volume, as the VMImage controller writes it.
func (s *machineSuite) createImage(ctx context.Context, t *testing.T, name, volume string) {
	t.Helper()
	img := &banlieuev1.VMImage{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: banlieuev1.VMImageSpec{OSFamily: "linux", OSDistribution: "tiny", OSVersion: "1", Architecture: "amd64",
			Sources: []banlieuev1.ImageSource{{ProviderClass: "libvirt", Kind: banlieuev1.SourceBackingFile, Ref: volume}}},
	}
	if err := s.env.Client.Create(ctx, img); err != nil {
		t.Fatal(err)
	}
	for _, ns := range machineNamespaces {
		img.Status.PerProvider = append(img.Status.PerProvider, banlieuev1.ProviderImageStatus{
			ProviderName: "lab", ProviderNamespace: ns, Ready: true, Reason: banlieuev1.ReasonReconciled, ResolvedRef: volume})
	}
	if err := s.env.Client.Status().Update(ctx, img); err != nil {
		t.Fatal(err)
	}
}

func (s *machineSuite) machine(namespace, name string) *infrav1.LibvirtMachine {
	return &infrav1.LibvirtMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: infrav1.LibvirtMachineSpec{
			ProviderRef: &infrav1.ProviderReference{Name: "lab"},
			Pool:        s.pool,
			DomainName:  namespace + "-" + name,
			BootSource:  infrav1.BootSource{Kind: infrav1.BootBackingVolume, Volume: s.bootName},
			VCPUs:       1,
			MemoryMiB:   128,
			Firmware:    banlieuev1.FirmwareBIOS,
			Disks:       []infrav1.LibvirtDisk{{Name: "os", SizeGiB: 1}},
		},
	}
}

func (s *machineSuite) waitMachine(ctx context.Context, t *testing.T, key client.ObjectKey, timeout time.Duration,
	ok func(*infrav1.LibvirtMachine) bool) *infrav1.LibvirtMachine {
	t.Helper()
	var m infrav1.LibvirtMachine
	testenv.Eventually(t, timeout, fmt.Sprintf("LibvirtMachine %s reaching the expected status", key), func() error {
		err := s.env.Client.Get(ctx, key, &m)
		return testenv.Unmet(err == nil && ok(&m), fmt.Sprintf("%+v (%v)", m.Status, err))
	})
	return &m
}

func machineReady(m *infrav1.LibvirtMachine) bool {
	c := meta.FindStatusCondition(m.Status.Conditions, banlieuev1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == infrav1.ReasonDomainRunning
}

// createWithUserData creates m with a reference to its user-data Secret, then the Secret,
// controlled by m, as banlieue-controller does (internal/controller/userdata_secret.go).
func (s *machineSuite) createWithUserData(ctx context.Context, t *testing.T, m *infrav1.LibvirtMachine, content string) {
	t.Helper()
	salt := []byte("0123456789abcdef")
	m.Spec.UserDataSecretRef = &banlieuev1.LocalObjectReference{Name: userdata.SecretName(m.Name)}
	m.Spec.UserDataHash = userdata.Hash(salt, []byte(content))
	if err := s.env.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := s.env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: m.Spec.UserDataSecretRef.Name, Namespace: m.Namespace, Labels: userdata.Labels(m.Name),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: infrav1.GroupVersion.String(), Kind: "LibvirtMachine", Name: m.Name, UID: m.UID, Controller: ptr.To(true)}}},
		Data: map[string][]byte{userdata.KeyUserData: []byte(content), userdata.KeySalt: salt},
	}); err != nil {
		t.Fatal(err)
	}
}

func (s *machineSuite) testRealise(ctx context.Context, t *testing.T) {
	m := s.machine(testNamespace, "web-01")
	userData := "#cloud-config\nhostname: web-01\n"
	s.createWithUserData(ctx, t, m, userData)
	got := s.waitMachine(ctx, t, client.ObjectKeyFromObject(m), 60*time.Second, machineReady)
	if got.Status.ObservedPowerState != banlieuev1.PoweredOn || !ptrTrue(got.Status.Initialization.Provisioned) {
		t.Errorf("power/provisioned: %+v", got.Status)
	}
	if got.Status.InstallMediaDetached != nil || meta.FindStatusCondition(got.Status.Conditions, banlieuev1.ConditionGuestReady) != nil {
		t.Errorf("backingVolume machine without agent: no installMediaDetached, no GuestReady: %+v", got.Status)
	}
	dom, err := s.host.DomainLookupByName(ctx, "banlieue-system-web-01")
	if err != nil {
		t.Fatalf("the guide's domain name: %v", err)
	}
	if got.Status.DomainUUID != dom.UUID.String() || got.Spec.ProviderID != "libvirt://lab/"+dom.UUID.String() {
		t.Errorf("uuid %q providerID %q, domain %s", got.Status.DomainUUID, got.Spec.ProviderID, dom.UUID)
	}
	if !controllerHasFinalizer(got) {
		t.Errorf("finalizer %s missing", infrav1.FinalizerLibvirtMachine)
	}

	// The definition: an overlay OS disk and the seed as a CD-ROM.
	xml, err := s.host.DomainXMLDesc(ctx, dom, 0)
	if err != nil {
		t.Fatal(err)
	}
	var def libvirtxml.Domain
	if err := def.Unmarshal(xml); err != nil {
		t.Fatal(err)
	}
	disks := disksOf(&def)
	if len(disks) != 2 || disks[0].target != "vda" || !strings.HasSuffix(disks[0].file, "/banlieue-system-web-01-os.qcow2") ||
		disks[1].device != "cdrom" || !strings.HasSuffix(disks[1].file, "/banlieue-system-web-01-cidata.iso") {
		t.Errorf("domain disks: %+v", disks)
	}

	// The volumes the guide names, and the overlay's backing store read from the name.
	pool, err := s.host.StoragePoolLookupByName(ctx, s.pool)
	if err != nil {
		t.Fatal(err)
	}
	if names := strings.Join(labhost.VolumeNames(ctx, t, s.host, s.pool), ","); names != "banlieue-system-web-01-cidata.iso,banlieue-system-web-01-os.qcow2,tiny.raw" {
		t.Errorf("volumes: %s", names)
	}
	if out, err := exec.Command("qemu-img", "info", "--output=json", filepath.Join(s.lab.Dir, "pools", s.pool, "banlieue-system-web-01-os.qcow2")).CombinedOutput(); err == nil {
		if !strings.Contains(string(out), `"backing-filename-format": "raw"`) || !strings.Contains(string(out), `"virtual-size": 1073741824`) {
			t.Errorf("overlay: %s", out)
		}
	}

	// The seed carries the domain's UUID as instance-id and the user-data byte for byte.
	seed, err := s.host.StorageVolLookupByName(ctx, pool, "banlieue-system-web-01-cidata.iso")
	if err != nil {
		t.Fatal(err)
	}
	meta, user := s.readSeed(ctx, t, seed)
	if want := "instance-id: " + dom.UUID.String() + "\nlocal-hostname: banlieue-system-web-01\n"; meta != want {
		t.Errorf("meta-data = %q, want %q", meta, want)
	}
	if user != userData {
		t.Errorf("user-data = %q, want %q", user, userData)
	}

	// One event per transition, none for the passes since (the resync is 1 s): a repeat would
	// show as a series. The recorder writes asynchronously, hence the wait before looking.
	time.Sleep(3 * time.Second)
	if got, want := testenv.EventKeys(testenv.EventsAbout(ctx, t, s.env.Client, testNamespace, "web-01")), []string{"Normal/DomainDefined", "Normal/DomainStarted"}; !slices.Equal(got, want) {
		t.Errorf("events about the machine = %v, want %v", got, want)
	}

	// Deletion: domain and the machine's volumes go, the shared boot image stays.
	if err := s.env.Client.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	s.waitGone(ctx, t, client.ObjectKeyFromObject(m))
	testenv.Eventually(t, 10*time.Second, "DomainDestroyed announced", func() error {
		keys := testenv.EventKeys(testenv.EventsAbout(ctx, t, s.env.Client, testNamespace, "web-01"))
		return testenv.Unmet(slices.Equal(keys, []string{"Normal/DomainDefined", "Normal/DomainDestroyed", "Normal/DomainStarted"}), fmt.Sprintf("events %v", keys))
	})
	if _, err := s.host.DomainLookupByName(ctx, "banlieue-system-web-01"); !libvirt.IsNotFound(err) {
		t.Errorf("domain still defined after deletion: %v", err)
	}
	if names := strings.Join(labhost.VolumeNames(ctx, t, s.host, s.pool), ","); names != "tiny.raw" {
		t.Errorf("after deletion the pool must hold only the boot image, got %s", names)
	}
}

func controllerHasFinalizer(m *infrav1.LibvirtMachine) bool {
	for _, f := range m.Finalizers {
		if f == infrav1.FinalizerLibvirtMachine {
			return true
		}
	}
	return false
}

// readSeed downloads the seed volume and reads it back with isoinfo, an independent reader.
func (s *machineSuite) readSeed(ctx context.Context, t *testing.T, vol libvirt.StorageVol) (metaData, userData string) {
	t.Helper()
	path := s.downloadSeed(ctx, t, vol)
	return isoFile(t, path, "/meta-data"), isoFile(t, path, "/user-data")
}

// readSeedFile downloads the seed volume and returns one file of it, read with isoinfo.
func (s *machineSuite) readSeedFile(ctx context.Context, t *testing.T, vol libvirt.StorageVol, name string) string {
	t.Helper()
	return isoFile(t, s.downloadSeed(ctx, t, vol), name)
}

// downloadSeed writes the seed volume to a file for isoinfo to read.
func (s *machineSuite) downloadSeed(ctx context.Context, t *testing.T, vol libvirt.StorageVol) string {
	t.Helper()
	return downloadSeed(ctx, t, s.host, vol)
}

// downloadSeed writes seed volume vol of c's host to a file for isoinfo to read.
func downloadSeed(ctx context.Context, t *testing.T, c *libvirt.Client, vol libvirt.StorageVol) string {
	t.Helper()
	if _, err := exec.LookPath("isoinfo"); err != nil {
		testenv.MissingPrerequisite(t, "isoinfo missing (genisoimage)")
	}
	var buf bytes.Buffer
	if _, err := c.StorageVolDownload(ctx, vol, &buf, nil); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "seed.iso")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func isoFile(t *testing.T, iso, name string) string {
	t.Helper()
	out, err := exec.Command("isoinfo", "-J", "-i", iso, "-x", name).Output()
	if err != nil {
		t.Fatalf("isoinfo -x %s: %v", name, err)
	}
	return string(out)
}

func (s *machineSuite) waitGone(ctx context.Context, t *testing.T, key client.ObjectKey) {
	t.Helper()
	testenv.Eventually(t, 60*time.Second, fmt.Sprintf("LibvirtMachine %s gone", key), func() error {
		var m infrav1.LibvirtMachine
		err := s.env.Client.Get(ctx, key, &m)
		return testenv.Unmet(apierrors.IsNotFound(err), fmt.Sprintf("still exists: %+v", m.Status.Conditions))
	})
}

func (s *machineSuite) testTwoNamespaces(ctx context.Context, t *testing.T) {
	s.addNamespace(ctx, t, "team-b")
	a, b := s.machine(testNamespace, "web-02"), s.machine("team-b", "web-02")
	for _, m := range []*infrav1.LibvirtMachine{a, b} {
		if err := s.env.Client.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	ga := s.waitMachine(ctx, t, client.ObjectKeyFromObject(a), 60*time.Second, machineReady)
	gb := s.waitMachine(ctx, t, client.ObjectKeyFromObject(b), 60*time.Second, machineReady)
	if ga.Status.DomainUUID == gb.Status.DomainUUID {
		t.Errorf("two namespaces share one domain %s", ga.Status.DomainUUID)
	}
	for _, name := range []string{"banlieue-system-web-02", "team-b-web-02"} {
		if _, err := s.host.DomainLookupByName(ctx, name); err != nil {
			t.Errorf("domain %s: %v", name, err)
		}
	}
	for _, m := range []*infrav1.LibvirtMachine{ga, gb} {
		if err := s.env.Client.Delete(ctx, m); err != nil {
			t.Fatal(err)
		}
		s.waitGone(ctx, t, client.ObjectKeyFromObject(m))
	}
}

func (s *machineSuite) testReportedError(ctx context.Context, t *testing.T, name string, mutate func(*infrav1.LibvirtMachine), want string) {
	m := s.machine(testNamespace, name)
	mutate(m)
	if err := s.env.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	got := s.waitMachine(ctx, t, client.ObjectKeyFromObject(m), 30*time.Second, func(m *infrav1.LibvirtMachine) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, banlieuev1.ConditionReady)
		return c != nil && c.Reason == infrav1.ReasonReconcileFailed
	})
	if c := meta.FindStatusCondition(got.Status.Conditions, banlieuev1.ConditionReady); c.Status != metav1.ConditionFalse || c.Message != want {
		t.Errorf("Ready = %s %q, want False %q", c.Status, c.Message, want)
	}
	if _, err := s.host.DomainLookupByName(ctx, m.Spec.DomainName); !libvirt.IsNotFound(err) {
		t.Errorf("nothing may be defined for a machine that cannot converge: %v", err)
	}
	if err := s.env.Client.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	s.waitGone(ctx, t, client.ObjectKeyFromObject(m))
}

// testStaticNICAndStraySeed: the seed's network-config names the MAC the interface really has,
// pass after pass; a seed volume the machine did not record is a stranger's and refused, and one
// it recorded but no definition attaches (left by an interrupted pass) is not trusted.
func (s *machineSuite) testStaticNICAndStraySeed(ctx context.Context, t *testing.T) {
	network := s.pool + "-net"
	// Defined, not started: defining a powered-off domain needs no bridge on this machine.
	if _, err := s.host.NetworkDefineXML(ctx, "<network><name>"+network+"</name></network>"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if n, err := s.host.NetworkLookupByName(context.Background(), network); err == nil {
			_ = s.host.NetworkUndefine(context.Background(), n)
		}
	})
	m := s.machine(testNamespace, "static-01")
	m.Spec.DesiredPowerState = banlieuev1.PoweredOff
	m.Spec.Network = []infrav1.LibvirtNetworkInterface{{Name: "nic0", Source: infrav1.NetworkSource{Kind: infrav1.SourceNetwork, Name: network},
		IPAM: banlieuev1.IpamSpec{Static: &banlieuev1.StaticIpamConfig{Address: "192.0.2.10", Prefix: 24, Gateway: "192.0.2.1"}}}}

	pool, err := s.host.StoragePoolLookupByName(ctx, s.pool)
	if err != nil {
		t.Fatal(err)
	}
	stray, err := renderVolume(volumeSpec{name: seedVolume(m.Spec.DomainName), capacity: 4096, format: formatRaw})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.host.StorageVolCreateXML(ctx, pool, stray, 0); err != nil {
		t.Fatal(err)
	}

	if err := s.env.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	// Unrecorded, the stray seed is someone else's: refused, left as it is, no domain defined.
	s.waitReason(ctx, t, m, infrav1.ReasonVolumeNameConflict)
	if _, err := s.host.DomainLookupByName(ctx, m.Spec.DomainName); !libvirt.IsNotFound(err) {
		t.Errorf("no domain may be defined next to a stranger's seed: %v", err)
	}
	// Recorded, it is what a pass that died mid-upload leaves: the machine's own, replaced.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var refused infrav1.LibvirtMachine
		if err := s.env.Client.Get(ctx, client.ObjectKeyFromObject(m), &refused); err != nil {
			return err
		}
		refused.Status.Volumes = machineVolumes(&refused.Spec)
		return s.env.Client.Status().Update(ctx, &refused)
	}); err != nil {
		t.Fatal(err)
	}
	got := s.waitMachine(ctx, t, client.ObjectKeyFromObject(m), 60*time.Second, func(m *infrav1.LibvirtMachine) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, banlieuev1.ConditionReady)
		return c != nil && c.Reason == infrav1.ReasonDomainNotRunning
	})
	dom, err := s.host.DomainLookupByName(ctx, m.Spec.DomainName)
	if err != nil {
		t.Fatal(err)
	}
	macOf := func() string {
		def, err := readDefinition(ctx, s.host, dom)
		if err != nil {
			t.Fatal(err)
		}
		return interfaceMACs(def)[0]
	}
	mac := macOf()
	time.Sleep(3 * time.Second) // a few more passes redefine the domain
	if again := macOf(); again != mac || mac == "" {
		t.Errorf("the interface's MAC changed across redefines: %q then %q", mac, again)
	}

	seed, err := s.host.StorageVolLookupByName(ctx, pool, seedVolume(m.Spec.DomainName))
	if err != nil {
		t.Fatal(err)
	}
	metaData, _ := s.readSeed(ctx, t, seed)
	if !strings.Contains(metaData, "instance-id: "+got.Status.DomainUUID) {
		t.Errorf("the stray seed was kept: meta-data %q", metaData)
	}
	network2 := s.readSeedFile(ctx, t, seed, "/network-config")
	if !strings.Contains(network2, mac) || !strings.Contains(network2, "192.0.2.10/24") {
		t.Errorf("network-config must match the interface's MAC %s:\n%s", mac, network2)
	}
	if err := s.env.Client.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	s.waitGone(ctx, t, client.ObjectKeyFromObject(m))
}

// testForeignUserDataSecret: whoever writes a LibvirtMachine names its user-data Secret, so the
// provider seeds a guest only from banlieue's copy controlled by that very machine. A Secret of
// the right name that another machine (or a user) made is refused on Ready, and no domain is
// defined.
func (s *machineSuite) testForeignUserDataSecret(ctx context.Context, t *testing.T) {
	m := s.machine(testNamespace, "foreign-ud")
	name := userdata.SecretName(m.Name)
	if err := s.env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, Labels: userdata.Labels(m.Name)},
		Data: map[string][]byte{userdata.KeyUserData: []byte("#cloud-config\n"), userdata.KeySalt: []byte("s")}}); err != nil {
		t.Fatal(err)
	}
	m.Spec.UserDataSecretRef = &banlieuev1.LocalObjectReference{Name: name}
	m.Spec.UserDataHash = userdata.Hash([]byte("s"), []byte("#cloud-config\n"))
	if err := s.env.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	s.waitMachine(ctx, t, client.ObjectKeyFromObject(m), 30*time.Second, func(got *infrav1.LibvirtMachine) bool {
		c := meta.FindStatusCondition(got.Status.Conditions, banlieuev1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == infrav1.ReasonReconcileFailed &&
			strings.Contains(c.Message, "spec.userDataSecretRef: Secret "+testNamespace+"/"+name+" is not this machine's user-data")
	})
	if _, err := s.host.DomainLookupByName(ctx, m.Spec.DomainName); !libvirt.IsNotFound(err) {
		t.Errorf("a domain was defined from a foreign user-data Secret: %v", err)
	}
	if err := s.env.Client.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	s.waitGone(ctx, t, client.ObjectKeyFromObject(m))
}
