package hardening

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/internal/testenv/labhost"
	"banlieue.io/banlieue/pkg/libvirt"
)

// importSize is big enough that uploading random (hole-free) data takes well over a second on
// the lab (about 1.5 s at 650–700 MB/s), so a kill after 64 MiB lands early in the upload; a
// sparse file would upload in a blink.
const importSize = 1 << 30

// TestFaultLibvirtdKilledDuringImport SIGKILLs the lab libvirtd while the real binary's
// `provider libvirt import` streams a 1 GiB random artifact, then restarts it. The import must
// exit non-zero promptly with an error naming the volume, the pool and the broken connection;
// the partial volume it leaves must carry only its in-progress marker; and the next import must
// replace it and finish with the artifact's exact bytes and a marker holding its sha256.
func TestFaultLibvirtdKilledDuringImport(t *testing.T) {
	ctx, s := startLabSuite(t)
	t.Cleanup(func() { s.startLibvirtd(t) }) // whatever happens, leave the lab running
	bin := testenv.Banlieue(t)
	kubeconfig := s.env.Kubeconfig(t)

	src, digest := randomFile(t, importSize)
	const volume, marker = "big.raw", "big.raw.sha256"
	onHost := filepath.Join(s.poolDir, volume)
	importCmd := func(ctx context.Context) *exec.Cmd {
		return exec.CommandContext(ctx, bin, "provider", "libvirt", "import", "--vmimage", "big",
			"--provider", labProvider, "--provider-namespace", s.ns, "--pool", s.pool, "--source", src,
			"--kubeconfig", kubeconfig)
	}

	// 1. Kill libvirtd once the upload has really started: the volume exists and holds data.
	imp := testenv.StartProcess(t, importCmd(ctx))

	const killAt = 64 << 20
	var before int64
	testenv.Eventually(t, 90*time.Second, "64 MiB of "+volume+" written on the host", func() error {
		select {
		case <-imp.Exited():
			t.Fatalf("import exited before the kill (%v):\n%s", imp.Err(), imp.Output())
		default:
		}
		before = allocated(onHost)
		return testenv.Unmet(before >= killAt, strings.TrimSpace(string(imp.Output())))
	})
	s.killLibvirtd(t)
	killed := time.Now()
	select {
	case <-imp.Exited():
	case <-time.After(30 * time.Second):
		t.Fatalf("import still running 30 s after libvirtd was killed:\n%s", imp.Output())
	}
	exitAfter := time.Since(killed)
	written := allocated(onHost)
	msg := string(imp.Output())
	impErr := imp.Err()
	t.Logf("import exited %s after the kill (%v); %d MiB on the host at the kill, %d MiB when it exited:\n%s",
		exitAfter.Round(time.Millisecond), impErr, before>>20, written>>20, msg)
	var exitErr *exec.ExitError
	if !errors.As(impErr, &exitErr) || exitErr.ExitCode() == 0 {
		t.Fatalf("import of a volume whose host died: exit %v, want a non-zero exit status", impErr)
	}
	ep, err := libvirt.ParseEndpoint(s.lab.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	// The volume and pool, and the host whose connection broke (a libvirt *ConnError names it).
	for _, w := range []string{"error: uploading into volume " + volume + " of pool " + s.pool, ep.Address()} {
		if !strings.Contains(msg, w) {
			t.Errorf("import error does not contain %q", w)
		}
	}
	if written >= importSize {
		t.Fatalf("the whole artifact reached the host (%d bytes) before the kill took effect; the fault hit no upload", written)
	}

	// 2. After the restart the partial volume is still there (its own import could not delete it
	// from a dead host), and its marker, written before the volume was created, still says the
	// import of this artifact is in progress: the proof that the next import may replace it.
	s.startLibvirtd(t)
	vols := s.volumes(ctx, t)
	t.Logf("pool after the restart: %v", vols)
	if !slices.Contains(vols, marker) {
		t.Fatalf("marker %s is missing next to a volume cut off at %d of %d bytes", marker, written, importSize)
	}
	if got := strings.TrimSpace(s.readMarker(ctx, t, marker)); got != "importing "+digest {
		t.Fatalf("marker %s of a volume cut off at %d of %d bytes holds %q, want %q", marker, written, importSize, got, "importing "+digest)
	}
	if !slices.Contains(vols, volume) {
		t.Fatalf("partial volume %s not listed after the restart: %v", volume, vols)
	}

	// 3. The next import replaces the partial volume and completes.
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	start := time.Now()
	again, err := importCmd(rctx).CombinedOutput()
	t.Logf("re-import took %s (%v):\n%s", time.Since(start).Round(time.Millisecond), err, again)
	if err != nil {
		t.Fatal("re-import after the restart failed")
	}
	for _, w := range []string{"deleted " + volume + ": no completion marker for " + digest, "imported 1.0 GiB into " + s.pool + "/" + volume} {
		if !strings.Contains(string(again), w) {
			t.Errorf("re-import output lacks %q", w)
		}
	}
	if got := testenv.FileSHA256(t, onHost); "sha256:"+got != digest {
		t.Errorf("volume %s holds sha256:%s, want the artifact's %s", volume, got, digest)
	}
	if got := strings.TrimSpace(s.readMarker(ctx, t, marker)); got != digest {
		t.Errorf("marker %s holds %q, want %q", marker, got, digest)
	}
	if got, want := s.volumes(ctx, t), []string{volume, marker, bootVolume}; !slices.Equal(got, want) {
		t.Errorf("pool holds %v, want %v", got, want)
	}

	// 4. The marker is trusted now: a third run does nothing.
	third, err := importCmd(rctx).CombinedOutput()
	if err != nil || !strings.Contains(string(third), "already holds "+digest+"; nothing to do") {
		t.Errorf("third import (%v): %s", err, third)
	}
}

// randomFile writes size random bytes (no hole for a sparse upload to skip) into the test's
// temporary directory and returns its path and "sha256:<hex>".
func randomFile(t *testing.T, size int64) (string, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "big.raw")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }() // on the t.Fatal path only: the Close below is checked
	h := sha256.New()
	if _, err := io.CopyN(io.MultiWriter(f, h), rand.Reader, size); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path, "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// allocated is how many bytes of path are allocated on disk: for random data written into a
