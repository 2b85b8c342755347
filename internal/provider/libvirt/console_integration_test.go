package libvirt

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/console"
	"banlieue.io/banlieue/internal/provider/libvirt/hostconn"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/internal/testenv/labhost"
)

const (
	relayAccount = "banlieue-controller"
	relayUser    = "system:serviceaccount:" + testNamespace + ":" + relayAccount
	// consoleService is the Service the APIService names, as config/console installs it.
	consoleService = "banlieue-console"
)

// A VM's serial console, end to end through real parts: a user with a client certificate asks
// the kube-apiserver, which authenticates them and forwards to the aggregated API (the relay,
// as the installed controller account) with its front-proxy certificate; the relay authorises
// them with a SubjectAccessReview and asks the provider of the VM's Provider with a token for
// that Provider's audience; the provider opens DOMAIN_OPEN_CONSOLE on its pooled connection to
// the lab host, where the machine controller booted the tiny guest. The user holding only the
// console permission types a line and reads the guest's echo; a user without it is refused 403.
func TestConsoleThroughTheAPIServer(t *testing.T) {
	lab := testenv.RequireLibvirtLab(t)
	env := testenv.StartWith(t, testenv.Options{FrontProxy: true})
	var conns *hostconn.Connections
	ctx, ps := startLabSuiteOn(t, lab, env, func(mgr ctrl.Manager, c *hostconn.Connections) error {
		conns = c
		r := &MachineReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Connections: c, Resync: time.Second}
		return r.SetupWithManager(mgr)
	})
	s := &machineSuite{providerSuite: ps, pool: "console-" + testenv.RunID(), bootName: "guest.raw"}
	s.createGuestPool(ctx, t)
	p := s.guideProvider("lab")
	p.Spec.Capabilities = s.capabilities()
	env.Create(ctx, t, p)
	s.createImage(ctx, t, s.pool, s.bootName)

	start := time.Now()
	// Named per run: a run killed before its cleanup leaves its domain behind, which the next
	// run must not collide with (DomainNameConflict).
	m := s.machine(testNamespace, "serial-"+testenv.RunID())
	m.Spec.MemoryMiB = 256
	env.Create(ctx, t, m)
	// The guest would run on through the rest of the lab's tests. This cleanup runs before the
	// manager's stops, so the provider tears the machine down as a user's deletion would; what
	// a slow teardown leaves is removed from the host directly.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := env.Client.Delete(ctx, m); err == nil {
			for ctx.Err() == nil && env.Client.Get(ctx, client.ObjectKeyFromObject(m), &infrav1.LibvirtMachine{}) == nil {
				time.Sleep(250 * time.Millisecond)
			}
		}
		hostCtx, cancelHost := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancelHost()
		host, err := labhost.Dialer(t, lab).Dial(hostCtx)
		if err != nil {
			return
		}
		defer host.Close()
		labhost.RemoveDomains(hostCtx, host, m.Spec.DomainName)
	})
	s.waitMachine(ctx, t, client.ObjectKeyFromObject(m), 2*time.Minute, machineReady)
	t.Logf("machine running %v after it was created", time.Since(start).Round(time.Millisecond))
	vm := env.VirtualMachineFor(ctx, t, client.ObjectKeyFromObject(m))

	provider := types.NamespacedName{Namespace: testNamespace, Name: "lab"}
	serving := selfSigned(t)
	providerAddr := serveConsole(ctx, t, "127.0.0.1:0", serving, &ConsoleServer{
		Client: env.Client, Reader: env.Client, Connections: conns, Provider: provider, Relay: relayUser})
	publishConsoleKey(ctx, t, env, provider, serving)
	relayClient := installRelayAccount(ctx, t, env)
	relay := &console.Relay{
		Tokens:  &console.ServiceAccountTokens{Client: relayClient, ServiceAccount: types.NamespacedName{Namespace: testNamespace, Name: relayAccount}},
		Address: func(*banlieuev1.Provider) (string, error) { return providerAddr, nil },
		TLS:     console.ProviderTLS(),
	}
	aggregated := startAggregatedAPI(ctx, t, env, &console.Server{Reader: relayClient, Client: relayClient, Relay: relay})

	alice := env.CertUser(t, "alice")
	bob := env.CertUser(t, "bob")
	grantConsole(ctx, t, env, "alice")
	env.Create(ctx, t,
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "vm-reader"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"banlieue.io"}, Resources: []string{"virtualmachines"}, Verbs: []string{"get", "list"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "bob-reads-vms"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "vm-reader"},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "bob"}}})

	t.Run("a user holding only the console permission types a line and reads it back", func(t *testing.T) {
		start := time.Now()
		con, err := console.Dial(ctx, alice, vm, false)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("console open through the API server in %v", time.Since(start).Round(time.Millisecond))
		term := newTerminal()
		attached := make(chan error, 1)
		go func() { attached <- console.Attach(ctx, con, term.in, term.out) }()
		// The guest repeats its report every 2 s: a session opened at any time sees one whole.
		term.waitFor(t, "BANLIEUE-GUEST-END", 90*time.Second)
		line := fmt.Sprintf("typed-through-kubernetes-%d", time.Now().UnixNano())
		start = time.Now()
		term.typ(line + "\r")
		term.waitFor(t, line, 10*time.Second)
		t.Logf("typed line echoed through kube-apiserver, relay and provider in %v", time.Since(start).Round(time.Millisecond))
		term.typ(string([]byte{console.EscapeByte}))
		select {
		case err := <-attached:
			if err != nil {
				t.Fatalf("Attach ended with %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the escape byte did not end the session")
		}
		// The session is gone on libvirtd's side too: another opens without forcing.
		testenv.Eventually(t, 10*time.Second, "the console free again", func() error {
			con, err := console.Dial(ctx, alice, vm, false)
			if err != nil {
				return err
			}
			return con.Close()
		})
	})

	t.Run("the CLI: banlieue console runs a command in the guest as that user", func(t *testing.T) {
		// The binary as a user runs it, with a kubeconfig holding only alice's certificate; the
		// guest's shell on its serial console runs the command, so its output (42, not the
		// typed $((6*7))) proves the keys reached the guest and its answer came back.
		cmd := exec.CommandContext(ctx, testenv.Banlieue(t), "console", vm.Name, "-n", vm.Namespace,
			"--kubeconfig", testenv.KubeconfigOf(t, alice))
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		var out testenv.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		nonce := time.Now().UnixNano()
		want := fmt.Sprintf("banlieue-cli-42-%d", nonce)
		var typed time.Time
		testenv.Eventually(t, 30*time.Second, "the command's output on the CLI's stdout", func() error {
			// Typed again every 2 s until answered: keys typed before the session is attached
			// are lost.
			if time.Since(typed) > 2*time.Second {
				if _, err := fmt.Fprintf(stdin, "echo banlieue-cli-$((6*7))-%d\r", nonce); err != nil {
					return err
				}
				typed = time.Now()
			}
			if !strings.Contains(string(out.Bytes()), want) {
				return fmt.Errorf("not in the output yet (%d bytes)", len(out.Bytes()))
			}
			return nil
		})
		if _, err := stdin.Write([]byte{console.EscapeByte}); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("banlieue console: %v\n%s", err, out.Bytes())
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the escape byte did not end banlieue console\n%s", out.Bytes())
		}
		if !strings.Contains(string(out.Bytes()), "Connected to "+vm.Namespace+"/"+vm.Name) {
			t.Errorf("no connection banner:\n%s", out.Bytes())
		}
	})

	t.Run("a user without the console permission is refused 403", func(t *testing.T) {
		_, err := console.Dial(ctx, bob, vm, false)
		var se *console.StatusError
		if !errors.As(err, &se) || se.Code != http.StatusForbidden || !strings.Contains(se.Message, `"virtualmachines/console"`) {
			t.Fatalf("bob's console = %v, want 403 naming virtualmachines/console", err)
		}
		t.Logf("refused: %v", err)
		// bob may read the VM: the refusal is the subresource's alone.
		c, err := client.New(bob, client.Options{Scheme: env.Client.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		got := &metav1.PartialObjectMetadata{}
		got.SetGroupVersionKind(banlieuev1.GroupVersion.WithKind("VirtualMachine"))
		testenv.Allowed(t, "bob gets the VirtualMachine", c.Get(ctx, vm, got))
	})

	// Straight to the aggregated server, as the API server would speak to it, or as a pod that
	// reaches its address would.
	direct := func(t *testing.T, cert *tls.Certificate, user string) (int, string) {
		t.Helper()
		cfg := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the test attacks the server; it trusts nothing it says
		if cert != nil {
			cfg.Certificates = []tls.Certificate{*cert}
		}
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+aggregated+console.Path(vm), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Remote-User", user)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", console.UpgradeProtocol)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(body)
	}
	t.Run("headers without the front proxy's certificate name no one", func(t *testing.T) {
		if code, body := direct(t, nil, "alice"); code != http.StatusUnauthorized {
			t.Fatalf("forged X-Remote-User: %d %s, want 401", code, body)
		}
	})
	t.Run("the relay reviews the permission itself", func(t *testing.T) {
		cert := env.FrontProxyCertificate(t)
		if code, body := direct(t, &cert, "bob"); code != http.StatusForbidden || !strings.Contains(body, `cannot get resource \"virtualmachines/console\"`) {
			t.Fatalf("bob through the front proxy's certificate: %d %s, want the relay's 403", code, body)
		}
	})

	t.Run("the provider accepts only the relay's token for its own audience", func(t *testing.T) {
		// The Provider as stored: its status.consoleKeys lists the endpoint's key, so the relay
		// reaches the provider, which then judges the token.
		p := &banlieuev1.Provider{}
		if err := env.Client.Get(ctx, provider, p); err != nil {
			t.Fatal(err)
		}
		var machine infrav1.LibvirtMachine
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), &machine); err != nil {
			t.Fatal(err)
		}
		unpinned := p.DeepCopy()
		unpinned.Status.ConsoleKeys = nil
		if _, err := relay.Dial(ctx, unpinned, &machine, false); err == nil || !strings.Contains(err.Error(), "publishes no console key") {
			t.Errorf("dialling for a Provider that publishes no key: %v, want the relay's refusal before the token is sent", err)
		}
		other := types.NamespacedName{Namespace: "team-b", Name: "lab"}
		for name, tokens := range map[string]console.TokenSource{
			"another Provider's audience": audienceOf{relay.Tokens, console.Audience(other)},
			"the API server's audience":   audienceOf{relay.Tokens, ""},
		} {
			r := *relay
			r.Tokens = tokens
			_, err := r.Dial(ctx, p, &machine, false)
			var pe *console.ProviderError
			if !errors.As(err, &pe) || pe.Code != http.StatusUnauthorized {
				t.Errorf("%s: %v, want 401", name, err)
			}
		}
	})
}

