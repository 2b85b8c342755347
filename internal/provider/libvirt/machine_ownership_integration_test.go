package libvirt

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv/labhost"
	"banlieue.io/banlieue/pkg/libvirt"
)

// The ownership tests (docs/reliability.md "Ownership"): each sets up what someone else left on
// the host, then checks that a machine needing the same name reports the conflict and that the
// host is byte for byte as it was — also after the refused machine is deleted.

// addNamespace creates a namespace with the guide's credentials, CA and a Provider "lab" in it.
func (s *machineSuite) addNamespace(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	p := s.guideProvider("lab")
	p.Namespace = ns
	p.Spec.Capabilities = s.capabilities()
	s.env.CreateLabNamespace(ctx, t, s.lab, ns, "libvirt-edge-creds", "libvirt-edge-ca")
	s.env.Create(ctx, t, p)
}

// waitReason waits until the machine's Ready condition has reason.
func (s *machineSuite) waitReason(ctx context.Context, t *testing.T, m *infrav1.LibvirtMachine, reason string) *metav1.Condition {
	t.Helper()
	got := s.waitMachine(ctx, t, client.ObjectKeyFromObject(m), 60*time.Second, func(m *infrav1.LibvirtMachine) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, banlieuev1.ConditionReady)
		return c != nil && c.Reason == reason
	})
	return meta.FindStatusCondition(got.Status.Conditions, banlieuev1.ConditionReady)
}

// deleteAndWait deletes the machine and waits until its finalizer has come off.
func (s *machineSuite) deleteAndWait(ctx context.Context, t *testing.T, m *infrav1.LibvirtMachine) {
	t.Helper()
	if err := s.env.Client.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	s.waitGone(ctx, t, client.ObjectKeyFromObject(m))
}

// domainXML is the domain's full live-or-persistent definition, to compare before and after.
func (s *machineSuite) domainXML(ctx context.Context, t *testing.T, name string) string {
	t.Helper()
	dom, err := s.host.DomainLookupByName(ctx, name)
	if err != nil {
		t.Fatalf("domain %s: %v", name, err)
	}
	xml, err := s.host.DomainXMLDesc(ctx, dom, 0)
	if err != nil {
		t.Fatal(err)
	}
	return xml
}

func (s *machineSuite) volumes(ctx context.Context, t *testing.T) string {
	t.Helper()
	return strings.Join(labhost.VolumeNames(ctx, t, s.host, s.pool), ",")
}

// testForeignDomain: a domain defined by hand under the computed name is never adopted.
func (s *machineSuite) testForeignDomain(ctx context.Context, t *testing.T) {
	const name = testNamespace + "-foreign"
	dom, err := s.host.DomainDefineXML(ctx, `<domain type='qemu'><name>`+name+`</name><memory unit='MiB'>64</memory>`+
		`<os><type arch='x86_64'>hvm</type></os></domain>`, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.host.DomainUndefine(context.Background(), dom, 0) })
	before, volsBefore := s.domainXML(ctx, t, name), s.volumes(ctx, t)

	m := s.machine(testNamespace, "foreign")
	if err := s.env.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	c := s.waitReason(ctx, t, m, infrav1.ReasonDomainNameConflict)
	if c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, `domain "`+name+`" already exists on the host and is a domain not created by banlieue`) {
		t.Errorf("Ready = %s %q", c.Status, c.Message)
	}
	var got infrav1.LibvirtMachine
	if err := s.env.Client.Get(ctx, client.ObjectKeyFromObject(m), &got); err != nil {
		t.Fatal(err)
	}
	// spec.providerID names the UUID banlieue chose before reaching the host (ADR-0130), never
	// the stranger's.
	if got.Status.DomainUUID != "" || got.Spec.ProviderID == "libvirt://lab/"+dom.UUID.String() || len(got.Status.Volumes) != 0 {
		t.Errorf("a refused machine must not report the foreign domain or record volumes: %+v %q", got.Status, got.Spec.ProviderID)
	}
	s.deleteAndWait(ctx, t, &got)
	if after := s.domainXML(ctx, t, name); after != before {
		t.Errorf("the foreign domain changed:\nbefore %s\nafter  %s", before, after)
	}
	if v := s.volumes(ctx, t); v != volsBefore {
		t.Errorf("volumes changed: %s → %s", volsBefore, v)
	}
	// The machine wants PoweredOn: no power call reached the stranger's domain.
	if state, _, err := s.host.DomainState(ctx, dom); err != nil || state != libvirt.DomainShutOff {
		t.Errorf("the foreign domain is %s (%v), want it left shut off", state, err)
	}
}

