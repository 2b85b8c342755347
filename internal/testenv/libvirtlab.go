package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// LibvirtLab is the libvirtd that hack/libvirt-lab.sh runs with TLS on 127.0.0.1.
type LibvirtLab struct {
	// Dir holds the lab's state, env file and PID files.
	Dir string
	// Endpoint is the transport URI, e.g. qemu+tls://127.0.0.1/system.
	Endpoint string
	// PKI holds cacert.pem, clientcert.pem, clientkey.pem and the untrusted/ and other-ca/ sets.
	PKI string
}

// RequireLibvirtLab returns the lab named by BANLIEUE_LIBVIRT_LAB, skipping the test without one
// (failing under CI, where a skip would hide that nothing was tested).
func RequireLibvirtLab(t testing.TB) LibvirtLab {
	t.Helper()
	dir := os.Getenv("BANLIEUE_LIBVIRT_LAB")
	if dir == "" {
		MissingPrerequisite(t, "BANLIEUE_LIBVIRT_LAB is not set; run hack/libvirt-lab.sh start and source its env file")
	}
	lab := LabFromEnv(dir)
	lab.revive(t)
	return lab
}

// revive starts the lab's libvirtd again on its state when the process of its PID file is gone,
// and says so in the test's log. The lab's libvirtd 9.0 has been seen to exit as a finished
// test's manager closed its connections, its log ending on "unexpected incomplete domain
// callback" (docs/testing.md, "When the lab's libvirtd exits"): the next test then checks its
// own promises instead of failing on the last one's teardown. A test that stops the daemon on
// purpose starts it again itself, before its end.
func (l LibvirtLab) revive(t testing.TB) {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(l.Dir, "libvirtd.pid"))
	if err != nil {
		return // not a lab of hack/libvirt-lab.sh's making: nothing to revive
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(text)))
	if err != nil || syscall.Kill(pid, 0) != syscall.ESRCH {
		return
	}
	t.Logf("the lab libvirtd (pid %d, %s) has exited: starting it again on its state; its log: %s",
		pid, l.Endpoint, filepath.Join(l.Dir, "log", "libvirtd.log"))
	l.Script(t, "restart-libvirtd")
}

// RequirePodLibvirtLab is RequireLibvirtLab with Endpoint the address the real node's pods reach
// the lab host on (BANLIEUE_LIBVIRT_POD_ENDPOINT, the node's bridge, which the host reaches too):
// for a Provider whose provider or import pods run on the node.
func RequirePodLibvirtLab(t testing.TB) LibvirtLab {
	t.Helper()
	lab := RequireLibvirtLab(t)
	lab.Endpoint = os.Getenv("BANLIEUE_LIBVIRT_POD_ENDPOINT")
	if lab.Endpoint == "" {
		MissingPrerequisite(t, "BANLIEUE_LIBVIRT_POD_ENDPOINT is not set: hack/libvirt-lab.sh start (a lab from before the node's address is restarted by it) and source its env file")
	}
	return lab
}

// Read returns a file of the lab's PKI, e.g. "clientkey.pem" or "untrusted/clientcert.pem".
func (l LibvirtLab) Read(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(l.PKI, name))
	if err != nil {
		t.Fatalf("reading lab PKI: %v", err)
	}
	return data
}

// LabFromEnv is the lab of hack/libvirt-lab.sh in dir, its endpoint and PKI taken from
// BANLIEUE_LIBVIRT_ENDPOINT and BANLIEUE_LIBVIRT_PKI when set (the lab's env file sets them).
func LabFromEnv(dir string) LibvirtLab {
	lab := LibvirtLab{Dir: dir, Endpoint: os.Getenv("BANLIEUE_LIBVIRT_ENDPOINT"), PKI: os.Getenv("BANLIEUE_LIBVIRT_PKI")}
	if lab.Endpoint == "" {
		lab.Endpoint = "qemu+tls://127.0.0.1/system"
	}
	if lab.PKI == "" {
		lab.PKI = filepath.Join(dir, "pki")
	}
	return lab
}

// Credentials are a Secret secret holding the lab's trusted client certificate and key
// (tls.crt, tls.key) and a ConfigMap ca holding its CA (ca.crt), in namespace ns: what a
// Provider's connection refers to.
func (l LibvirtLab) Credentials(ns, secret, ca string) ([]client.Object, error) {
	pem := map[string][]byte{}
	for _, name := range []string{"clientcert.pem", "clientkey.pem", "cacert.pem"} {
		data, err := os.ReadFile(filepath.Join(l.PKI, name))
		if err != nil {
			return nil, fmt.Errorf("reading lab PKI: %w", err)
		}
		pem[name] = data
	}
	return []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secret, Namespace: ns},
			Data: map[string][]byte{"tls.crt": pem["clientcert.pem"], "tls.key": pem["clientkey.pem"]}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ca, Namespace: ns},
			Data: map[string]string{"ca.crt": string(pem["cacert.pem"])}},
	}, nil
}

// Provider is a libvirt Provider name in ns connecting to the lab with the Credentials secret and
// ca.
func (l LibvirtLab) Provider(ns, name, secret, ca string, caps banlieuev1.ProviderCapabilities) *banlieuev1.Provider {
	return &banlieuev1.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: banlieuev1.ProviderSpec{
			ProviderClassRef: banlieuev1.LocalObjectReference{Name: "libvirt"},
			Connection: banlieuev1.ProviderConnection{
				Endpoint:       l.Endpoint,
				CredentialsRef: banlieuev1.LocalObjectReference{Name: secret},
				CABundle:       &banlieuev1.CABundleSource{ConfigMapRef: &banlieuev1.KeySelector{Name: ca}},
			},
			Capabilities: caps,
		},
	}
}

// CreateLabNamespace creates namespace ns holding the lab's Credentials secret and ca.
func (e *Env) CreateLabNamespace(ctx context.Context, t testing.TB, lab LibvirtLab, ns, secret, ca string) {
	t.Helper()
	creds, err := lab.Credentials(ns, secret, ca)
	if err != nil {
		t.Fatal(err)
	}
	e.Create(ctx, t, append([]client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}}, creds...)...)
}

// DaemonPID is the lab libvirtd's PID, from the file hack/libvirt-lab.sh keeps in Dir: for the
// suites that kill the daemon, or read its memory and open files.
func (l LibvirtLab) DaemonPID(t testing.TB) int {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(l.Dir, "libvirtd.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(text)))
	if err != nil {
		t.Fatalf("libvirtd.pid: %v", err)
	}
	return pid
}

// Script runs hack/libvirt-lab.sh with args and the lab's Dir (start, restart-libvirtd,
// hold-start DOMAIN, forget-start DOMAIN, …), failing the test with its output when it fails.
func (l LibvirtLab) Script(t testing.TB, args ...string) {
	t.Helper()
	out, err := exec.Command(filepath.Join(RepoRoot(), "hack", "libvirt-lab.sh"), append(args, l.Dir)...).CombinedOutput()
	if err != nil {
		t.Fatalf("hack/libvirt-lab.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