// sparse volume, how much of the upload has reached the host. 0 when the file is absent.
func allocated(path string) int64 {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0
	}
	return st.Blocks * 512
}

// readMarker downloads a marker volume of the run's pool through libvirt, as the import reads it.
func (s *labSuite) readMarker(ctx context.Context, t *testing.T, name string) string {
	t.Helper()
	pool, err := s.host.StoragePoolLookupByName(ctx, s.pool)
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.host.StorageVolLookupByName(ctx, pool, name)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := s.host.StorageVolDownload(ctx, v, &b, nil); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// idleProvider is the Provider TestFaultLibvirtdIdle registers; the provider role serves only it.
const idleProvider = "idle"

// TestFaultLibvirtdIdle runs the real binary's `provider libvirt` and `controller` roles with
// their defaults (keepalive 5 s × 5, Provider probed every 30 s) against the lab libvirtd, with
// one realised powered-off VM, and then:
//
//   - freezes libvirtd with SIGSTOP: its TCP connections stay open but nothing answers, so only
//     keepalive can tell. Within the keepalive window (25 s, plus slack) the Provider must turn
//     Ready=False (ConnectFailed, naming keepalive) and a VM created at that moment must fail its
//     machine pass instead of hanging. After SIGCONT everything converges: the Provider is Ready
//     again and the frozen VM is realised;
//   - kills libvirtd (SIGKILL) while idle: the Provider says so at once; after a restart it is
//     Ready again, and a VM created next is realised.
//
// Throughout: exactly one domain per machine, with the UUID its status reports (the VMs that
// existed before a fault keep theirs), and after deletion no domain, no volume and no object held
// by a finalizer. One provider process lives through both faults: nothing restarts it here, so
// the final teardown also proves it survived.
//
// libvirtd is frozen for about half a minute: other suites using the lab meanwhile stall too
// (they take /tmp/banlieue-lab.lock). A detached watchdog sends SIGCONT after 150 s even if this
// test process dies.
func TestFaultLibvirtdIdle(t *testing.T) {
	lab := testenv.RequireLibvirtLab(t)
	env := testenv.Start(t)
	ctx := context.Background()
	run := testenv.RunID()
	// The roles watch namespace ns (startRole's --namespace); the pool, class and image are this
	// run's own, as in startLabSuite.
	s := &labSuite{env: env, c: env.Client, lab: lab, root: t, run: run, ns: ns,
		pool: "hd-" + run, class: "hd-" + run + "-small", image: "hd-" + run + "-tiny"}
	s.host = labhost.Dial(t, lab)
	s.createPool(ctx, t)
	prefix := ns + "-idle-" + run
	t.Cleanup(func() { labhost.RemoveDomains(context.Background(), s.host, prefix) })
	s.createClassAndImage(ctx, t)
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "lab-creds", Namespace: ns},
			Data: map[string][]byte{"tls.crt": lab.Read(t, "clientcert.pem"), "tls.key": lab.Read(t, "clientkey.pem")}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "lab-ca", Namespace: ns},
			Data: map[string]string{"ca.crt": string(lab.Read(t, "cacert.pem"))}},
		&banlieuev1.Provider{
			ObjectMeta: metav1.ObjectMeta{Name: idleProvider, Namespace: ns},
			Spec: banlieuev1.ProviderSpec{
				ProviderClassRef: banlieuev1.LocalObjectReference{Name: "libvirt"},
				Connection: banlieuev1.ProviderConnection{
					Endpoint:       lab.Endpoint,
					CredentialsRef: banlieuev1.LocalObjectReference{Name: "lab-creds"},
					CABundle:       &banlieuev1.CABundleSource{ConfigMapRef: &banlieuev1.KeySelector{Name: "lab-ca"}},
				},
				Capabilities: banlieuev1.ProviderCapabilities{StorageClasses: []banlieuev1.StorageClassMapping{
					{Name: "standard", Target: map[string]string{"pool": s.pool}},
				}},
			},
		},
	} {
		if err := s.c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	bin := testenv.Banlieue(t)
	kubeconfig := env.Kubeconfig(t)
	provider := startRole(t, bin, kubeconfig, "provider", "provider", "libvirt", "--provider-name", idleProvider, "--import-service-account", idleProvider+"-import")
	controller := startRole(t, bin, kubeconfig, "controller", "controller")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("provider output:\n%s", provider.Output())
			t.Logf("controller output:\n%s", controller.Output())
		}
	})

	s.waitProvider(ctx, t, metav1.ConditionTrue, banlieuev1.ReasonReconciled, 60*time.Second)
	vmA := s.vm(ns, "idle-"+run+"-a", banlieuev1.PoweredOff)
	if err := s.c.Create(ctx, vmA); err != nil {
		t.Fatal(err)
	}
	uuidA := s.waitRealised(ctx, t, vmA, 60*time.Second)

	// keepaliveWindow is pkg/libvirt's default: 5 silent intervals of 5 s.
	const keepaliveWindow = 25 * time.Second

	// (a) Frozen: SIGSTOP.
	vmB := s.vm(ns, "idle-"+run+"-b", banlieuev1.PoweredOff)
	t.Run("SIGSTOP while idle", func(t *testing.T) {
		pid := s.lab.DaemonPID(t)
		s.freeze(t, pid)
		stopped := time.Now()
		if err := s.c.Create(ctx, vmB); err != nil {
			t.Fatal(err)
		}
		// Both must notice, each on its own: the Provider through its watched connection, the
		// machine pass through its pending call.
		var (
			providerAt, machineAt   time.Duration
			providerMsg, machineMsg string
		)
		testenv.Eventually(t, keepaliveWindow+15*time.Second, "Provider ConnectFailed and machine "+vmB.Name+" ReconcileFailed", func() error {
			pc := s.providerReady(ctx, t)
			if providerAt == 0 && pc.Status == metav1.ConditionFalse && pc.Reason == banlieuev1.ReasonConnectFailed {
				providerAt, providerMsg = time.Since(stopped), pc.Message
			}
			mc := s.machineReady(ctx, t, vmB)
			if machineAt == 0 && mc.Status == metav1.ConditionFalse && mc.Reason == infrav1.ReasonReconcileFailed {
				machineAt, machineMsg = time.Since(stopped), mc.Message
			}
			return testenv.Unmet(providerAt != 0 && machineAt != 0, fmt.Sprintf("Provider %s %s; machine %s %s", pc.Status, pc.Reason, mc.Status, mc.Reason))
		})
		t.Logf("frozen libvirtd: Provider ConnectFailed after %s: %q", providerAt.Round(time.Millisecond), providerMsg)
		t.Logf("frozen libvirtd: machine %s ReconcileFailed after %s: %q", vmB.Name, machineAt.Round(time.Millisecond), machineMsg)
		// Keepalive, not a call or dial timeout (30 s each), must be what noticed.
		for what, msg := range map[string]string{"Provider": providerMsg, "machine": machineMsg} {
			if !strings.Contains(msg, "keepalive") {
				t.Errorf("%s message %q does not name keepalive", what, msg)
			}
		}
		if limit := keepaliveWindow + 8*time.Second; providerAt > limit || machineAt > limit {
			t.Errorf("noticed the frozen libvirtd after %s (Provider) and %s (machine), more than the keepalive window plus slack (%s)",
				providerAt, machineAt, limit)
		}

		s.thaw(t, pid)
		thawed := time.Now()
		s.waitProvider(ctx, t, metav1.ConditionTrue, banlieuev1.ReasonReconciled, 60*time.Second)
		providerBack := time.Since(thawed)
		s.waitRealised(ctx, t, vmB, 60*time.Second)
		t.Logf("after SIGCONT: Provider Ready after %s, %s realised after %s", providerBack.Round(time.Millisecond),
			vmB.Name, time.Since(thawed).Round(time.Millisecond))
		s.checkOneDomain(ctx, t, vmA)
		s.checkOneDomain(ctx, t, vmB)
		s.checkUUID(ctx, t, vmA, uuidA)
	})

	// (b) Crashed: SIGKILL and restart while idle.
	vmC := s.vm(ns, "idle-"+run+"-c", banlieuev1.PoweredOff)
	t.Run("SIGKILL while idle", func(t *testing.T) {
		uuidB := s.waitRealised(ctx, t, vmB, 10*time.Second)
		s.killLibvirtd(t)
		killed := time.Now()
		msg := s.waitProvider(ctx, t, metav1.ConditionFalse, banlieuev1.ReasonConnectFailed, 10*time.Second)
		t.Logf("killed libvirtd: Provider ConnectFailed after %s: %q", time.Since(killed).Round(time.Millisecond), msg)
		time.Sleep(time.Second) // as after a crash: the daemon is away for a moment
		s.startLibvirtd(t)
		restarted := time.Now()
		s.waitProvider(ctx, t, metav1.ConditionTrue, banlieuev1.ReasonReconciled, 30*time.Second)
		providerBack := time.Since(restarted)
		if err := s.c.Create(ctx, vmC); err != nil {
			t.Fatal(err)
		}
		created := time.Now()
		s.waitRealised(ctx, t, vmC, 30*time.Second)
		t.Logf("libvirtd back %s after the kill; Provider Ready %s after that; %s realised %s after its creation",
			restarted.Sub(killed).Round(time.Millisecond), providerBack.Round(time.Millisecond), vmC.Name,
			time.Since(created).Round(time.Millisecond))
		for _, vm := range []*banlieuev1.VirtualMachine{vmA, vmB, vmC} {
			s.checkOneDomain(ctx, t, vm)
		}
		s.checkUUID(ctx, t, vmA, uuidA)
		s.checkUUID(ctx, t, vmB, uuidB)
	})

	for _, vm := range []*banlieuev1.VirtualMachine{vmA, vmB, vmC} {
		if err := s.c.Delete(ctx, vm); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
	// The three are torn down side by side (the provider runs several workers), so the pool is
	// looked at once all three are gone: it holds only the boot image only then.
	for _, vm := range []*banlieuev1.VirtualMachine{vmA, vmB, vmC} {
		s.deleteVM(ctx, t, vm, 60*time.Second)
	}
	for _, vm := range []*banlieuev1.VirtualMachine{vmA, vmB, vmC} {
		s.checkNothingLeft(ctx, t, ns+"-"+vm.Name)
	}
}

