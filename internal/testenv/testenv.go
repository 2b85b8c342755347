// Package testenv starts a real kube-apiserver and etcd (envtest) with banlieue's CRDs installed,
// for the suites that exercise admission and controllers against real parts.
//
// The binaries are built from Go modules by hack/envtest-assets.sh; KUBEBUILDER_ASSETS points at
// them. Without them a suite is skipped on a workstation and fails under CI, where skipping
// would hide that nothing was tested.
package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

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
	RequireAssets(t)
	e, err := start()
	if err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	t.Cleanup(func() { _ = e.env.Stop() })
	return e
}

func start() (*Env, error) {
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(RepoRoot(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: app.NewScheme()})
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	return &Env{Config: cfg, Client: c, env: env}, nil
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
		os.Setenv("KUBEBUILDER_ASSETS", dir)
	}
	for _, bin := range []string{"kube-apiserver", "etcd", "kubectl"} {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			msg := "control-plane binaries missing in " + dir + "; run hack/envtest-assets.sh"
			if os.Getenv("CI") != "" {
				t.Fatal(msg)
			}
			t.Skip(msg)
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
