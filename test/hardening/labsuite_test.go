package hardening

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/controller"
	providerlibvirt "banlieue.io/banlieue/internal/provider/libvirt"
	"banlieue.io/banlieue/internal/provider/libvirt/hostconn"
	"banlieue.io/banlieue/internal/ssa"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/internal/testenv/labhost"
	"banlieue.io/banlieue/pkg/libvirt"
)

// The suite plays the Provider controller: it writes the Provider's status (one failure domain
// offering every mapped storage class) under the provider's field manager, so a storage class
// whose pool the host lacks still reaches the LibvirtMachine, as it does when a pool is removed
// after the Provider was probed.
const (
	providerManager = banlieuev1.FieldManagerProviderLibvirt
	labProvider     = "lab"
	bootVolume      = "tiny.raw"
	// weirdPool is a pool name full of XML metacharacters; no such pool exists on the host.
	weirdPool = `po<o>l&'"`
)

// labSuite is envtest, the controller role and the libvirt machine controller in one manager,
// and the lab libvirtd with a pool of this run's own (the lab is shared with other suites).
type labSuite struct {
	env     *testenv.Env
	c       client.Client
	lab     testenv.LibvirtLab
	host    *libvirt.Client
	run     string
	ns      string
	pool    string
	poolDir string
	class   string
	image   string
	// root is the test that started the suite: clients redialled from a subtest live as long as it.
	root *testing.T
	// imageRows are the VMImage's perProvider rows, one per namespace set up.
	imageRows []banlieuev1.ProviderImageStatus
}

func startLabSuite(t *testing.T) (context.Context, *labSuite) {
	t.Helper()
	lab := testenv.RequireLibvirtLab(t)
	env := testenv.Start(t)
	s := &labSuite{env: env, c: env.Client, lab: lab, root: t}
	testenv.SetLogger(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s.host = labhost.Dial(t, lab)

	s.run = testenv.RunID()
	s.ns = "hd-" + s.run
	s.pool = "hd-" + s.run
	s.class = "hd-" + s.run + "-small"
	s.image = "hd-" + s.run + "-tiny"
	s.createPool(ctx, t)
	// Registered after the pool's cleanup, so it runs first: whatever a failed run left defined
	// under this run's prefix goes before the pool does.
	t.Cleanup(func() { labhost.RemoveDomains(context.Background(), s.host, "hd-"+s.run) })

	mgr := env.NewManager(t)
	conns := hostconn.NewConnections()
	t.Cleanup(conns.Close)
	if err := controller.Setup(mgr, controller.Options{}); err != nil {
		t.Fatal(err)
	}
	r := &providerlibvirt.MachineReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Connections: conns, Resync: 2 * time.Second}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)

	s.createClassAndImage(ctx, t)
	s.setupNamespace(ctx, t, s.ns)
	return ctx, s
}

// dialLabUntil dials the lab, failing t, and closes the client when owner ends.
func dialLabUntil(t, owner *testing.T, lab testenv.LibvirtLab) *libvirt.Client {
	t.Helper()
	d := labhost.Dialer(t, lab)
	var (
		c   *libvirt.Client
		err error
	)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err = d.Dial(ctx)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dialling the lab host: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	owner.Cleanup(func() { _ = c.Close() })
	return c
}

func (s *labSuite) createPool(ctx context.Context, t *testing.T) {
	t.Helper()
	s.poolDir = filepath.Join(s.lab.Dir, "pools", s.pool)
	pool := labhost.CreatePool(ctx, t, s.host, s.lab, s.pool)
	if _, err := s.host.StorageVolCreateXML(ctx, pool, fmt.Sprintf(`<volume type='file'><name>%s</name>`+
		`<capacity unit='bytes'>%d</capacity><target><format type='raw'/></target></volume>`, bootVolume, 1<<20), 0); err != nil {
		t.Fatal(err)
	}
}

