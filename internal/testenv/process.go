package testenv

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// buildTimeout bounds compiling the binary; a cold build cache needs a minute or two.
const buildTimeout = 5 * time.Minute

var built struct {
	once sync.Once
	bin  string
	err  error
	out  []byte
}

// Banlieue returns ./cmd/banlieue compiled by `make build`, so a test runs the very binary a Deployment or a Job
// would, subcommand parsing and all. It is built once per test binary, into a directory of this
// checkout's own under the system temporary directory: no test's TempDir outlives its test, and a
// fixed path per checkout is overwritten by the next run instead of piling up. The binary is
// renamed into place, so a process still running the previous one keeps it. BANLIEUE_TEST_BINARY
// names a binary built beforehand instead: hack/test.sh builds one for every package, outside
// any test's deadline.
func Banlieue(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("BANLIEUE_TEST_BINARY"); bin != "" {
		return bin
	}
	built.once.Do(func() {
		sum := sha256.Sum256([]byte(RepoRoot()))
		dir := filepath.Join(os.TempDir(), "banlieue-test-"+hex.EncodeToString(sum[:4]))
		if built.err = os.MkdirAll(dir, 0o700); built.err != nil {
			return
		}
		tmp, err := os.CreateTemp(dir, "banlieue-*")
		if err != nil {
			built.err = err
			return
		}
		_ = tmp.Close() // empty: the build replaces it
		if built.out, built.err = BuildBanlieue(tmp.Name()); built.err != nil {
			_ = os.Remove(tmp.Name())
			return
		}
		built.bin = filepath.Join(dir, "banlieue")
		built.err = os.Rename(tmp.Name(), built.bin)
	})
	if built.err != nil {
		t.Fatalf("building banlieue: %v\n%s", built.err, built.out)
	}
	return built.bin
}

// BuildBanlieue compiles ./cmd/banlieue into path with `make build`, the one way the binary is
// built (Makefile): static, version and commit stamped, as the image and the lab run it. It
// returns the build's output, for the error.
func BuildBanlieue(path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "build", "BIN="+path)
	cmd.Dir = RepoRoot()
	return cmd.CombinedOutput()
}

// Kubeconfig writes Config as a kubeconfig file, the way the binary's commands find the API
// server (in a cluster they use the pod's service account instead).
func (e *Env) Kubeconfig(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := e.WriteKubeconfig(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// KubeconfigAs is Kubeconfig acting as user (Impersonating): a process that is not banlieue's
// (Cluster API's manager) runs with exactly the rules installed for its account.
func (e *Env) KubeconfigAs(t testing.TB, user string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := writeKubeconfig(e.Config, path, user); err != nil {
		t.Fatal(err)
	}
	return path
}

// KubeconfigOf writes cfg, a user's REST config of this API server (CertUser), as a kubeconfig
// file: a command a user runs (banlieue console) reads it as it reads the user's own.
func KubeconfigOf(t testing.TB, cfg *rest.Config) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := writeKubeconfig(cfg, path, ""); err != nil {
		t.Fatal(err)
	}
	return path
}

// WriteKubeconfig writes Config as a kubeconfig file at path, readable by its owner only.
func (e *Env) WriteKubeconfig(path string) error { return writeKubeconfig(e.Config, path, "") }

// writeKubeconfig writes cfg as a kubeconfig file at path, impersonating user unless it is empty.
func writeKubeconfig(cfg *rest.Config, path, user string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["envtest"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken, Impersonate: user,
	}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "envtest"}
	kc.CurrentContext = "envtest"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return err
	}
	return os.Chmod(path, 0o600)
}

// Process is a subprocess of a test, its output collected while it runs.
type Process struct {
	Cmd    *exec.Cmd
	out    Buffer
	exited chan struct{}
	err    error
}

// StartRole runs `bin <args> --kubeconfig kubeconfig` (a role such as "controller", or
// "provider libvirt --provider-name x") until the test ends; see StartProcess.
func StartRole(t testing.TB, bin, kubeconfig string, args ...string) *Process {
	t.Helper()
	cmd := exec.Command(bin, append(args, "--kubeconfig", kubeconfig)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	return StartProcess(t, cmd)
}

// StartProcess starts cmd with its stdout and stderr collected (and also sent to cmd.Stdout, if
// the caller set one). When the test ends it is interrupted, as kubelet stops a container, and
// killed if it has not exited 10 s later; the cleanup waits for it either way, so no process
// outlives its test.
func StartProcess(t testing.TB, cmd *exec.Cmd) *Process {
	t.Helper()
	p := &Process{Cmd: cmd, exited: make(chan struct{})}
	var w io.Writer = &p.out
	if cmd.Stdout != nil {
		w = io.MultiWriter(&p.out, cmd.Stdout)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", cmd.Path, err)
	}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt) // fails only if it already exited
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

// Output is what the process has printed so far.
func (p *Process) Output() []byte { return p.out.Bytes() }

// Exited is closed once the process has exited; Err is then its exit status.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Err is the process's exit status once Exited is closed.
func (p *Process) Err() error {
	<-p.exited
	return p.err
}

// Buffer collects a process's output while the test reads it; safe for concurrent use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

// ProcessAlive reports whether pid exists and has not exited: a process that exited and waits
// to be reaped (a zombie) has.
func ProcessAlive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses, which may itself hold spaces.
	_, rest, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(rest, "Z")
}

// FreePort is a TCP port on 127.0.0.1 that nothing listened on a moment ago, for a process's
// health or metrics flag.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
