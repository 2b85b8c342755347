// Package readonlyfs runs the real banlieue binary the way its Deployments and Jobs do, with a
// read-only root filesystem (readOnlyRootFilesystem: true), and checks that no role needs to
// write anywhere but where it is told to.
//
// Each process runs in a private mount namespace (unshare --mount) in which every writable mount
// of this machine, / and /dev included, is bind-remounted read-only; only the directories a test
// names stay writable. TMPDIR is unset and the working directory is read-only too. The remount
// changes only the new namespace's copies of the mounts, never this machine's, and the test
// checks that. It needs root (for unshare) and the envtest binaries: it skips without them,
// except under CI, where it fails.
package readonlyfs

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/pkg/nocloud"
)

// writeError is what a process prints when it tried to write where it may not.
var writeError = regexp.MustCompile(`(?i)read-only file system|permission denied|operation not permitted|EROFS`)

// requireRoot skips (or fails under CI) unless this process can create mount namespaces.
func requireRoot(t *testing.T) string {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	switch {
	case os.Geteuid() != 0:
		testenv.MissingPrerequisite(t, "needs root to remount / read-only in a private mount namespace")
	case err != nil:
		testenv.MissingPrerequisite(t, "needs unshare (util-linux): "+err.Error())
	}
	return unshare
}

// mount is one line of /proc/self/mountinfo.
type mount struct{ point, options string }

func mounts(t *testing.T) []mount {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }() // read only: closing it loses nothing
	var ms []mount
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 6 {
			continue
		}
		point, err := strconv.Unquote(`"` + strings.ReplaceAll(fields[4], `"`, `\"`) + `"`)
		if err != nil {
			point = fields[4]
		}
		ms = append(ms, mount{point: point, options: fields[5]})
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return ms
}

// writableMounts are the mounts a container's read-only root would cover: every read-write
// mount but the kernel's pseudo filesystems (/proc, /sys) and the per-pod /dev/shm, /dev/pts
// and /dev/mqueue, which a pod keeps writable. /dev itself is included: it is where a
// temporary file beside /dev/stdout would land, and the host's /dev must never be touched.
func writableMounts(t *testing.T) []string {
	t.Helper()
	seen := map[string]bool{}
	var points []string
	for _, m := range mounts(t) {
		p := m.point
		if seen[p] || !strings.HasPrefix(m.options, "rw") {
			continue
		}
		if under(p, "/proc") || under(p, "/sys") || under(p, "/dev/shm") || under(p, "/dev/pts") || under(p, "/dev/mqueue") {
			continue
		}
		seen[p] = true
		points = append(points, p)
	}
	return points
}

func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// readOnly returns a command running argv in its own mount namespace with every writable mount
// read-only except the directories in writable (bind-mounted onto themselves first, so they stay
// writable mounts of their own), in the working directory cwd, with a minimal environment and no
// TMPDIR: what a container with readOnlyRootFilesystem sees.
func readOnly(t *testing.T, unshare, cwd string, writable []string, argv ...string) *exec.Cmd {
	t.Helper()
	var script strings.Builder
	script.WriteString("set -e\n")
	for _, w := range writable {
		fmt.Fprintf(&script, "mount --bind %s %s\n", quote(w), quote(w))
	}
	for _, m := range writableMounts(t) {
		fmt.Fprintf(&script, "mount -o remount,bind,ro %s\n", quote(m))
	}
	fmt.Fprintf(&script, "cd %s\nexec \"$@\"\n", quote(cwd))
	cmd := exec.Command(unshare, append([]string{"--mount", "--propagation", "private", "sh", "-c", script.String(), "sh"}, argv...)...)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + cwd}
	return cmd
}

// readOnlyDir is a directory with nothing in it, to run from.
func readOnlyDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "cwd")
	if err := os.Mkdir(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestTheSetupRefusesWrites proves the harness: under it, writing into the working directory,
// /tmp (where a process without TMPDIR writes), / and /dev fails with EROFS, a named writable directory takes
// a write, and this machine's own mounts are left as they were.
func TestTheSetupRefusesWrites(t *testing.T) {
	unshare := requireRoot(t)
	before := writableMounts(t)
	cwd, out := readOnlyDir(t), t.TempDir()
	for _, target := range []string{filepath.Join(cwd, "probe"), "/tmp/banlieue-readonlyfs-probe",
		"/banlieue-readonlyfs-probe", "/dev/banlieue-readonlyfs-probe"} {
		res, err := readOnly(t, unshare, cwd, []string{out}, "touch", target).CombinedOutput()
		if err == nil || !strings.Contains(string(res), "Read-only file system") {
			t.Errorf("touch %s under the read-only setup: %v %s; want Read-only file system", target, err, res)
		}
		_ = os.Remove(target) // only reached if the setup failed to protect it
	}
	if res, err := readOnly(t, unshare, cwd, []string{out}, "touch", filepath.Join(out, "probe")).CombinedOutput(); err != nil {
		t.Errorf("touch in the writable directory: %v %s", err, res)
	}
	if after := writableMounts(t); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("this machine's writable mounts changed:\nbefore %q\nafter  %q", before, after)
	}
}

const seedUUID = "0f8fad5b-d9cb-469f-a165-70867728950e"

