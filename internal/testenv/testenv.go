// Package testenv starts a real kube-apiserver and etcd (envtest) with banlieue's CRDs installed,
// for the suites that exercise admission and controllers against real parts.
//
// The binaries are built from Go modules by hack/envtest-assets.sh; KUBEBUILDER_ASSETS points at
// them. Without them a suite is skipped on a workstation and fails under CI, where skipping
// would hide that nothing was tested.
//
// It is the one harness of the suites and benchmarks: the lab's credentials and Provider
// (libvirtlab.go; its pools and domains are in labhost, which links pkg/libvirt), managers that
// are stopped and waited for (manager.go), a log sink that outlives its test (logsink.go), the
// one poll loop (eventually.go), and the banlieue binary run as a process (process.go).
package testenv

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"banlieue.io/banlieue/internal/app"
)

// Env is a running API server with the CRDs installed.
type Env struct {
	Config *rest.Config
	Client client.Client
	env    *envtest.Environment
	// certDir holds the API server's serving certificates; see start.
	certDir string
}

// Options is what StartWith installs besides banlieue's CRDs: the CRDs and admission webhooks of
// another project whose manager a suite runs as a process (test/capi runs Cluster API's).
type Options struct {
	// CRDDirs are directories of further CRD manifests, installed unchanged.
	CRDDirs []string
	// WebhookPaths are files or directories of Mutating- and ValidatingWebhookConfigurations.
	// Their service references are rewritten to a local port, trusted through a CA envtest
	// generates: Webhooks says where the process that serves them must listen.
	WebhookPaths []string
	// FrontProxy configures the API server's front proxy, so it forwards requests to aggregated
	// API servers (APIServices) as a real cluster's does (frontproxy.go).
	FrontProxy bool
}

// WebhookServing is where the webhooks of Options.WebhookPaths are called: a port on Host and,
// in CertDir, tls.crt and tls.key for it.
type WebhookServing struct {
	Host    string
	Port    int
	CertDir string
}

// RepoRoot is the module root, found from this file's location so tests run from any package.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Start brings up the API server for one test (or one package, from TestMain via StartMain) and
// stops it when the test ends.
func Start(t testing.TB) *Env {
	t.Helper()
	return StartWith(t, Options{})
}

// StartWith is Start with opts installed as well.
func StartWith(t testing.TB, opts Options) *Env {
	t.Helper()
	RequireAssets(t)
	e, err := start(opts)
	if err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	t.Cleanup(func() { _ = e.Stop() })
	return e
}

// Webhooks is where the API server calls the webhooks of Options.WebhookPaths.
func (e *Env) Webhooks() WebhookServing {
	w := e.env.WebhookInstallOptions
	return WebhookServing{Host: w.LocalServingHost, Port: w.LocalServingPort, CertDir: w.LocalServingCertDir}
}

// StartProgram is Start for a program rather than a test (the benchmarks under bench/): it
// finds the control-plane binaries as RequireAssets does and returns an error instead of
// skipping. The caller stops the API server with Stop.
func StartProgram() (*Env, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		if err := os.Setenv("KUBEBUILDER_ASSETS", defaultAssets()); err != nil {
			return nil, err
		}
	}
	return start(Options{})
}

// Stop stops the API server and etcd of StartProgram and removes their files.
func (e *Env) Stop() error {
	err := e.env.Stop()
	_ = os.RemoveAll(e.certDir) // temporary certificates; a leftover is harmless
	return err
}