// testJoinedNamesCollide: team/x-vm and team-x/vm both compute domain team-x-vm. The first
// keeps it; the second is refused and its deletion leaves the first's domain running.
func (s *machineSuite) testJoinedNamesCollide(ctx context.Context, t *testing.T) {
	s.addNamespace(ctx, t, "team")
	s.addNamespace(ctx, t, "team-x")
	first, second := s.machine("team", "x-vm"), s.machine("team-x", "vm")
	if first.Spec.DomainName != second.Spec.DomainName {
		t.Fatalf("the test needs colliding names: %s %s", first.Spec.DomainName, second.Spec.DomainName)
	}
	if err := s.env.Client.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	a := s.waitMachine(ctx, t, client.ObjectKeyFromObject(first), 60*time.Second, machineReady)
	volsBefore := s.volumes(ctx, t)
	if err := s.env.Client.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	c := s.waitReason(ctx, t, second, infrav1.ReasonDomainNameConflict)
	if !strings.Contains(c.Message, "LibvirtMachine team/x-vm (uid "+string(a.UID)+")") {
		t.Errorf("the message must name the owner: %q", c.Message)
	}
	// Even a record naming the first machine's volumes (as a pass of the second before the
	// first existed could have left) does not let the second's teardown delete what the
	// first's domain attaches.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var refused infrav1.LibvirtMachine
		if err := s.env.Client.Get(ctx, client.ObjectKeyFromObject(second), &refused); err != nil {
			return err
		}
		refused.Status.Volumes = machineVolumes(&refused.Spec)
		return s.env.Client.Status().Update(ctx, &refused)
	}); err != nil {
		t.Fatal(err)
	}
	s.deleteAndWait(ctx, t, second)
	dom, err := s.host.DomainLookupByName(ctx, first.Spec.DomainName)
	if err != nil || dom.UUID.String() != a.Status.DomainUUID {
		t.Fatalf("the first machine's domain is gone or replaced: %v %v", dom.UUID, err)
	}
	if state, _, err := s.host.DomainState(ctx, dom); err != nil || !isRunning(state) {
		t.Errorf("the first machine's domain must still run: %v %v", state, err)
	}
	if v := s.volumes(ctx, t); v != volsBefore {
		t.Errorf("volumes changed: %s → %s", volsBefore, v)
	}
	s.deleteAndWait(ctx, t, a)
}

// testVolumeNamesCollide: web with OS disk data-os and web-data with OS disk os both need
// banlieue-system-web-data-os.qcow2. The second is refused before anything is created.
func (s *machineSuite) testVolumeNamesCollide(ctx context.Context, t *testing.T) {
	first, second := s.machine(testNamespace, "web"), s.machine(testNamespace, "web-data")
	first.Spec.Disks[0].Name = "data-os"
	if err := s.env.Client.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	a := s.waitMachine(ctx, t, client.ObjectKeyFromObject(first), 60*time.Second, machineReady)
	const shared = testNamespace + "-web-data-os.qcow2"
	if !slices.Contains(a.Status.Volumes, shared) {
		t.Fatalf("status.volumes = %v, want %s in it", a.Status.Volumes, shared)
	}
	volsBefore := s.volumes(ctx, t)
	if err := s.env.Client.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	c := s.waitReason(ctx, t, second, infrav1.ReasonVolumeNameConflict)
	if !strings.Contains(c.Message, `volume "`+shared+`" already exists in pool "`+s.pool+`" and was not created by this machine`) {
		t.Errorf("Ready message %q", c.Message)
	}
	if _, err := s.host.DomainLookupByName(ctx, second.Spec.DomainName); !libvirt.IsNotFound(err) {
		t.Errorf("a refused machine must define no domain: %v", err)
	}
	s.deleteAndWait(ctx, t, second)
	if v := s.volumes(ctx, t); v != volsBefore {
		t.Errorf("volumes changed: %s → %s", volsBefore, v)
	}
	s.deleteAndWait(ctx, t, a)
	if v := s.volumes(ctx, t); v != s.bootName {
		t.Errorf("after both deletions the pool must hold only the boot image, got %s", v)
	}
}