// TestSeedBuild checks the one-shot `seed build` writes only its -o target (and its temporary
// file beside it), never the working directory, and that -o /dev/stdout works on a read-only
// root.
func TestSeedBuild(t *testing.T) {
	unshare := requireRoot(t)
	bin := testenv.Banlieue(t)
	want := seedImage(t)

	t.Run("to a file on a writable volume", func(t *testing.T) {
		cwd, out := readOnlyDir(t), t.TempDir()
		iso := filepath.Join(out, "seed.iso")
		res, err := readOnly(t, unshare, cwd, []string{out}, bin, "seed", "build",
			"--instance-id", seedUUID, "--hostname", "h", "-o", iso).CombinedOutput()
		if err != nil {
			t.Fatalf("seed build: %v\n%s", err, res)
		}
		got, err := os.ReadFile(iso)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("seed.iso differs from nocloud.Seed.Build (%v)", err)
		}
		if entries, _ := os.ReadDir(out); len(entries) != 1 {
			t.Errorf("left files behind in the output directory: %v", entries)
		}
	})

	t.Run("to /dev/stdout", func(t *testing.T) {
		cwd := readOnlyDir(t)
		var stdout, stderr bytes.Buffer
		cmd := readOnly(t, unshare, cwd, nil, bin, "seed", "build", "--instance-id", seedUUID, "--hostname", "h", "-o", "/dev/stdout")
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			// seed build writes a temporary file beside its target and renames it into place;
			// beside /dev/stdout that is /dev, read-only in a container (and on a writable
			// /dev, as root, the rename would replace the /dev/stdout symlink itself).
			t.Fatalf("seed build -o /dev/stdout needs a writable /dev: %v: %s"+
				"(a target that is not a regular file must be written in place; see cmd/banlieue/seed.go writeAtomically)",
				err, stderr.String())
		}
		if !bytes.Equal(stdout.Bytes(), want) {
			t.Errorf("stdout holds %d bytes, want the %d-byte seed", stdout.Len(), len(want))
		}
	})
}

func seedImage(t *testing.T) []byte {
	t.Helper()
	im, err := nocloud.Seed{InstanceID: seedUUID, Hostname: "h"}.Build()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := im.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// roles are the long-running subcommands, each with the name of one controller it runs.
var roles = []struct {
	name       string
	args       []string
	controller string
}{
	{"controller", []string{"controller"}, "virtualmachine"},
	{"operator", []string{"operator"}, "operator-provider"},
	{"imagebuilder", []string{"imagebuilder"}, "imagebuilder"},
	{"provider-libvirt", []string{"provider", "libvirt", "--provider-name", "x", "--import-service-account", "x-import"}, "provider"},
}

// TestRolesOnReadOnlyRoot starts every long-running role under the read-only setup and checks
// each becomes ready, reconciles, keeps running and prints no write error.
func TestRolesOnReadOnlyRoot(t *testing.T) {
	unshare := requireRoot(t)
	env := testenv.Start(t)
	bin := testenv.Banlieue(t)
	kubeconfig := env.Kubeconfig(t)

	env.ApplyRoleFixture(t)

	// The default, secure /metrics: its certificate is generated in memory, nothing written.
	reader := env.MetricsReader(t)
	cwd := readOnlyDir(t)
	procs := make([]*process, len(roles))
	for i, r := range roles {
		health, metrics := testenv.FreePort(t), testenv.FreePort(t)
		args := append(append([]string{bin}, r.args...), "--kubeconfig", kubeconfig, "--no-leader-elect",
			"--health-port", strconv.Itoa(health), "--metrics-port", strconv.Itoa(metrics))
		procs[i] = start(t, readOnly(t, unshare, cwd, nil, args...), health, metrics)
	}
	for i, r := range roles {
		t.Run(r.name, func(t *testing.T) {
			p := procs[i]
			p.waitFor(t, "/readyz", p.health, 200, 60*time.Second)
			// Reconciles have run; a write attempt would have happened by now. The metrics
			// server may start serving after /readyz answers: a refused or failed scrape is
			// waited out like a count of zero.
			testenv.Eventually(t, 30*time.Second, "controller_runtime_reconcile_total for controller "+r.controller, func() error {
				code, body := reader.Get(p.metrics)
				return testenv.Unmet(code == 200 && reconciles(body, r.controller) > 0,
					fmt.Sprintf("GET :%d/metrics: %d %.200s\n%s", p.metrics, code, body, p.Output()))
			})
		})
	}
	// Every role keeps running: a few seconds more, still alive and still ready.
	time.Sleep(5 * time.Second)
	for i, r := range roles {
		t.Run(r.name+" keeps running", func(t *testing.T) {
			p := procs[i]
			select {
			case <-p.Exited():
				t.Fatalf("exited: %v\n%s", p.Err(), string(p.Output()))
			default:
			}
			if code, body := p.request(p.health, "/readyz"); code != 200 {
				t.Errorf("/readyz %d %s", code, body)
			}
			if m := writeError.FindString(string(p.Output())); m != "" {
				t.Errorf("output mentions %q:\n%s", m, string(p.Output()))
			}
		})
	}
}

// reconciles sums controller_runtime_reconcile_total of one controller in a /metrics body.
func reconciles(metrics, controller string) float64 {
	var total float64
	prefix := `controller_runtime_reconcile_total{controller="` + controller + `",`
	for _, line := range strings.Split(metrics, "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
			total += v
		}
	}
	return total
}

type process struct {
	*testenv.Process
	health, metrics int
}

func start(t *testing.T, cmd *exec.Cmd, health, metrics int) *process {
	t.Helper()
	// unshare and sh exec into banlieue, so the PID StartProcess signals is the role itself.
	return &process{Process: testenv.StartProcess(t, cmd), health: health, metrics: metrics}
}

func (p *process) request(port int, path string) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", port, path), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func (p *process) waitFor(t *testing.T, path string, port, want int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-p.Exited():
			t.Fatalf("exited before %s answered %d: %v\n%s", path, want, p.Err(), string(p.Output()))
		default:
		}
		code, body := p.request(port, path)
		if code == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d %s, want %d\n%s", path, code, strings.TrimSpace(body), want, string(p.Output()))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