// audienceOf asks its source for one fixed audience whatever the relay asks for; "" is a
// token for the API server itself.
type audienceOf struct {
	src      console.TokenSource
	audience string
}

func (a audienceOf) Token(ctx context.Context, _ string) (string, error) {
	if a.audience == "" {
		sa := a.src.(*console.ServiceAccountTokens)
		return sa.Token(ctx, "https://kubernetes.default.svc")
	}
	return a.src.Token(ctx, a.audience)
}

// createGuestPool is createPool with the tiny guest of hack/test-guest-image.sh as the boot
// volume: a disk that boots to a shell-less init printing on ttyS0, whose tty echoes input.
func (s *machineSuite) createGuestPool(ctx context.Context, t *testing.T) {
	t.Helper()
	pool := labhost.CreatePool(ctx, t, s.host, s.lab, s.pool)
	out, err := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "test-guest-image.sh")).Output()
	if err != nil {
		t.Fatalf("hack/test-guest-image.sh: %v", err)
	}
	src, err := os.Open(filepath.Join(strings.TrimSpace(string(out)), "guest.raw"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = src.Close() }() // read only
	st, err := src.Stat()
	if err != nil {
		t.Fatal(err)
	}
	xml, err := renderVolume(volumeSpec{name: s.bootName, capacity: uint64(st.Size()), format: formatRaw})
	if err != nil {
		t.Fatal(err)
	}
	vol, err := s.host.StorageVolCreateXML(ctx, pool, xml, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.host.StorageVolUploadSparse(ctx, vol, src, nil); err != nil {
		t.Fatal(err)
	}
}

// installRelayAccount creates the controller's ServiceAccount with the installed controller
// ClusterRole and config/console's token Role, and returns a client acting as it.
func installRelayAccount(ctx context.Context, t *testing.T, env *testenv.Env) client.Client {
	t.Helper()
	env.Create(ctx, t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: relayAccount}})
	env.BindInstalledClusterRole(ctx, t, "config/rbac/controller/role.yaml", relayUser)
	for _, doc := range manifestDocs(t, "config/console/relay-token.yaml") {
		var obj unstructured.Unstructured
		if err := yaml.Unmarshal(doc, &obj.Object); err != nil {
			t.Fatal(err)
		}
		env.Create(ctx, t, &obj)
	}
	c, err := client.New(testenv.Impersonating(env.Config, relayUser), client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// grantConsole binds the shipped console ClusterRole to user in the test namespace, as a
// namespace admin would.
func grantConsole(ctx context.Context, t *testing.T, env *testenv.Env, user string) {
	t.Helper()
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(manifestDocs(t, "config/console/clusterrole.yaml")[0], &role); err != nil {
		t.Fatal(err)
	}
	env.Create(ctx, t, &role, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: user + "-console"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}})
}