// testDroppedDisk: a disk removed from the spec is still the machine's and goes with it, so a
// later machine of the same names cannot inherit its data.
func (s *machineSuite) testDroppedDisk(ctx context.Context, t *testing.T) {
	m := s.machine(testNamespace, "dropped")
	m.Spec.DesiredPowerState = banlieuev1.PoweredOff
	m.Spec.Disks = append(m.Spec.Disks, infrav1.LibvirtDisk{Name: "data", SizeGiB: 1})
	if err := s.env.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	s.waitReason(ctx, t, m, infrav1.ReasonDomainNotRunning)
	var got infrav1.LibvirtMachine
	// The provider may write the machine between the read and the update (status, finalizer):
	// read again and retry, as any client of a live object must.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := s.env.Client.Get(ctx, client.ObjectKeyFromObject(m), &got); err != nil {
			return err
		}
		got.Spec.Disks = got.Spec.Disks[:1]
		return s.env.Client.Update(ctx, &got)
	}); err != nil {
		t.Fatal(err)
	}
	s.waitMachine(ctx, t, client.ObjectKeyFromObject(m), 30*time.Second, func(m *infrav1.LibvirtMachine) bool {
		return m.Status.ObservedGeneration == got.Generation
	})
	if v := s.volumes(ctx, t); !strings.Contains(v, testNamespace+"-dropped-data.qcow2") {
		t.Errorf("a dropped disk is kept while the machine lives (its data is the user's): %s", v)
	}
	s.deleteAndWait(ctx, t, &got)
	if v := s.volumes(ctx, t); v != s.bootName {
		t.Errorf("the dropped disk must go with the machine; pool holds %s", v)
	}
}

// testSeedWithoutUserData: cloud-init's NoCloud datasource reads a seed only when it holds
// both meta-data and user-data, so a machine without userData still gets an (empty) user-data.
func (s *machineSuite) testSeedWithoutUserData(ctx context.Context, t *testing.T) {
	m := s.machine(testNamespace, "no-userdata")
	m.Spec.DesiredPowerState = banlieuev1.PoweredOff
	if err := s.env.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	s.waitReason(ctx, t, m, infrav1.ReasonDomainNotRunning)
	pool, err := s.host.StoragePoolLookupByName(ctx, s.pool)
	if err != nil {
		t.Fatal(err)
	}
	seed, err := s.host.StorageVolLookupByName(ctx, pool, seedVolume(m.Spec.DomainName))
	if err != nil {
		t.Fatal(err)
	}
	path := s.downloadSeed(ctx, t, seed)
	// isoinfo lists the Joliet tree: the names cloud-init looks for.
	out, err := exec.Command("isoinfo", "-J", "-f", "-i", path).Output()
	if err != nil {
		t.Fatalf("isoinfo -f: %v", err)
	}
	files := strings.Fields(string(out))
	if !slices.Contains(files, "/meta-data") || !slices.Contains(files, "/user-data") {
		t.Errorf("the seed must hold meta-data and user-data, holds %v", files)
	}
	if user := isoFile(t, path, "/user-data"); user != "" {
		t.Errorf("user-data = %q, want empty", user)
	}
	if meta := isoFile(t, path, "/meta-data"); !strings.Contains(meta, "local-hostname: "+m.Spec.DomainName) {
		t.Errorf("meta-data = %q", meta)
	}
	s.deleteAndWait(ctx, t, m)
}