func (s *labSuite) createClassAndImage(ctx context.Context, t *testing.T) {
	t.Helper()
	class := &banlieuev1.VMClass{
		ObjectMeta: metav1.ObjectMeta{Name: s.class},
		Spec: banlieuev1.VMClassSpec{
			Firmware: banlieuev1.FirmwareBIOS,
			Hardware: banlieuev1.ClassHardware{CPUs: 1, MemoryMiB: 128,
				Disks: []banlieuev1.ClassDisk{{Name: "os", SizeGiB: 1, StorageClass: "standard"}}},
			Network: banlieuev1.ClassNetwork{Interfaces: []banlieuev1.ClassInterface{}},
		},
	}
	weird := class.DeepCopy()
	weird.Name = s.class + "-weird"
	weird.Spec.Hardware.Disks[0].StorageClass = "weird"
	img := &banlieuev1.VMImage{
		ObjectMeta: metav1.ObjectMeta{Name: s.image},
		Spec: banlieuev1.VMImageSpec{
			OSFamily: "linux", OSDistribution: "debian", OSVersion: "12", Architecture: "amd64",
			Sources:  []banlieuev1.ImageSource{{ProviderClass: "libvirt", Kind: banlieuev1.SourceBackingFile, Ref: "/images/" + bootVolume}},
			Template: &banlieuev1.VMImageTemplate{InstallMode: banlieuev1.InstallImmediate},
		},
	}
	for _, o := range []client.Object{class, weird, img} {
		if err := s.c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
}

// setupNamespace creates ns with the lab's credentials, a Provider "lab" mapping standard to this
// run's pool and weird to weirdPool, its status as the Provider controller would write it, and
// the VMImage's row for it.
func (s *labSuite) setupNamespace(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	p := s.createProvider(ctx, t, ns, []banlieuev1.StorageClassMapping{
		{Name: "standard", Target: map[string]string{"pool": s.pool}},
		{Name: "weird", Target: map[string]string{"pool": weirdPool}},
	})
	status := banlieuev1.ProviderStatus{
		FailureDomains: []banlieuev1.FailureDomain{{
			Name:   labProvider,
			Labels: map[string]string{"name": labProvider},
			Attributes: banlieuev1.FailureDomainAttributes{
				AvailableStorageClasses: []string{"standard", "weird"},
				Raw:                     map[string]string{"domainType": "qemu"},
			},
		}},
		Conditions: []metav1.Condition{{Type: banlieuev1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Reconciled", LastTransitionTime: metav1.Now()}},
	}
	if err := ssa.ApplyStatus(ctx, s.c, p, &status, providerManager); err != nil {
		t.Fatal(err)
	}
	// One row per Provider; the provider's manager owns them all, so send every namespace's.
	s.imageRows = append(s.imageRows, banlieuev1.ProviderImageStatus{ProviderName: labProvider, ProviderNamespace: ns,
		Ready: true, Reason: "Reconciled", ResolvedRef: bootVolume})
	img := &banlieuev1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: s.image}}
	if err := ssa.ApplyStatus(ctx, s.c, img, &banlieuev1.VMImageStatus{PerProvider: s.imageRows}, providerManager); err != nil {
		t.Fatal(err)
	}
}

// createProvider creates ns, the lab's credentials Secret and CA ConfigMap in it, and a Provider
// "lab" offering classes; its status is left to whoever plays the Provider controller.
func (s *labSuite) createProvider(ctx context.Context, t *testing.T, ns string, classes []banlieuev1.StorageClassMapping) *banlieuev1.Provider {
	t.Helper()
	s.env.CreateLabNamespace(ctx, t, s.lab, ns, "lab-creds", "lab-ca")
	p := s.lab.Provider(ns, labProvider, "lab-creds", "lab-ca", banlieuev1.ProviderCapabilities{StorageClasses: classes})
	s.env.Create(ctx, t, p)
	return p
}

func (s *labSuite) vm(ns, name string, power banlieuev1.PowerState) *banlieuev1.VirtualMachine {
	return &banlieuev1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: banlieuev1.VirtualMachineSpec{
			ClassRef:          banlieuev1.LocalObjectReference{Name: s.class},
			ImageRef:          banlieuev1.LocalObjectReference{Name: s.image},
			DesiredPowerState: power,
			MigrationPolicy:   "never",
		},
	}
}

func condition(conds []metav1.Condition, typ string) string {
	c := meta.FindStatusCondition(conds, typ)
	if c == nil {
		return typ + "=<none>"
	}
	return fmt.Sprintf("%s=%s %s %q", typ, c.Status, c.Reason, c.Message)
}