func manifestDocs(t *testing.T, rel string) [][]byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), rel))
	if err != nil {
		t.Fatal(err)
	}
	var docs [][]byte
	for _, d := range strings.Split(string(raw), "\n---\n") {
		if strings.TrimSpace(d) != "" {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

// startAggregatedAPI serves srv on this machine's non-loopback address with a certificate for
// the console Service's name, registers it as config/console's APIService would (the Service,
// its endpoints by hand: no controller-manager here) and waits until the API server marks it
// Available. It returns the server's address.
func startAggregatedAPI(ctx context.Context, t *testing.T, env *testenv.Env, srv http.Handler) string {
	t.Helper()
	caPEM, ca, caKey := testenv.NewCA(t, "console-serving-ca")
	certPEM, keyPEM, err := testenv.SignCert(ca, caKey, consoleService, []string{consoleService + "." + testNamespace + ".svc"}, x509.ExtKeyUsageServerAuth)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	tlsCfg, err := console.ServingTLS(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	addr := serveConsole(ctx, t, net.JoinHostPort(testenv.HostIP(t).String(), "0"), tlsCfg, srv)
	host, portStr, _ := net.SplitHostPort(addr)
	var port int32
	_, _ = fmt.Sscan(portStr, &port)

	env.Create(ctx, t,
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: consoleService},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(port)}}}},
		&corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: consoleService}, //nolint:staticcheck // the aggregator still reads Endpoints in some versions
			Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: host}}, //nolint:staticcheck // as above
				Ports: []corev1.EndpointPort{{Name: "https", Port: port}}}}}, //nolint:staticcheck // as above
		&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: consoleService + "-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: consoleService}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{host}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(port)}}},
	)
	apiService := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": console.Version + "." + console.Group},
		"spec": map[string]any{
			"group": console.Group, "version": console.Version, "groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
			"service":  map[string]any{"namespace": testNamespace, "name": consoleService, "port": int64(443)},
			"caBundle": caPEM,
		},
	}}
	env.Create(ctx, t, apiService)
	start := time.Now()
	testenv.Eventually(t, 60*time.Second, "APIService "+apiService.GetName()+" Available", func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(apiService), apiService); err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(apiService.Object, "status", "conditions")
		for _, c := range conds {
			if cm, ok := c.(map[string]any); ok && cm["type"] == "Available" {
				return testenv.Unmet(cm["status"] == "True", fmt.Sprintf("%v: %v", cm["reason"], cm["message"]))
			}
		}
		return testenv.Unmet(false, "no Available condition yet")
	})
	t.Logf("APIService Available %v after it was created", time.Since(start).Round(time.Millisecond))
	return addr
}

