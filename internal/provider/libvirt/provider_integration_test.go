package libvirt

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/provider/libvirt/hostconn"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/internal/testenv/labhost"
	"banlieue.io/banlieue/pkg/libvirt"
)

const testNamespace = "banlieue-system"

// providerSuite is a real API server, the Provider controller in a manager, and the lab libvirtd.
type providerSuite struct {
	env  *testenv.Env
	lab  testenv.LibvirtLab
	host *libvirt.Client
}

// startLabSuite starts a real API server, a manager running what setup registers, and dials the
// lab libvirtd; it creates the namespace and the guide's credentials Secret and CA ConfigMap.
func startLabSuite(t *testing.T, setup func(ctrl.Manager, *hostconn.Connections) error) (context.Context, *providerSuite) {
	lab := testenv.RequireLibvirtLab(t)
	return startLabSuiteOn(t, lab, testenv.Start(t), setup)
}

// startLabSuiteOn is startLabSuite on an API server the caller started.
func startLabSuiteOn(t *testing.T, lab testenv.LibvirtLab, env *testenv.Env, setup func(ctrl.Manager, *hostconn.Connections) error) (context.Context, *providerSuite) {
	testenv.SetLogger(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	s := &providerSuite{env: env, lab: lab}
	s.host = s.dialHost(t)

	mgr := env.NewManager(t)
	conns := hostconn.NewConnections()
	t.Cleanup(conns.Close)
	if err := setup(mgr, conns); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)

	env.CreateLabNamespace(ctx, t, lab, testNamespace, "libvirt-edge-creds", "libvirt-edge-ca")
	return ctx, s
}

func TestProviderAgainstLabHost(t *testing.T) {
	ctx, s := startLabSuite(t, func(mgr ctrl.Manager, conns *hostconn.Connections) error {
		r := &ProviderReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Connections: conns, Resync: time.Second}
		return r.SetupWithManager(mgr)
	})
	s.ensureGuideHost(ctx, t)

	t.Run("guide provider narrows to what the host has", func(t *testing.T) { s.testNarrowing(ctx, t) })
	t.Run("unsupported schemes are ConnectFailed with the guide's message", func(t *testing.T) { s.testSchemes(ctx, t) })
	t.Run("insecureSkipTLSVerify is refused", func(t *testing.T) { s.testInsecureRefused(ctx, t) })
	t.Run("missing key is CredentialsUnavailable naming it", func(t *testing.T) { s.testMissingKey(ctx, t) })
	t.Run("rotated credentials are used on the next reconcile", func(t *testing.T) { s.testRotation(ctx, t) })
	t.Run("libvirtd down clears failure domains; back up recovers", func(t *testing.T) { s.testDaemonRestart(ctx, t) })
}

func (s *providerSuite) dialHost(t *testing.T) *libvirt.Client {
	t.Helper()
	return labhost.Dial(t, s.lab)
}

// ensureGuideHost gives the lab host the guide's pool "default" and network "br-prod", and
// makes sure it has no "nvme-pool". The network is defined, not started: a probe lists inactive
// networks too, and starting one would create a bridge on this machine.
func (s *providerSuite) ensureGuideHost(ctx context.Context, t *testing.T) {
	t.Helper()
	if _, err := s.host.StoragePoolLookupByName(ctx, "default"); libvirt.IsNotFound(err) {
		dir := filepath.Join(s.lab.Dir, "pools", "default")
		if err := os.MkdirAll(dir, 0o711); err != nil {
			t.Fatal(err)
		}
		pool, err := s.host.StoragePoolDefineXML(ctx, dirPoolXML("default", dir), 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.host.StoragePoolCreate(ctx, pool, 0); err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
	if _, err := s.host.NetworkLookupByName(ctx, "br-prod"); libvirt.IsNotFound(err) {
		if _, err := s.host.NetworkDefineXML(ctx, `<network><name>br-prod</name><bridge name='virbr-prod'/></network>`); err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
	s.removeNVMePool(ctx, t)
}

func (s *providerSuite) removeNVMePool(ctx context.Context, t *testing.T) {
	t.Helper()
	pool, err := s.host.StoragePoolLookupByName(ctx, "nvme-pool")
	if libvirt.IsNotFound(err) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := s.host.StoragePoolDestroy(ctx, pool); err != nil {
		t.Fatal(err)
	}
}

func dirPoolXML(name, dir string) string {
	return fmt.Sprintf(`<pool type='dir'><name>%s</name><target><path>%s</path></target></pool>`, name, dir)
}

func (s *providerSuite) createCredentials(ctx context.Context, t *testing.T, name string, cert, key []byte) {
	t.Helper()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace},
		Data:       map[string][]byte{"tls.crt": cert, "tls.key": key},
	}
	if err := s.env.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
}

// guideProvider is the Provider of the guide's step 3 (and examples/02), pointed at the lab.
func (s *providerSuite) guideProvider(name string) *banlieuev1.Provider {
	p := s.lab.Provider(testNamespace, name, "libvirt-edge-creds", "libvirt-edge-ca", guideCapabilities)
	p.Labels = map[string]string{"site": "lab"}
	return p
}

// waitFor polls the Provider until ok accepts it, failing with the last status seen.
func (s *providerSuite) waitFor(ctx context.Context, t *testing.T, name string, timeout time.Duration,
	ok func(*banlieuev1.Provider) bool) *banlieuev1.Provider {
	t.Helper()
	var p banlieuev1.Provider
	testenv.Eventually(t, timeout, "Provider "+name+" reaching the expected status", func() error {
		err := s.env.Client.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: name}, &p)
		return testenv.Unmet(err == nil && ok(&p), fmt.Sprintf("status %+v (%v)", p.Status, err))
	})
	return &p
}