func (s *labSuite) getVM(ctx context.Context, vm *banlieuev1.VirtualMachine) (*banlieuev1.VirtualMachine, error) {
	var got banlieuev1.VirtualMachine
	err := s.c.Get(ctx, client.ObjectKeyFromObject(vm), &got)
	return &got, err
}

func (s *labSuite) getMachine(ctx context.Context, vm *banlieuev1.VirtualMachine) (*infrav1.LibvirtMachine, error) {
	var got infrav1.LibvirtMachine
	err := s.c.Get(ctx, client.ObjectKeyFromObject(vm), &got)
	return &got, err
}

// deleteVM deletes vm and waits until it and its machine are gone (finalizers cleared).
func (s *labSuite) deleteVM(ctx context.Context, t *testing.T, vm *banlieuev1.VirtualMachine, timeout time.Duration) {
	t.Helper()
	if err := s.c.Delete(ctx, vm); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, timeout, "VirtualMachine "+vm.Name+" and its LibvirtMachine gone", func() error {
		_, errVM := s.getVM(ctx, vm)
		m, errM := s.getMachine(ctx, vm)
		return testenv.Unmet(apierrors.IsNotFound(errVM) && apierrors.IsNotFound(errM),
			fmt.Sprintf("vm: %v; machine: %v %v %s", errVM, errM, m.Finalizers, condition(m.Status.Conditions, banlieuev1.ConditionReady)))
	})
}

// volumes lists the names in this run's pool, sorted.
func (s *labSuite) volumes(ctx context.Context, t *testing.T) []string {
	t.Helper()
	return labhost.VolumeNames(ctx, t, s.host, s.pool)
}

// volumesOf are the pool's volumes named after domName.
func (s *labSuite) volumesOf(ctx context.Context, t *testing.T, domName string) []string {
	t.Helper()
	var mine []string
	for _, v := range s.volumes(ctx, t) {
		if strings.HasPrefix(v, domName+"-") {
			mine = append(mine, v)
		}
	}
	return mine
}

// domainsNamed lists the host's domains whose name starts with prefix.
func (s *labSuite) domainsNamed(ctx context.Context, t *testing.T, prefix string) []libvirt.Domain {
	t.Helper()
	doms, err := s.host.ListAllDomains(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []libvirt.Domain
	for _, d := range doms {
		if strings.HasPrefix(d.Name, prefix) {
			out = append(out, d)
		}
	}
	return out
}

// killLibvirtd is a crash: SIGKILL to the lab daemon.
func (s *labSuite) killLibvirtd(t *testing.T) {
	t.Helper()
	pid := s.lab.DaemonPID(t)
	proc, err := os.FindProcess(pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := proc.Kill(); err != nil {
		t.Fatalf("kill -9 libvirtd %d: %v", pid, err)
	}
}

// libvirtdCrashWindow is how long the lab's libvirtd is watched after a client of it was killed:
// libvirt 9.0 crashed 4 ms after it read such a client's end (docs/reliability.md, B11).
const libvirtdCrashWindow = 300 * time.Millisecond

// restartCrashedLibvirtd watches the lab's libvirtd for libvirtdCrashWindow and, when it died,
// starts it again as a Debian host's systemd does (Restart=on-failure) and redials, saying so;
// it reports whether it had to. A crash then costs the host a restart, not the rest of the suite.
func (s *labSuite) restartCrashedLibvirtd(t *testing.T) bool {
	t.Helper()
	pid := s.lab.DaemonPID(t)
	for deadline := time.Now().Add(libvirtdCrashWindow); testenv.ProcessAlive(pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	tail, _ := os.ReadFile(filepath.Join(s.lab.Dir, "log", "libvirtd.log"))
	t.Logf("libvirtd %d died after a client of it was killed (docs/reliability.md, B11); restarting it. Its log ends:\n%s",
		pid, lastLines(tail, 4))
	s.startLibvirtd(t)
	return true
}

// startLibvirtd runs hack/libvirt-lab.sh start (a no-op when the daemon runs) and redials.
func (s *labSuite) startLibvirtd(t *testing.T) {
	t.Helper()
	s.lab.Script(t, "start")
	s.host = dialLabUntil(t, s.root, s.lab)
}