// serveConsole serves h until ctx ends and returns the bound address.
func serveConsole(ctx context.Context, t *testing.T, addr string, cfg *tls.Config, h http.Handler) string {
	t.Helper()
	ready := make(chan net.Addr, 1)
	l := &console.Listener{Addr: addr, TLS: cfg, Handler: h, Ready: ready}
	done := make(chan error, 1)
	go func() { done <- l.Start(ctx) }()
	select {
	case a := <-ready:
		return a.String()
	case err := <-done:
		t.Fatalf("serving on %s: %v", addr, err)
		return ""
	}
}

// publishConsoleKey runs the replica's KeyPublisher for serving's key, as the role does, and
// waits until the Provider lists it: the relay trusts no other key.
func publishConsoleKey(ctx context.Context, t *testing.T, env *testenv.Env, provider types.NamespacedName, serving *tls.Config) {
	t.Helper()
	hash, err := console.ServingKeyHash(serving)
	if err != nil {
		t.Fatal(err)
	}
	pctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = (&console.KeyPublisher{Client: env.Client, Provider: provider, Pod: "console-test-0", SHA256: hash}).Start(pctx)
	}()
	t.Cleanup(func() { stop(); <-done })
	testenv.Eventually(t, time.Minute, "the console key in status.consoleKeys", func() error {
		var p banlieuev1.Provider
		if err := env.Client.Get(ctx, provider, &p); err != nil {
			return err
		}
		return testenv.Unmet(slices.ContainsFunc(p.Status.ConsoleKeys, func(k banlieuev1.ConsoleKey) bool { return k.SHA256 == hash }),
			fmt.Sprintf("keys %+v", p.Status.ConsoleKeys))
	})
}