func hasCondition(p *banlieuev1.Provider, typ string, st metav1.ConditionStatus, reason string) bool {
	c := meta.FindStatusCondition(p.Status.Conditions, typ)
	return c != nil && c.Status == st && c.Reason == reason && c.ObservedGeneration == p.Generation
}

func (s *providerSuite) testNarrowing(ctx context.Context, t *testing.T) {
	p := s.guideProvider("libvirt-edge-host-7")
	if err := s.env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	got := s.waitFor(ctx, t, p.Name, 30*time.Second, func(p *banlieuev1.Provider) bool {
		return hasCondition(p, banlieuev1.ConditionReady, metav1.ConditionFalse, banlieuev1.ReasonCapabilitiesIncomplete)
	})
	ready := meta.FindStatusCondition(got.Status.Conditions, banlieuev1.ConditionReady)
	if !strings.Contains(ready.Message, "nvme-pool") || !strings.Contains(ready.Message, "storageClass gold") {
		t.Errorf("CapabilitiesIncomplete message must name the missing pool: %q", ready.Message)
	}
	if !hasCondition(got, banlieuev1.ConditionProviderReachable, metav1.ConditionTrue, banlieuev1.ReasonReconciled) {
		t.Errorf("ProviderReachable must be True when the host answers: %+v", got.Status.Conditions)
	}
	if len(got.Status.FailureDomains) != 1 {
		t.Fatalf("want exactly one failure domain, got %+v", got.Status.FailureDomains)
	}
	fd := got.Status.FailureDomains[0]
	if fd.Name != p.Name || fd.Labels["name"] != p.Name || fd.Labels["site"] != "lab" {
		t.Errorf("failure domain name/labels: %+v", fd)
	}
	if strings.Join(fd.Attributes.AvailableStorageClasses, ",") != "standard" ||
		strings.Join(fd.Attributes.AvailableNetworkClasses, ",") != "prod" {
		t.Errorf("failure domain must list only standard and prod: %+v", fd.Attributes)
	}
	if dt := fd.Attributes.Raw["domainType"]; dt != "qemu" && dt != "kvm" {
		t.Errorf("raw.domainType = %q", dt)
	}
	if !strings.Contains(","+fd.Attributes.Raw["pools"]+",", ",default,") || !strings.Contains(fd.Attributes.Raw["networks"], "br-prod") {
		t.Errorf("raw pools/networks: %+v", fd.Attributes.Raw)
	}
	// The host's size from NODE_GET_INFO, and the size of the mapped pool found (default; the
	// missing nvme-pool has none).
	if c := fd.Capacity; c == nil || c.CPUs < 1 || c.MemoryMiB < 64 || len(c.Pools) != 1 || c.Pools[0].Name != "default" ||
		c.Pools[0].AvailableGiB > c.Pools[0].CapacityGiB {
		t.Errorf("failure domain capacity: %+v", fd.Capacity)
	}

	// The administrator creates the pool on the host; nothing touches the Provider.
	dir := filepath.Join(s.lab.Dir, "pools", "nvme-pool")
	if err := os.MkdirAll(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	if _, err := s.host.StoragePoolCreateXML(ctx, dirPoolXML("nvme-pool", dir), 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.removeNVMePool(context.Background(), t) })
	got = s.waitFor(ctx, t, p.Name, 30*time.Second, func(p *banlieuev1.Provider) bool {
		return hasCondition(p, banlieuev1.ConditionReady, metav1.ConditionTrue, banlieuev1.ReasonReconciled)
	})
	if strings.Join(got.Status.FailureDomains[0].Attributes.AvailableStorageClasses, ",") != "gold,standard" {
		t.Errorf("after creating nvme-pool: %+v", got.Status.FailureDomains[0].Attributes)
	}
}

