// Package bootstrap tests scripts/bootstrap-libvirt-tls.sh for real: it runs the script into a
// temporary root, checks the PKI with openssl and crypto/x509, checks what it does to
// libvirtd.conf and to the client directory, serves the generated PKI from a real libvirtd and
// talks to it with virsh, and runs the script's own daemon (re)start path for hosts without
// systemd. Every daemon runs in private namespaces on its own port or loopback, next to (never
// instead of) the project's lab libvirtd, and is stopped by PID afterwards.
//
// The tests need root, bash and openssl; the daemon tests also need libvirtd, virtlogd, virsh,
// unshare and the libvirt-qemu user (hack/libvirt-lab.sh creates it). A missing prerequisite
// skips the test, or fails it when CI is set.
package bootstrap

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"banlieue.io/banlieue/internal/testenv"
)

// need skips the test (fails it under CI) when ok is false.
func need(t *testing.T, ok bool, format string, args ...any) {
	t.Helper()
	if ok {
		return
	}
	testenv.MissingPrerequisite(t, fmt.Sprintf(format, args...))
}

func needTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		_, err := exec.LookPath(tool)
		need(t, err == nil, "%s is not installed", tool)
	}
}

func needRoot(t *testing.T) {
	t.Helper()
	need(t, os.Geteuid() == 0, "the bootstrap script tests run as root (they chown and run libvirtd)")
}

func script(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "scripts", "bootstrap-libvirt-tls.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("script missing: %v", err)
	}
	return p
}

type result struct {
	stdout, stderr string
	code           int
}

// run runs the script with args and extra environment entries.
func run(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{script(t)}, args...)...)
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(e string) bool {
		return strings.HasPrefix(e, "SUDO_USER=")
	}), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	// A killed script's children (a cmp stuck on a FIFO) would hold the pipes open forever.
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("running the script: %v", err)
	}
	if strings.Contains(r.stdout+r.stderr, "PRIVATE KEY") {
		t.Fatalf("the script printed a private key:\n%s\n%s", r.stdout, r.stderr)
	}
	return r
}

// mustRun runs the script and fails the test unless it exits 0.
func mustRun(t *testing.T, env []string, args ...string) result {
	t.Helper()
	r := run(t, env, args...)
	if r.code != 0 {
		t.Fatalf("script %v exited %d\nstdout:\n%s\nstderr:\n%s", args, r.code, r.stdout, r.stderr)
	}
	return r
}

type layout struct {
	root, client                       string
	caCert, caKey                      string
	serverCert, serverKey              string
	clientCert, clientKey              string
	conf                               string
	outCA, outClientCert, outClientKey string
}

func newLayout(root, client string) layout {
	return layout{
		root: root, client: client,
		caCert:        filepath.Join(root, "etc/pki/CA/cacert.pem"),
		caKey:         filepath.Join(root, "etc/pki/CA/private/cakey.pem"),
		serverCert:    filepath.Join(root, "etc/pki/libvirt/servercert.pem"),
		serverKey:     filepath.Join(root, "etc/pki/libvirt/private/serverkey.pem"),
		clientCert:    filepath.Join(root, "etc/pki/libvirt/clientcert.pem"),
		clientKey:     filepath.Join(root, "etc/pki/libvirt/private/clientkey.pem"),
		conf:          filepath.Join(root, "etc/libvirt/libvirtd.conf"),
		outCA:         filepath.Join(client, "cacert.pem"),
		outClientCert: filepath.Join(client, "clientcert.pem"),
		outClientKey:  filepath.Join(client, "clientkey.pem"),
	}
}

func (l layout) all() []string {
	return []string{l.caCert, l.caKey, l.serverCert, l.serverKey, l.clientCert, l.clientKey,
		l.outCA, l.outClientCert, l.outClientKey}
}

func digest(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))
}