// testAudit: a domain whose LibvirtMachine is gone is listed with its disks; a live machine's
// domain and a domain banlieue did not create are not. The orphan is made the way a lost object
// leaves one: converged for a machine the API server never had.
func (s *machineSuite) testAudit(ctx context.Context, t *testing.T) {
	live := s.machine(testNamespace, "audit-live")
	live.Spec.DesiredPowerState = banlieuev1.PoweredOff
	if err := s.env.Client.Create(ctx, live); err != nil {
		t.Fatal(err)
	}
	s.waitReason(ctx, t, live, infrav1.ReasonDomainNotRunning)
	foreign, err := s.host.DomainDefineXML(ctx, `<domain type='qemu'><name>audit-foreign</name><memory unit='MiB'>64</memory>`+
		`<os><type arch='x86_64'>hvm</type></os></domain>`, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.host.DomainUndefine(context.Background(), foreign, 0) })

	lost := s.machine(testNamespace, "audit-lost")
	lost.UID = "4e1b7c2a-0000-4000-8000-00000000a0d1"
	lost.Spec.DesiredPowerState = banlieuev1.PoweredOff
	lost.Spec.ProviderID = providerID("lab", "4e1b7c2a-0000-4000-8000-0000000000d1") // as claimIdentity writes it
	// No API object: the record lives in memory only, as the lost machine's did.
	noRecord := volumeRecord{
		add:     func(context.Context, []string) error { return nil },
		drop:    func(context.Context, string) error { return nil },
		refresh: func(context.Context) error { return nil },
	}
	if _, err := converge(ctx, s.host, lost, nil, noRecord, &startWatch{}); err != nil {
		t.Fatal(err)
	}

	orphans, err := Audit(ctx, s.host, s.env.Client, types.NamespacedName{Namespace: testNamespace, Name: "lab"})
	if err != nil {
		t.Fatal(err)
	}
	var found *Orphan
	for i, o := range orphans {
		switch o.Domain {
		case lost.Spec.DomainName:
			found = &orphans[i]
		case live.Spec.DomainName, "audit-foreign":
			t.Errorf("%s is not an orphan: %+v", o.Domain, o)
		}
	}
	if found == nil {
		t.Fatalf("the lost machine's domain is not listed: %+v", orphans)
	}
	if found.Owner.UID != string(lost.UID) || found.Why != "LibvirtMachine banlieue-system/audit-lost does not exist" ||
		len(found.Files) != 2 || !strings.HasSuffix(found.Files[0], "/banlieue-system-audit-lost-os.qcow2") ||
		!strings.HasSuffix(found.Files[1], "/banlieue-system-audit-lost-cidata.iso") {
		t.Errorf("orphan: %+v", *found)
	}

	// Teardown with the record the lost machine would have had removes exactly its leftovers.
	lost.Status.Volumes = machineVolumes(&lost.Spec)
	if err := teardown(ctx, s.host, lost, &startWatch{}); err != nil {
		t.Fatal(err)
	}
	s.deleteAndWait(ctx, t, live)
	if v := s.volumes(ctx, t); v != s.bootName {
		t.Errorf("pool holds %s after both machines went", v)
	}
}