func (s *providerSuite) testSchemes(ctx context.Context, t *testing.T) {
	for _, scheme := range []string{"qemu+ssh", "qemu+tcp"} {
		p := s.guideProvider("scheme-" + strings.ReplaceAll(scheme, "+", "-"))
		p.Spec.Connection.Endpoint = scheme + "://127.0.0.1/system"
		if err := s.env.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		got := s.waitFor(ctx, t, p.Name, 30*time.Second, func(p *banlieuev1.Provider) bool {
			return hasCondition(p, banlieuev1.ConditionReady, metav1.ConditionFalse, banlieuev1.ReasonConnectFailed)
		})
		want := fmt.Sprintf("scheme %q is not supported", scheme)
		for _, typ := range []string{banlieuev1.ConditionReady, banlieuev1.ConditionProviderReachable} {
			if c := meta.FindStatusCondition(got.Status.Conditions, typ); c == nil || !strings.Contains(c.Message, want) {
				t.Errorf("%s: %s message must contain %q: %+v", scheme, typ, want, c)
			}
		}
		if len(got.Status.FailureDomains) != 0 {
			t.Errorf("%s: failure domains must be empty: %+v", scheme, got.Status.FailureDomains)
		}
		// Not retried on the short timer: the condition's transition time stays put.
		first := meta.FindStatusCondition(got.Status.Conditions, banlieuev1.ConditionReady).LastTransitionTime
		time.Sleep(3 * time.Second)
		again := s.waitFor(ctx, t, p.Name, time.Second, func(*banlieuev1.Provider) bool { return true })
		if !meta.FindStatusCondition(again.Status.Conditions, banlieuev1.ConditionReady).LastTransitionTime.Equal(&first) {
			t.Errorf("%s: condition flapped", scheme)
		}
	}
}

func (s *providerSuite) testInsecureRefused(ctx context.Context, t *testing.T) {
	p := s.guideProvider("insecure")
	p.Spec.Connection.InsecureSkipTLSVerify = true
	if err := s.env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	got := s.waitFor(ctx, t, p.Name, 30*time.Second, func(p *banlieuev1.Provider) bool {
		return hasCondition(p, banlieuev1.ConditionReady, metav1.ConditionFalse, banlieuev1.ReasonConnectFailed)
	})
	if c := meta.FindStatusCondition(got.Status.Conditions, banlieuev1.ConditionReady); !strings.Contains(c.Message, "insecureSkipTLSVerify") {
		t.Errorf("message must name insecureSkipTLSVerify: %q", c.Message)
	}
}

func (s *providerSuite) testMissingKey(ctx context.Context, t *testing.T) {
	s.createCredentials(ctx, t, "no-key", s.lab.Read(t, "clientcert.pem"), nil)
	p := s.guideProvider("missing-key")
	p.Spec.Connection.CredentialsRef.Name = "no-key"
	if err := s.env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	got := s.waitFor(ctx, t, p.Name, 30*time.Second, func(p *banlieuev1.Provider) bool {
		return hasCondition(p, banlieuev1.ConditionReady, metav1.ConditionFalse, banlieuev1.ReasonCredentialsUnavailable)
	})
	c := meta.FindStatusCondition(got.Status.Conditions, banlieuev1.ConditionReady)
	if !strings.Contains(c.Message, "tls.key") {
		t.Errorf("message must name tls.key: %q", c.Message)
	}
	if strings.Contains(c.Message, "PRIVATE KEY") || strings.Contains(c.Message, "CERTIFICATE-----") {
		t.Errorf("message leaks PEM material: %q", c.Message)
	}
}