func digests(t *testing.T, paths []string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, p := range paths {
		m[p] = digest(t, p)
	}
	return m
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		t.Fatalf("%s: not a PEM certificate", path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return c
}

// opensslVerify checks with openssl that cert chains to ca for the given purpose.
func opensslVerify(t *testing.T, ca, cert, purpose string) {
	t.Helper()
	out, err := exec.Command("openssl", "verify", "-CAfile", ca, "-purpose", purpose, cert).CombinedOutput()
	if err != nil || !strings.Contains(string(out), ": OK") {
		t.Fatalf("openssl verify -CAfile %s -purpose %s %s: %v\n%s", ca, purpose, cert, err, out)
	}
}

// checkPKI verifies chains, purposes, SANs, file modes and the client copies.
func checkPKI(t *testing.T, l layout, sans []string) {
	t.Helper()
	opensslVerify(t, l.caCert, l.serverCert, "sslserver")
	opensslVerify(t, l.caCert, l.clientCert, "sslclient")
	opensslVerify(t, l.outCA, l.outClientCert, "sslclient")

	ca := readCert(t, l.caCert)
	if !ca.IsCA || ca.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("CA certificate: IsCA=%v KeyUsage=%v", ca.IsCA, ca.KeyUsage)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	srv := readCert(t, l.serverCert)
	for _, san := range sans {
		if _, err := srv.Verify(x509.VerifyOptions{Roots: roots, DNSName: san,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("server certificate for %q: %v (DNS %v, IP %v)", san, err, srv.DNSNames, srv.IPAddresses)
		}
	}
	cli := readCert(t, l.clientCert)
	if _, err := cli.Verify(x509.VerifyOptions{Roots: roots,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate: %v", err)
	}

	for path, want := range map[string]os.FileMode{
		l.caKey: 0o600, l.serverKey: 0o600, l.clientKey: 0o600, l.outClientKey: 0o600,
		filepath.Dir(l.caKey): 0o700, filepath.Dir(l.serverKey): 0o700, l.client: 0o700,
	} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %o, want %o", path, got, want)
		}
	}
	for host, copy := range map[string]string{l.caCert: l.outCA, l.clientCert: l.outClientCert, l.clientKey: l.outClientKey} {
		if digest(t, host) != digest(t, copy) {
			t.Errorf("%s differs from %s", copy, host)
		}
	}
}

// activeSettings returns the uncommented key = value lines of a libvirtd.conf.
func activeSettings(t *testing.T, path string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]string{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		m[strings.TrimSpace(k)] = append(m[strings.TrimSpace(k)], strings.TrimSpace(v))
	}
	return m
}

func TestUsage(t *testing.T) {
	needTools(t, "bash")
	r := run(t, nil, "--help")
	if r.code != 0 {
		t.Fatalf("--help exited %d: %s", r.code, r.stderr)
	}
	for _, opt := range []string{"--san", "--extra-san", "--cn", "--days", "--ca-days", "--rotate", "--rotate-ca",
		"--client-dir", "--root", "--no-restart", "--key-bits", "listen_tls = 1", "listen_tcp = 0", `auth_tls = "none"`,
		"libvirtd-tls.socket", "/etc/pki/CA/private/cakey.pem", ".config/banlieue/libvirt"} {
		if !strings.Contains(r.stdout, opt) {
			t.Errorf("--help does not mention %q", opt)
		}
	}
	for _, args := range [][]string{{"--bogus"}, {"--days", "soon"}, {"--san"}, {"--days", "0"}, {"--key-bits", "1024"}} {
		if r := run(t, nil, args...); r.code != 2 || !strings.Contains(r.stderr, "--help") {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and a pointer to --help", args, r.code, r.stderr)
		}
	}
}

func TestShellcheck(t *testing.T) {
	if _, err := exec.LookPath("shellcheck"); err != nil {
		t.Skip("shellcheck is not installed")
	}
	if out, err := exec.Command("shellcheck", script(t)).CombinedOutput(); err != nil {
		t.Fatalf("shellcheck: %v\n%s", err, out)
	}
}