func start(opts Options) (*Env, error) {
	// The API server's certificates go in a directory of ours rather than one envtest allocates:
	// envtest deletes its own directory on APIServer.Stop and mints a new serving CA on the next
	// Start, so after RestartAPIServer Config (and every client built from it) would no longer
	// trust the server. With the directory kept, the restarted server serves the same
	// certificate on the same host:port (envtest keeps the port it picked once).
	certDir, err := os.MkdirTemp("", "banlieue-apiserver-")
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     append([]string{filepath.Join(RepoRoot(), "config", "crd", "bases")}, opts.CRDDirs...),
		ErrorIfCRDPathMissing: true,
		ControlPlane:          envtest.ControlPlane{APIServer: &envtest.APIServer{CertDir: certDir}},
		WebhookInstallOptions: envtest.WebhookInstallOptions{Paths: opts.WebhookPaths},
	}
	// On SIGTERM the server waits for open watches to end before it exits, and informers keep
	// theirs open: without a grace period that ends them, a stop under running controllers
	// outlasted envtest's 20 s StopTimeout and was killed.
	env.ControlPlane.APIServer.Configure().Set("shutdown-watch-termination-grace-period", "2s")
	if opts.FrontProxy {
		if err := configureFrontProxy(env.ControlPlane.APIServer, certDir); err != nil {
			_ = os.RemoveAll(certDir)
			return nil, err
		}
	}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		_ = os.RemoveAll(certDir)
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: app.NewScheme()})
	if err != nil {
		_ = env.Stop()
		_ = os.RemoveAll(certDir)
		return nil, err
	}
	return &Env{Config: cfg, Client: c, env: env, certDir: certDir}, nil
}

// RestartAPIServer stops the kube-apiserver (SIGTERM, as a rolling restart does) and starts it
// again while etcd keeps running, so every object survives and clients built from Config keep
// working once it is back. It returns when /readyz answers ok through Config, which proves the
// same address, serving certificate and client credentials are in use, and logs how long the
// stop and the start took.
func (e *Env) RestartAPIServer(t testing.TB) {
	t.Helper()
	apiServer := e.env.ControlPlane.GetAPIServer()
	begin := time.Now()
	if err := apiServer.Stop(); err != nil {
		t.Fatalf("stopping kube-apiserver: %v", err)
	}
	stopped := time.Now()
	if err := apiServer.Start(); err != nil {
		t.Fatalf("starting kube-apiserver again: %v", err)
	}
	// Start returns on /healthz; /readyz is the server's own word that it serves requests (its
	// informers synced, not shutting down).
	if err := e.waitReady(time.Minute); err != nil {
		t.Fatalf("kube-apiserver restarted but not ready: %v", err)
	}
	t.Logf("kube-apiserver stopped in %s, ready again %s later", stopped.Sub(begin).Round(time.Millisecond),
		time.Since(stopped).Round(time.Millisecond))
}

// waitReady polls /readyz with Config's TLS settings and credentials until it answers 200.
func (e *Env) waitReady(timeout time.Duration) error {
	hc, err := rest.HTTPClientFor(e.Config)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(e.Config.Host, "/")+"/readyz", nil)
		if err != nil {
			return err
		}
		if resp, err := hc.Do(req); err != nil {
			last = err
		} else {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Errorf("/readyz: %s: %s", resp.Status, body)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w; last: %v", ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Kubectl runs the real kubectl against the API server as an administrator and returns its
// combined output.
func (e *Env) Kubectl(t testing.TB, args ...string) (string, error) {
	t.Helper()
	user, err := e.env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatalf("adding kubectl user: %v", err)
	}
	kubectl, err := user.Kubectl()
	if err != nil {
		t.Fatalf("kubectl: %v", err)
	}
	cmd := exec.Command(kubectl.Path, append(kubectl.Opts, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// RequireAssets makes KUBEBUILDER_ASSETS point at the control-plane binaries, skipping (or, under
// CI, failing) the test when they have not been built.
func RequireAssets(t testing.TB) {
	t.Helper()
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		dir = defaultAssets()
		if err := os.Setenv("KUBEBUILDER_ASSETS", dir); err != nil {
			t.Fatal(err)
		}
	}
	for _, bin := range []string{"kube-apiserver", "etcd", "kubectl"} {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			MissingPrerequisite(t, "control-plane binaries missing in "+dir+"; run hack/envtest-assets.sh")
		}
	}
}

// defaultAssets is where hack/envtest-assets.sh puts the pinned versions by default.
func defaultAssets() string {
	cache := os.Getenv("BANLIEUE_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "banlieue")
	}
	matches, _ := filepath.Glob(filepath.Join(cache, "envtest", "v*"))
	if len(matches) == 0 {
		return filepath.Join(cache, "envtest", "missing")
	}
	// The newest pinned version sorts last.
	return strings.TrimSpace(matches[len(matches)-1])
}