// testHugeLibvirtError: libvirt strings go up to 4 MiB and the API server refuses a condition
// message over 32 768 characters, so an error reported whole would fail the status write and
// leave the old Ready standing. The error here is libvirtd's own: it quotes the name it did not
// find.
func (s *machineSuite) testHugeLibvirtError(ctx context.Context, t *testing.T) {
	_, lookupErr := s.host.DomainLookupByName(ctx, strings.Repeat("n", 1<<20))
	if !libvirt.IsNotFound(lookupErr) {
		t.Fatalf("want libvirtd's not-found error, got %.200v", lookupErr)
	}
	if n := len(lookupErr.Error()); n < 1<<20 {
		// libvirt 7.0 cuts its own messages to about 1 KiB; 9.0 and later send them whole.
		t.Skipf("this libvirtd cut its not-found error to %d bytes; the bound is proven against daemons that do not", n)
	}
	m := s.machine(testNamespace, "huge-error")
	m.Spec.ProviderRef.Name = "no-such-provider" // passes of the reconciler fail before the host
	if err := s.env.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	// write stores the status failedStatus makes of err and returns the API server's answer;
	// the reconciler writes this machine's status too, hence the conflict retries.
	write := func(status func(*infrav1.LibvirtMachine) infrav1.LibvirtMachineStatus) (*infrav1.LibvirtMachine, error) {
		var got infrav1.LibvirtMachine
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := s.env.Client.Get(ctx, client.ObjectKeyFromObject(m), &got); err != nil {
				return err
			}
			got.Status = status(&got)
			return s.env.Client.Status().Update(ctx, &got)
		})
		return &got, err
	}
	err := fmt.Errorf("looking domain up: %w", lookupErr)
	// The unbounded message is what the API server refuses: the bound is what makes it pass.
	if _, werr := write(func(m *infrav1.LibvirtMachine) infrav1.LibvirtMachineStatus {
		st := *m.Status.DeepCopy()
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: banlieuev1.ConditionReady, Status: metav1.ConditionFalse,
			Reason: infrav1.ReasonReconcileFailed, Message: err.Error()})
		return st
	}); !apierrors.IsInvalid(werr) {
		t.Fatalf("an unbounded message must be refused by the API server, got %v", werr)
	}
	got, werr := write(func(m *infrav1.LibvirtMachine) infrav1.LibvirtMachineStatus { return failedStatus(m, err) })
	if werr != nil {
		t.Fatalf("the status write must succeed: %v", werr)
	}
	c := meta.FindStatusCondition(got.Status.Conditions, banlieuev1.ConditionReady)
	if c == nil || len(c.Message) > banlieuev1.MaxConditionMessage || !strings.HasPrefix(c.Message, "looking domain up: ") ||
		!strings.HasSuffix(c.Message, "bytes]") {
		t.Errorf("Ready message (%d bytes) not bounded with a marker: %.80q … %q", len(c.Message), c.Message, c.Message[max(0, len(c.Message)-40):])
	}
	if err := s.env.Client.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
}

// testRefusedCreateLeavesNoRecord: a file in the pool behind libvirt's back makes the create of
// the machine's OS disk fail. The name leaves status.volumes, so the file — someone else's — is
// not taken for the machine's by a later pass or by its teardown.
func (s *machineSuite) testRefusedCreateLeavesNoRecord(ctx context.Context, t *testing.T) {
	m := s.machine(testNamespace, "refused-create")
	path := filepath.Join(s.lab.Dir, "pools", s.pool, diskVolume(m.Spec.DomainName, "os"))
	if err := os.WriteFile(path, []byte("someone else's bytes"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(path) })
	if err := s.env.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	got := s.waitMachine(ctx, t, client.ObjectKeyFromObject(m), 60*time.Second, func(m *infrav1.LibvirtMachine) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, banlieuev1.ConditionReady)
		return c != nil && c.Reason == infrav1.ReasonReconcileFailed && strings.Contains(c.Message, "creating volume "+diskVolume(m.Spec.DomainName, "os"))
	})
	if slices.Contains(got.Status.Volumes, diskVolume(m.Spec.DomainName, "os")) {
		t.Errorf("a name whose create libvirtd refused stays in status.volumes: %v", got.Status.Volumes)
	}
	s.deleteAndWait(ctx, t, got)
	if b, err := os.ReadFile(path); err != nil || string(b) != "someone else's bytes" {
		t.Errorf("the file under the machine's disk name was touched: %q %v", b, err)
	}
}