func TestProvisionIdempotentAndRotate(t *testing.T) {
	needRoot(t)
	needTools(t, "bash", "openssl")
	t.Parallel()
	tmp := t.TempDir()
	l := newLayout(filepath.Join(tmp, "root"), filepath.Join(tmp, "client"))
	sans := []string{"127.0.0.1", "localhost"}
	// 2048-bit keys: the tests generate a dozen, and 3072-bit ones take seconds each here.
	args := []string{"--root", l.root, "--client-dir", l.client, "--no-restart", "--key-bits", "2048",
		"--san", "127.0.0.1", "--san", "localhost"}

	// A libvirtd.conf as Debian ships it (settings commented out), plus a conflicting
	// setting, a duplicate and an unrelated one that must survive.
	original := "# libvirtd.conf\n#listen_tls = 0\n#listen_tcp = 1\nlisten_tcp = 1\nmax_clients = 5000\n" +
		"listen_tcp=1\n#auth_tls = \"none\"\nunix_sock_group = \"libvirt\"\n"
	if err := os.MkdirAll(filepath.Dir(l.conf), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(l.conf, []byte(original), 0o644); err != nil {
		t.Fatal(err)
	}

	// 1. First run: everything is created.
	r := mustRun(t, nil, args...)
	checkPKI(t, l, sans)
	settings := activeSettings(t, l.conf)
	for k, want := range map[string]string{"listen_tls": "1", "listen_tcp": "0", "auth_tls": `"none"`,
		"max_clients": "5000", "unix_sock_group": `"libvirt"`} {
		if got := settings[k]; len(got) != 1 || got[0] != want {
			t.Errorf("libvirtd.conf %s = %q, want exactly [%s]", k, got, want)
		}
	}
	if b, err := os.ReadFile(l.conf + ".banlieue-orig"); err != nil || string(b) != original {
		t.Errorf("backup of the original libvirtd.conf: %v, %q", err, b)
	}
	for _, want := range []string{"pool-list --all", "qemu+tls://", "kubectl -n banlieue-system create secret generic libvirt-edge-creds",
		"--from-file=tls.crt=", "--from-file=tls.key=", "kubectl -n banlieue-system create configmap libvirt-edge-ca",
		"--from-file=ca.crt=", "pkipath=" + l.client} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("next steps do not mention %q:\n%s", want, r.stdout)
		}
	}
	if c := readCert(t, l.clientCert); c.Subject.CommonName != "banlieue-client" {
		t.Errorf("client CN %q, want banlieue-client", c.Subject.CommonName)
	}

	// 2. Re-run: not a byte changes, including libvirtd.conf and its backup.
	files := append(l.all(), l.conf, l.conf+".banlieue-orig")
	before := digests(t, files)
	mustRun(t, nil, args...)
	if after := digests(t, files); !equalMaps(before, after) {
		t.Errorf("a re-run changed files: %v", changed(before, after))
	}

	// 3. --rotate: new server and client certificates and keys, same CA.
	mustRun(t, nil, append(args, "--rotate")...)
	after := digests(t, files)
	for _, p := range []string{l.serverCert, l.serverKey, l.clientCert, l.clientKey, l.outClientCert, l.outClientKey} {
		if before[p] == after[p] {
			t.Errorf("--rotate left %s unchanged", p)
		}
	}
	for _, p := range []string{l.caCert, l.caKey, l.outCA, l.conf} {
		if before[p] != after[p] {
			t.Errorf("--rotate changed %s", p)
		}
	}
	checkPKI(t, l, sans)

	// 4. A SAN the server certificate lacks: only the server certificate is re-issued.
	before = after
	mustRun(t, nil, append(args, "--san", "kvm-1.example", "--san", "10.0.0.5")...)
	after = digests(t, files)
	if got := changed(before, after); !slices.Equal(got, slices.Sorted(slices.Values([]string{l.serverCert, l.serverKey}))) {
		t.Errorf("adding SANs changed %v, want only the server certificate and key", got)
	}
	checkPKI(t, l, append(sans, "kvm-1.example", "10.0.0.5"))
	// Asking for a subset of what the certificate covers keeps it.
	before = after
	mustRun(t, nil, args...)
	if after = digests(t, files); !equalMaps(before, after) {
		t.Errorf("a re-run with fewer SANs changed %v", changed(before, after))
	}

	// 5. --rotate-ca: everything new; the old CA is kept aside.
	oldClient := filepath.Join(tmp, "old-clientcert.pem")
	copyFile(t, l.clientCert, oldClient)
	mustRun(t, nil, append(args, "--rotate-ca", "--cn", "ops@example", "--days", "30")...)
	after = digests(t, files)
	for _, p := range l.all() {
		if before[p] == after[p] {
			t.Errorf("--rotate-ca left %s unchanged", p)
		}
	}
	checkPKI(t, l, sans)
	if c := readCert(t, l.clientCert); c.Subject.CommonName != "ops@example" {
		t.Errorf("client CN %q, want ops@example", c.Subject.CommonName)
	} else if d := time.Until(c.NotAfter); d < 29*24*time.Hour || d > 31*24*time.Hour {
		t.Errorf("--days 30 gave a certificate valid until %v", c.NotAfter)
	}
	if old, _ := filepath.Glob(l.caCert + ".replaced-*"); len(old) != 1 {
		t.Errorf("old CA certificate not kept: %v", old)
	}
	// A client certificate from before no longer chains to the CA.
	if out, err := exec.Command("openssl", "verify", "-CAfile", l.caCert, oldClient).CombinedOutput(); err == nil {
		t.Errorf("the client certificate from the old CA still verifies:\n%s", out)
	}

	// 6. A broken server certificate is replaced, nothing else. (With --days 30 the renewal
	// window shrinks to 10 days, so the 30-day client certificate is kept.)
	args = append(args, "--days", "30")
	before = after
	if err := os.WriteFile(l.serverCert, []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, nil, args...)
	checkPKI(t, l, sans)
	if after = digests(t, files); after[l.caCert] != before[l.caCert] || after[l.clientCert] != before[l.clientCert] {
		t.Errorf("repairing the server certificate changed %v", changed(before, after))
	}

	// 7. Without the CA key nothing can be issued: a clear error, not a half-done PKI.
	if err := os.Remove(l.caKey); err != nil {
		t.Fatal(err)
	}
	r = run(t, nil, append(args, "--rotate")...)
	if r.code == 0 || !strings.Contains(r.stderr, "CA key") || !strings.Contains(r.stderr, "--rotate-ca") {
		t.Errorf("--rotate without the CA key: exit %d, stderr:\n%s", r.code, r.stderr)
	}
}