// testRotation swaps the Secret to a client certificate the host does not trust and back; each
// change takes effect on the next reconcile, without restarting anything.
func (s *providerSuite) testRotation(ctx context.Context, t *testing.T) {
	s.createCredentials(ctx, t, "rotating", s.lab.Read(t, "clientcert.pem"), s.lab.Read(t, "clientkey.pem"))
	p := s.guideProvider("rotating")
	p.Spec.Connection.CredentialsRef.Name = "rotating"
	p.Spec.Capabilities = banlieuev1.ProviderCapabilities{}
	if err := s.env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	ready := func(p *banlieuev1.Provider) bool {
		return hasCondition(p, banlieuev1.ConditionReady, metav1.ConditionTrue, banlieuev1.ReasonReconciled)
	}
	s.waitFor(ctx, t, p.Name, 30*time.Second, ready)

	s.updateSecret(ctx, t, "rotating", s.lab.Read(t, "untrusted/clientcert.pem"), s.lab.Read(t, "untrusted/clientkey.pem"))
	got := s.waitFor(ctx, t, p.Name, 30*time.Second, func(p *banlieuev1.Provider) bool {
		return hasCondition(p, banlieuev1.ConditionReady, metav1.ConditionFalse, banlieuev1.ReasonConnectFailed)
	})
	if len(got.Status.FailureDomains) != 0 {
		t.Errorf("an untrusted client must clear the failure domains: %+v", got.Status.FailureDomains)
	}
	s.updateSecret(ctx, t, "rotating", s.lab.Read(t, "clientcert.pem"), s.lab.Read(t, "clientkey.pem"))
	s.waitFor(ctx, t, p.Name, 30*time.Second, ready)

	// Reachable, unreachable, reachable again: three events, and none for the 1 s probes in
	// between (a repeat would show as a series). The recorder writes asynchronously.
	want := []string{"Normal/HostReachable", "Normal/HostReachable", "Warning/ConnectFailed"}
	testenv.Eventually(t, 10*time.Second, "reachability events", func() error {
		got := testenv.EventKeys(testenv.EventsAbout(ctx, t, s.env.Client, testNamespace, p.Name))
		return testenv.Unmet(slices.Equal(got, want), fmt.Sprintf("events %v", got))
	})
	time.Sleep(3 * time.Second)
	if got := testenv.EventKeys(testenv.EventsAbout(ctx, t, s.env.Client, testNamespace, p.Name)); !slices.Equal(got, want) {
		t.Errorf("events after probes that found the host as before = %v, want %v", got, want)
	}
}

func (s *providerSuite) updateSecret(ctx context.Context, t *testing.T, name string, cert, key []byte) {
	t.Helper()
	var secret corev1.Secret
	if err := s.env.Client.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: name}, &secret); err != nil {
		t.Fatal(err)
	}
	secret.Data = map[string][]byte{"tls.crt": cert, "tls.key": key}
	if err := s.env.Client.Update(ctx, &secret); err != nil {
		t.Fatal(err)
	}
}

// testDaemonRestart kills libvirtd (as a crash would) and starts it again with the same state.
func (s *providerSuite) testDaemonRestart(ctx context.Context, t *testing.T) {
	p := s.guideProvider("restart")
	p.Spec.Capabilities = banlieuev1.ProviderCapabilities{}
	if err := s.env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	ready := func(p *banlieuev1.Provider) bool {
		return hasCondition(p, banlieuev1.ConditionReady, metav1.ConditionTrue, banlieuev1.ReasonReconciled)
	}
	s.waitFor(ctx, t, p.Name, 30*time.Second, ready)

	pid := s.lab.DaemonPID(t)
	restarted := false
	restart := func() {
		if restarted {
			return
		}
		restarted = true
		out, err := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "libvirt-lab.sh"), "start", s.lab.Dir).CombinedOutput()
		if err != nil {
			t.Fatalf("restarting libvirtd: %v\n%s", err, out)
		}
	}
	t.Cleanup(restart)
	if err := exec.Command("kill", "-9", strconv.Itoa(pid)).Run(); err != nil {
		t.Fatal(err)
	}
	got := s.waitFor(ctx, t, p.Name, 60*time.Second, func(p *banlieuev1.Provider) bool {
		return hasCondition(p, banlieuev1.ConditionProviderReachable, metav1.ConditionFalse, banlieuev1.ReasonConnectFailed)
	})
	if len(got.Status.FailureDomains) != 0 {
		t.Errorf("an unreachable host must clear the failure domains: %+v", got.Status.FailureDomains)
	}
	restart()
	got = s.waitFor(ctx, t, p.Name, 60*time.Second, ready)
	if len(got.Status.FailureDomains) != 1 {
		t.Errorf("recovered host must publish its failure domain again: %+v", got.Status.FailureDomains)
	}
	s.host = s.dialHost(t)
}
