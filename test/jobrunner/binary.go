package jobrunner

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"banlieue.io/banlieue/internal/testenv"
)

// buildTimeout bounds compiling the binary; a cold build cache needs a minute or two.
const buildTimeout = 5 * time.Minute

// BuildBanlieue compiles ./cmd/banlieue into a temporary directory and returns its path, so a
// test runs the very binary a Job would, subcommand parsing and all. BANLIEUE_TEST_BINARY names
// a binary built beforehand instead, which saves a link per test package in CI.
func BuildBanlieue(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("BANLIEUE_TEST_BINARY"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "banlieue")
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/banlieue")
	cmd.Dir = testenv.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building banlieue: %v\n%s", err, out)
	}
	return bin
}

// WriteKubeconfig writes cfg as a kubeconfig file, the way a Job's commands find the API server
// (in a cluster they use the pod's service account instead).
func WriteKubeconfig(t testing.TB, cfg *rest.Config) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["envtest"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken,
	}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "envtest"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
