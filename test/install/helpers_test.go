package install

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/testenv"
)

// cluster is an envtest API server without banlieue's CRDs: the install brings them.
type cluster struct {
	cfg     *rest.Config
	admin   client.Client
	kubectl []string // path and the admin's connection flags
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	testenv.RequireAssets(t)
	env := &envtest.Environment{}
	// OwnerReferencesPermissionEnforcement is off by default but on in hardened clusters (and
	// OpenShift): setting blockOwnerDeletion then needs update on the owner's finalizers.
	env.ControlPlane.GetAPIServer().Configure().
		Append("enable-admission-plugins", "OwnerReferencesPermissionEnforcement")
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	user, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatalf("adding kubectl user: %v", err)
	}
	k, err := user.Kubectl()
	if err != nil {
		t.Fatalf("kubectl: %v", err)
	}
	return &cluster{cfg: cfg, admin: newClient(t, cfg), kubectl: append([]string{k.Path}, k.Opts...)}
}

// run runs kubectl against the cluster as an administrator.
func (c *cluster) run(args ...string) (stdout, stderr string, err error) {
	return runKubectl(c.kubectl[0], append(c.kubectl[1:], args...)...)
}

// kubectlBinary is the envtest kubectl, for commands that need no API server.
func kubectlBinary(t *testing.T) string {
	t.Helper()
	testenv.RequireAssets(t)
	return filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
}

func runKubectl(path string, args ...string) (string, string, error) {
	var out, errOut bytes.Buffer
	cmd := exec.Command(path, args...)
	cmd.Dir = testenv.RepoRoot()
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	return out.String(), errOut.String(), err
}

func newClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	scheme := app.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// as returns a client acting as the ServiceAccount ns/name. The API server adds the
// ServiceAccount groups to an impersonated ServiceAccount, exactly as for its token.
func (c *cluster) as(t *testing.T, ns, name string) client.Client {
	t.Helper()
	return newClient(t, testenv.Impersonating(c.cfg, testenv.ServiceAccountUser(ns, name)))
}

// warnings collects the API server's warning headers (Pod Security "would violate" notes).
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, msg)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.msgs
	w.msgs = nil
	return m
}

// withWarnings is an admin client whose warnings land in the returned collector.
func (c *cluster) withWarnings(t *testing.T) (client.Client, *warnings) {
	t.Helper()
	w := &warnings{}
	cfg := rest.CopyConfig(c.cfg)
	cfg.WarningHandler = w
	return newClient(t, cfg), w
}