func selfSigned(t *testing.T) *tls.Config {
	t.Helper()
	cfg, err := console.SelfSignedTLS("localhost")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// terminal is a user's terminal: in is what they type, out what the console printed.
type terminal struct {
	in   *io.PipeReader
	w    *io.PipeWriter
	mu   sync.Mutex
	seen bytes.Buffer
	out  io.Writer
}

func newTerminal() *terminal {
	r, w := io.Pipe()
	term := &terminal{in: r, w: w}
	term.out = writerFunc(func(p []byte) (int, error) {
		term.mu.Lock()
		defer term.mu.Unlock()
		return term.seen.Write(p)
	})
	return term
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func (term *terminal) typ(s string) {
	go func() { _, _ = term.w.Write([]byte(s)) }()
}

// waitFor waits until s was printed since the last waitFor.
func (term *terminal) waitFor(t *testing.T, s string, timeout time.Duration) {
	t.Helper()
	testenv.Eventually(t, timeout, fmt.Sprintf("%q on the console", s), func() error {
		term.mu.Lock()
		defer term.mu.Unlock()
		i := bytes.Index(term.seen.Bytes(), []byte(s))
		if i < 0 {
			tail := term.seen.Bytes()[max(0, term.seen.Len()-300):]
			return testenv.Unmet(false, string(tail))
		}
		term.seen.Next(i + len(s))
		return nil
	})
}