// providerReady is the idle Provider's Ready condition (empty while there is none).
func (s *labSuite) providerReady(ctx context.Context, t *testing.T) metav1.Condition {
	t.Helper()
	var p banlieuev1.Provider
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: idleProvider}, &p); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(p.Status.Conditions, banlieuev1.ConditionReady); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// machineReady is vm's LibvirtMachine's Ready condition (empty while there is none or no machine).
func (s *labSuite) machineReady(ctx context.Context, t *testing.T, vm *banlieuev1.VirtualMachine) metav1.Condition {
	t.Helper()
	m, err := s.getMachine(ctx, vm)
	if client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(m.Status.Conditions, banlieuev1.ConditionReady); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// waitProvider waits for the idle Provider's Ready condition and returns its message.
func (s *labSuite) waitProvider(ctx context.Context, t *testing.T, status metav1.ConditionStatus, reason string, timeout time.Duration) string {
	t.Helper()
	var c metav1.Condition
	testenv.Eventually(t, timeout, "Provider Ready="+string(status)+" "+reason, func() error {
		c = s.providerReady(ctx, t)
		return testenv.Unmet(c.Status == status && c.Reason == reason, fmt.Sprintf("Ready=%s %s %q", c.Status, c.Reason, c.Message))
	})
	return c.Message
}

// waitRealised waits until vm's powered-off machine has a domain and returns the domain's UUID.
func (s *labSuite) waitRealised(ctx context.Context, t *testing.T, vm *banlieuev1.VirtualMachine, timeout time.Duration) string {
	t.Helper()
	var uuid string
	testenv.Eventually(t, timeout, "LibvirtMachine "+vm.Name+" realised, powered off", func() error {
		m, err := s.getMachine(ctx, vm)
		if err != nil {
			return testenv.Unmet(false, err.Error())
		}
		uuid = m.Status.DomainUUID
		return testenv.Unmet(uuid != "" && m.Status.ObservedPowerState == banlieuev1.PoweredOff, condition(m.Status.Conditions, banlieuev1.ConditionReady))
	})
	return uuid
}

// checkUUID: the machine still reports the domain it had, so the fault made no second definition.
func (s *labSuite) checkUUID(ctx context.Context, t *testing.T, vm *banlieuev1.VirtualMachine, want string) {
	t.Helper()
	m, err := s.getMachine(ctx, vm)
	if err != nil {
		t.Fatal(err)
	}
	if m.Status.DomainUUID != want {
		t.Errorf("%s: status.domainUuid %s, was %s before the fault", vm.Name, m.Status.DomainUUID, want)
	}
}

// freeze sends SIGSTOP to libvirtd. The lab is shared, so it must never stay frozen: a detached
// watchdog (its own session, so it outlives a test binary killed by -timeout) sends SIGCONT after
// 150 s, and a cleanup thaws it and checks it answers whatever the test's outcome.
func (s *labSuite) freeze(t *testing.T, pid int) {
	t.Helper()
	watchdog := exec.Command("sh", "-c", fmt.Sprintf("sleep 150; kill -CONT %d", pid))
	watchdog.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := watchdog.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(pid, syscall.SIGCONT)
		_ = syscall.Kill(-watchdog.Process.Pid, syscall.SIGKILL) // its group: sh and its sleep
		_ = watchdog.Wait()
		s.startLibvirtd(t)
	})
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP libvirtd %d: %v", pid, err)
	}
}

// thaw sends SIGCONT and redials the suite's own connection, which keepalive closed meanwhile.
func (s *labSuite) thaw(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT libvirtd %d: %v", pid, err)
	}
	s.host = dialLabUntil(t, s.root, s.lab)
}