// TestDefaultsAndSudoUser runs the way the guide does (sudo, no --san): the defaults cover the
// host's names and addresses and virbr0, and the client directory belongs to SUDO_USER.
func TestDefaultsAndSudoUser(t *testing.T) {
	needRoot(t)
	needTools(t, "bash", "openssl")
	t.Parallel()
	u, err := user.Lookup("nobody")
	need(t, err == nil, "no user 'nobody': %v", err)
	uid, _ := strconv.Atoi(u.Uid)

	tmp := traversable(t)
	// The parent of the client directory does not exist yet: it must be created owned by
	// the user too (as ~/.config would be).
	l := newLayout(filepath.Join(tmp, "root"), filepath.Join(tmp, "home", ".config", "banlieue", "libvirt"))
	if err := os.MkdirAll(filepath.Join(tmp, "home"), 0o755); err != nil {
		t.Fatal(err)
	}
	// libvirt's default network, not started: its address still has to be in the certificate.
	netXML := filepath.Join(l.root, "etc/libvirt/qemu/networks/default.xml")
	if err := os.MkdirAll(filepath.Dir(netXML), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(netXML, []byte("<network>\n  <name>default</name>\n  <forward mode='nat'/>\n"+
		"  <bridge name='virbr0' stp='on' delay='0'/>\n  <ip address='192.168.122.1' netmask='255.255.255.0'/>\n</network>\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Suites running beside this one add and remove bridges (test/e2e/migration's 198.18.67.1),
	// so only the addresses the host had both before and after the script are required.
	before := hostIPv4(t)
	r := mustRun(t, []string{"SUDO_USER=nobody"}, "--root", l.root, "--client-dir", l.client, "--key-bits", "2048",
		"--extra-san", "kvm-1.example")
	after := hostIPv4(t)

	want := []string{"localhost", "127.0.0.1", "192.168.122.1", "kvm-1.example"}
	if h, err := os.Hostname(); err == nil {
		want = append(want, h)
	}
	for _, ip := range after {
		if slices.Contains(before, ip) {
			want = append(want, ip)
		}
	}
	checkPKI(t, l, want)
	if !strings.Contains(r.stderr, "not restarting") && !strings.Contains(r.stderr, "services are not restarted") {
		t.Errorf("--root should imply --no-restart and say so:\n%s", r.stderr)
	}

	for _, p := range []string{filepath.Join(tmp, "home", ".config"), filepath.Join(tmp, "home", ".config", "banlieue"),
		l.client, l.outCA, l.outClientCert, l.outClientKey} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := int(fi.Sys().(*syscall.Stat_t).Uid); got != uid {
			t.Errorf("%s: owner uid %d, want %d (nobody)", p, got, uid)
		}
	}
	if fi, err := os.Stat(filepath.Join(tmp, "home")); err == nil && int(fi.Sys().(*syscall.Stat_t).Uid) != 0 {
		t.Errorf("an existing directory's owner was changed")
	}
}

// traversable is a temporary directory every user may traverse, as /home is: the script writes
// the client directory as the invoking user, who must reach it.
func traversable(t *testing.T) string {
	t.Helper()
	tmp := t.TempDir()
	for _, d := range []string{filepath.Dir(tmp), tmp} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return tmp
}

// fileState is what the script must not change about a file it was tricked into reaching.
type fileState struct {
	uid, gid uint32
	mode     os.FileMode
	sum      string
}

func stateOf(t *testing.T, path string) fileState {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	s := fileState{uid: st.Uid, gid: st.Gid, mode: fi.Mode()}
	if fi.Mode().IsRegular() {
		s.sum = digest(t, path)
	}
	return s
}

// TestClientDirRefusesLinks plants what was once found (a symlinked cacert.pem in the invoking
// user's client directory, pointing at a file only root may change) and its variants, runs the
// script the way the guide does (as root, SUDO_USER set), and checks that it refused clearly
// and that the file behind the link kept its owner, mode and bytes.
func TestClientDirRefusesLinks(t *testing.T) {
	needRoot(t)
	needTools(t, "bash", "openssl", "runuser")
	t.Parallel()
	u, err := user.Lookup("nobody")
	need(t, err == nil, "no user 'nobody': %v", err)
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)

	for _, tc := range []struct {
		name string
		// plant prepares the client directory; victim is the root-owned file or directory the
		// plant points at.
		plant   func(t *testing.T, client, victim string)
		sudo    bool
		wantErr string
	}{
		{"symlinked cacert.pem", func(t *testing.T, client, victim string) {
			symlink(t, victim, filepath.Join(client, "cacert.pem"))
		}, true, "refusing to write %client%/cacert.pem: it is a symbolic link"},
		{"symlinked clientcert.pem", func(t *testing.T, client, victim string) {
			symlink(t, victim, filepath.Join(client, "clientcert.pem"))
		}, true, "refusing to write %client%/clientcert.pem: it is a symbolic link"},
		{"symlinked clientkey.pem", func(t *testing.T, client, victim string) {
			symlink(t, victim, filepath.Join(client, "clientkey.pem"))
		}, true, "refusing to write %client%/clientkey.pem: it is a symbolic link"},
		{"symlinked cacert.pem, run as root without sudo", func(t *testing.T, client, victim string) {
			symlink(t, victim, filepath.Join(client, "cacert.pem"))
		}, false, "refusing to write %client%/cacert.pem: it is a symbolic link"},
		{"a FIFO where clientkey.pem goes", func(t *testing.T, client, _ string) {
			if err := syscall.Mkfifo(filepath.Join(client, "clientkey.pem"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, true, "refusing to write %client%/clientkey.pem: it exists and is not a regular file"},
		{"a directory where cacert.pem goes", func(t *testing.T, client, _ string) {
			if err := os.Mkdir(filepath.Join(client, "cacert.pem"), 0o700); err != nil {
				t.Fatal(err)
			}
		}, true, "refusing to write %client%/cacert.pem: it exists and is not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tmp := traversable(t)
			l := newLayout(filepath.Join(tmp, "root"), filepath.Join(tmp, "home", "client"))
			if err := os.MkdirAll(l.client, 0o700); err != nil {
				t.Fatal(err)
			}
			if tc.sudo {
				for _, d := range []string{filepath.Dir(l.client), l.client} {
					if err := os.Chown(d, uid, gid); err != nil {
						t.Fatal(err)
					}
				}
			}
			// The victim stands for libvirtd's CA: root's, 0640, in a directory root owns.
			victim := filepath.Join(tmp, "system", "cacert.pem")
			if err := os.MkdirAll(filepath.Dir(victim), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(victim, []byte("the system's CA\n"), 0o640); err != nil {
				t.Fatal(err)
			}
			tc.plant(t, l.client, victim)
			before := stateOf(t, victim)
			var env []string
			if tc.sudo {
				env = []string{"SUDO_USER=nobody"}
			}
			r := run(t, env, "--root", l.root, "--client-dir", l.client, "--key-bits", "2048", "--san", "127.0.0.1")
			want := strings.ReplaceAll(tc.wantErr, "%client%", l.client)
			if r.code != 1 || !strings.Contains(r.stderr, want) {
				t.Errorf("exit %d, want 1 and %q in stderr:\n%s", r.code, want, r.stderr)
			}
			if after := stateOf(t, victim); after != before {
				t.Errorf("the file behind the link changed: %+v, was %+v", after, before)
			}
		})
	}

	// As first found: cacert.pem in the client directory links to libvirtd's own CA, whose
	// bytes it already holds, so the copy is skipped and only chmod and chown used to run.
	t.Run("symlinked cacert.pem to the CA it copies", func(t *testing.T) {
		t.Parallel()
		tmp := traversable(t)
		home := filepath.Join(tmp, "home")
		if err := os.Mkdir(home, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(home, uid, gid); err != nil {
			t.Fatal(err)
		}
		l := newLayout(filepath.Join(tmp, "root"), filepath.Join(home, "client"))
		args := []string{"--root", l.root, "--client-dir", l.client, "--key-bits", "2048", "--san", "127.0.0.1"}
		mustRun(t, []string{"SUDO_USER=nobody"}, args...)
		if err := os.Remove(l.outCA); err != nil {
			t.Fatal(err)
		}
		symlink(t, l.caCert, l.outCA)
		before := stateOf(t, l.caCert)
		r := run(t, []string{"SUDO_USER=nobody"}, args...)
		if want := "refusing to write " + l.outCA + ": it is a symbolic link (to " + l.caCert + ")"; r.code != 1 || !strings.Contains(r.stderr, want) {
			t.Errorf("exit %d, want 1 and %q in stderr:\n%s", r.code, want, r.stderr)
		}
		if after := stateOf(t, l.caCert); after != before || after.uid != 0 {
			t.Errorf("libvirtd's CA changed: %+v, was %+v", after, before)
		}
	})

	// A link in the path to the client directory (not the directory itself) is not caught by a
	// check; running as the user is what keeps root's directory behind it unchanged.
	t.Run("client directory behind a symlinked parent", func(t *testing.T) {
		t.Parallel()
		tmp := traversable(t)
		system := filepath.Join(tmp, "system")
		if err := os.MkdirAll(filepath.Join(system, "libvirt"), 0o755); err != nil {
			t.Fatal(err)
		}
		home := filepath.Join(tmp, "home")
		if err := os.Mkdir(home, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(home, uid, gid); err != nil {
			t.Fatal(err)
		}
		symlink(t, system, filepath.Join(home, "config"))
		l := newLayout(filepath.Join(tmp, "root"), filepath.Join(home, "config", "libvirt"))
		before := stateOf(t, filepath.Join(system, "libvirt"))
		r := run(t, []string{"SUDO_USER=nobody"}, "--root", l.root, "--client-dir", l.client, "--key-bits", "2048", "--san", "127.0.0.1")
		if want := "cannot chmod 700 " + l.client + " as nobody: it must belong to nobody"; r.code != 1 || !strings.Contains(r.stderr, want) {
			t.Errorf("exit %d, want 1 and %q in stderr:\n%s", r.code, want, r.stderr)
		}
		if after := stateOf(t, filepath.Join(system, "libvirt")); after != before {
			t.Errorf("root's directory behind the link changed: %+v, was %+v", after, before)
		}
		if entries, _ := os.ReadDir(filepath.Join(system, "libvirt")); len(entries) != 0 {
			t.Errorf("files written behind the link: %v", entries)
		}
	})

	// The host side refuses links too, before it writes anything.
	t.Run("symlinked CA under the root", func(t *testing.T) {
		t.Parallel()
		tmp := traversable(t)
		l := newLayout(filepath.Join(tmp, "root"), filepath.Join(tmp, "client"))
		victim := filepath.Join(tmp, "elsewhere.pem")
		if err := os.WriteFile(victim, []byte("not a CA\n"), 0o640); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(l.caCert), 0o755); err != nil {
			t.Fatal(err)
		}
		symlink(t, victim, l.caCert)
		before := stateOf(t, victim)
		r := run(t, nil, "--root", l.root, "--client-dir", l.client, "--key-bits", "2048", "--san", "127.0.0.1")
		if want := "refusing to write " + l.caCert + ": it is a symbolic link"; r.code != 1 || !strings.Contains(r.stderr, want) {
			t.Errorf("exit %d, want 1 and %q in stderr:\n%s", r.code, want, r.stderr)
		}
		if after := stateOf(t, victim); after != before {
			t.Errorf("the file behind the link changed: %+v, was %+v", after, before)
		}
		if _, err := os.Stat(l.client); !os.IsNotExist(err) {
			t.Errorf("the client directory was created before the refusal: %v", err)
		}
	})
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// TestRealLibvirtd serves the generated PKI and libvirtd.conf from a real libvirtd and asks it
// for its storage pools with virsh, using the client directory as pkipath — exactly what a user
// does after the script. The daemon runs in a private mount namespace (libvirt's state
// directories are bind mounts of temporary ones) on its own port, so it cannot disturb the
// project's lab libvirtd on 16514 or a system one.
func TestRealLibvirtd(t *testing.T) {
	needRoot(t)
	needTools(t, "bash", "openssl", "libvirtd", "virsh", "unshare")
	_, err := user.Lookup("libvirt-qemu")
	need(t, err == nil, "user libvirt-qemu is missing; libvirt's QEMU driver will not load (hack/libvirt-lab.sh start creates it)")
	need(t, exec.Command("unshare", "--mount", "--propagation", "private", "true").Run() == nil,
		"cannot create a mount namespace here")
	t.Parallel()

	tmp := t.TempDir()
	l := newLayout(filepath.Join(tmp, "root"), filepath.Join(tmp, "client"))
	mustRun(t, nil, "--root", l.root, "--client-dir", l.client, "--no-restart", "--key-bits", "2048",
		"--san", "127.0.0.1", "--san", "localhost")

	port := freePort(t, 16600)
	state := filepath.Join(tmp, "state")
	sock := filepath.Join(tmp, "sock")
	logFile := filepath.Join(tmp, "libvirtd.log")
	pidFile := filepath.Join(tmp, "libvirtd.pid")
	for _, d := range []string{sock, state + "/etc", state + "/lib", state + "/cache", state + "/log", state + "/run"} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// The script's libvirtd.conf first (listen_tls, listen_tcp, auth_tls come from it), then
	// what only this test needs: the generated files' paths under the temporary root, an own
	// port, and sockets and log out of the way.
	conf, err := os.ReadFile(l.conf)
	if err != nil {
		t.Fatal(err)
	}
	conf = append(conf, fmt.Sprintf(`
listen_addr = "127.0.0.1"
tls_port = "%d"
key_file = %q
cert_file = %q
ca_file = %q
unix_sock_dir = %q
unix_sock_group = "root"
unix_sock_ro_perms = "0700"
unix_sock_rw_perms = "0700"
auth_unix_ro = "none"
auth_unix_rw = "none"
log_outputs = "3:file:%s"
`, port, l.serverKey, l.serverCert, l.caCert, sock, logFile)...)
	daemonConf := filepath.Join(tmp, "daemon.conf")
	if err := os.WriteFile(daemonConf, conf, 0o600); err != nil {
		t.Fatal(err)
	}

	binds := ""
	for _, m := range [][2]string{{"etc", "/etc/libvirt"}, {"lib", "/var/lib/libvirt"}, {"cache", "/var/cache/libvirt"},
		{"log", "/var/log/libvirt"}, {"run", "/run/libvirt"}} {
		binds += fmt.Sprintf("mkdir -p %s && mount --bind %s %s && ", m[1], filepath.Join(state, m[0]), m[1])
	}
	start := time.Now()
	out, err := exec.Command("unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
		binds+`exec libvirtd --daemon --listen --config "$0" --pid-file "$1"`, daemonConf, pidFile).CombinedOutput()
	if err != nil {
		t.Fatalf("starting libvirtd: %v\n%s\n%s", err, out, tail(logFile))
	}
	pid := waitPID(t, pidFile)
	t.Cleanup(func() { stopProcess(t, "libvirtd", pid) })

	uri := fmt.Sprintf("qemu+tls://127.0.0.1:%d/system?pkipath=%s", port, l.client)
	var last []byte
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		last, err = exec.CommandContext(ctx, "virsh", "-c", uri, "pool-list", "--all").CombinedOutput()
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) || !testenv.ProcessAlive(pid) {
			t.Fatalf("virsh -c %s pool-list --all: %v\n%s\nlibvirtd log:\n%s", uri, err, last, tail(logFile))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(string(last), "Name") || !strings.Contains(string(last), "State") {
		t.Errorf("pool-list answered without its table header:\n%s", last)
	}
	t.Logf("libvirtd answered pool-list over TLS %.1fs after start", time.Since(start).Seconds())

	// The name in the URI is checked against the server certificate: localhost is covered.
	uriName := fmt.Sprintf("qemu+tls://localhost:%d/system?pkipath=%s", port, l.client)
	if out, err := exec.Command("virsh", "-c", uriName, "uri").CombinedOutput(); err != nil {
		t.Errorf("virsh over localhost: %v\n%s", err, out)
	}

	// The client certificate is the credential: one from a CA libvirtd does not trust is
	// turned away by the server (the client itself still trusts the server's CA).
	rogue := filepath.Join(tmp, "rogue")
	if err := os.MkdirAll(rogue, 0o700); err != nil {
		t.Fatal(err)
	}
	rogueCA := writeRogueClient(t, rogue)
	// cacert.pem holds both CAs: virsh refuses to present a certificate its own cacert.pem
	// does not cover, and this is about what the server does.
	if err := os.WriteFile(filepath.Join(rogue, "cacert.pem"), append(mustRead(t, l.caCert), rogueCA...), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	rogueURI := fmt.Sprintf("qemu+tls://127.0.0.1:%d/system?pkipath=%s", port, rogue)
	out, err = exec.CommandContext(ctx, "virsh", "-c", rogueURI, "pool-list", "--all").CombinedOutput()
	if err == nil {
		t.Fatalf("libvirtd accepted a client certificate from an untrusted CA:\n%s", out)
	}
	t.Logf("untrusted client refused: %s", strings.TrimSpace(string(out)))
	for i := 0; ; i++ {
		if strings.Contains(tail(logFile), "Failed to verify peer's certificate") {
			break
		}
		if i == 50 {
			t.Errorf("libvirtd's log does not show it rejecting the untrusted client:\n%s", tail(logFile))
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// writeRogueClient writes clientcert.pem and clientkey.pem into dir, signed by a fresh CA
// unrelated to the script's, and returns that CA's PEM.
func writeRogueClient(t *testing.T, dir string) []byte {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "rogue CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "banlieue-client"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), BasicConstraintsValid: true,
		// libvirt insists on keyEncipherment in client certificates, whatever the key type.
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "clientcert.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "clientkey.pem"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// freePort returns preferred when nothing listens there, else any free port.
func freePort(t *testing.T, preferred int) int {
	t.Helper()
	for _, addr := range []string{fmt.Sprintf("127.0.0.1:%d", preferred), "127.0.0.1:0"} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		return port
	}
	t.Fatal("no free TCP port on 127.0.0.1")
	return 0
}

func waitPID(t *testing.T, pidFile string) int {
	t.Helper()
	for i := 0; i < 100; i++ {
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				return pid
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("libvirtd wrote no PID to %s", pidFile)
	return 0
}

func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func equalMaps(a, b map[string]string) bool { return len(changed(a, b)) == 0 }

// changed lists the keys whose values differ, sorted.
func changed(a, b map[string]string) []string {
	var out []string
	for k, v := range a {
		if b[k] != v {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// TestNoSystemdRestart runs the script the way the guide does on a host without systemd — no
// --root, no --no-restart — so it writes /etc/pki and /etc/libvirt, starts virtlogd and
// 'libvirtd --listen --daemon' itself and checks that libvirtd answers over TLS on 16514. To
// keep the machine untouched it runs in private mount and network namespaces: /etc is an
// overlay whose writes land in a temporary directory, /run and libvirt's state directories
// are bind mounts of temporary ones, and 16514 is the namespace's own loopback port.
func TestNoSystemdRestart(t *testing.T) {
	needRoot(t)
	needTools(t, "bash", "openssl", "libvirtd", "virtlogd", "virsh", "unshare", "nsenter", "ip")
	_, err := user.Lookup("libvirt-qemu")
	need(t, err == nil, "user libvirt-qemu is missing; libvirt's QEMU driver will not load (hack/libvirt-lab.sh start creates it)")
	need(t, !isDir("/run/systemd/system"), "systemd is PID 1 here; this test covers the path without it")
	t.Parallel()

	tmp := t.TempDir()
	d := func(name string) string { return filepath.Join(tmp, name) }
	for _, name := range []string{"upper", "work", "run", "lib", "cache", "log", "client"} {
		if err := os.MkdirAll(d(name), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	setup := fmt.Sprintf(`set -e
ip link set lo up
mount -t overlay overlay -o lowerdir=/etc,upperdir=%s,workdir=%s /etc
mount --bind %s /run
mkdir -p /run/libvirt
mount --bind %s /var/lib/libvirt
mount --bind %s /var/cache/libvirt
mount --bind %s /var/log/libvirt
exec bash "$0" "$@"`, d("upper"), d("work"), d("run"), d("lib"), d("cache"), d("log"))
	probe := exec.Command("unshare", "--mount", "--net", "--propagation", "private", "/bin/sh", "-c",
		fmt.Sprintf("mount -t overlay overlay -o lowerdir=/etc,upperdir=%s,workdir=%s /etc", d("upper"), d("work")))
	out, err := probe.CombinedOutput()
	need(t, err == nil, "cannot create mount+network namespaces with an overlay on /etc here: %v %s", err, out)

	args := []string{"--client-dir", d("client"), "--key-bits", "2048"}
	t.Cleanup(func() {
		for _, name := range []string{"libvirtd", "virtlogd"} {
			if b, err := os.ReadFile(filepath.Join(d("run"), name+".pid")); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
					stopProcess(t, name, pid)
				}
			}
		}
	})
	inNS := func(prefix []string) result {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, prefix[0], append(append(prefix[1:], script(t)), args...)...)
		cmd.Env = slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, "SUDO_USER=") })
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		if strings.Contains(o.String()+e.String(), "PRIVATE KEY") {
			t.Fatal("the script printed a private key")
		}
		if err != nil {
			t.Fatalf("script: %v\nstdout:\n%s\nstderr:\n%s\nlibvirtd log:\n%s", err, o.String(), e.String(),
				tail(filepath.Join(d("log"), "libvirtd.log")))
		}
		return result{stdout: o.String(), stderr: e.String()}
	}
	pidOf := func(name string) int {
		t.Helper()
		return waitPID(t, filepath.Join(d("run"), name+".pid"))
	}

	// First run: creates everything and starts both daemons.
	r := inNS([]string{"unshare", "--mount", "--net", "--propagation", "private", "/bin/sh", "-c", setup})
	for _, want := range []string{"starting virtlogd", "starting libvirtd --listen --daemon", "libvirtd answers over TLS at 127.0.0.1:16514"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("first run: stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	for _, f := range []string{"pki/CA/cacert.pem", "pki/CA/private/cakey.pem", "pki/libvirt/servercert.pem",
		"pki/libvirt/private/serverkey.pem", "pki/libvirt/clientcert.pem", "pki/libvirt/private/clientkey.pem", "libvirt/libvirtd.conf"} {
		if _, err := os.Stat(filepath.Join(d("upper"), f)); err != nil {
			t.Errorf("/etc/%s was not written: %v", f, err)
		}
	}
	libvirtdPID, virtlogdPID := pidOf("libvirtd"), pidOf("virtlogd")
	ns := []string{"nsenter", fmt.Sprintf("--mount=/proc/%d/ns/mnt", virtlogdPID), fmt.Sprintf("--net=/proc/%d/ns/net", virtlogdPID), "bash"}

	// Second run, nothing to change: the daemon is left alone.
	r = inNS(ns)
	if !strings.Contains(r.stderr, "not restarting") || pidOf("libvirtd") != libvirtdPID {
		t.Errorf("an unchanged re-run restarted libvirtd (pid %d -> %d):\n%s", libvirtdPID, pidOf("libvirtd"), r.stderr)
	}

	// --rotate: new certificates, so libvirtd is restarted and must accept the new client.
	args = append(args, "--rotate")
	r = inNS(ns)
	if !strings.Contains(r.stderr, "libvirtd answers over TLS") || pidOf("libvirtd") == libvirtdPID {
		t.Errorf("--rotate did not restart libvirtd and check it:\n%s", r.stderr)
	}
	if pidOf("virtlogd") != virtlogdPID {
		t.Errorf("virtlogd was restarted although it was running")
	}
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// stopProcess stops a daemon started by the test, by PID, after checking it still is one.
func stopProcess(t *testing.T, name string, pid int) {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil || filepath.Base(exe) != name {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for i := 0; i < 100; i++ {
		if !testenv.ProcessAlive(pid) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%s (pid %d) ignored SIGTERM; killing it", name, pid)
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

// hostIPv4 lists the host's IPv4 addresses, as the bootstrap script's defaults read them.
func hostIPv4(t *testing.T) []string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var ips []string
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
			ips = append(ips, ipn.IP.String())
		}
	}
	return ips
}
