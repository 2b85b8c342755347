package vmexport

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"banlieue.io/banlieue/internal/imagebuilder/build"
	"banlieue.io/banlieue/internal/testenv"
)

// TestExportCommandKilledLab runs `banlieue provider libvirt export` as a user holding only what
// docs/architecture.md says the command reads (get, by name, on the machine, its Provider, the
// credentials Secret and the CA ConfigMap), against the real API server and host a of
// hack/migration-lab.sh. Without the Secret it is refused before touching the host. Killed with
// SIGKILL while it downloads (its host copy and partial file left behind, as a crash leaves
// them), run again with the same --id it replaces both and publishes the machine's disk, and
// nothing of the export is left on the host. Pushed to a registry, the printed image, imported
// by the imagebuilder's OCI source, is the disk.
func TestExportCommandKilledLab(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	const size, data = 320 << 20, 256 << 20 // long enough a download to be killed in
	fx := newMachineFixture(ctx, t, size, data)
	fx.machine(ctx, t, fx.vol.Name)
	bin := testenv.Banlieue(t)

	grant := func(user string, withSecret bool) string {
		rules := []rbacv1.PolicyRule{
			{APIGroups: []string{"infrastructure.banlieue.io"}, Resources: []string{"libvirtmachines"}, ResourceNames: []string{"web"}, Verbs: []string{"get"}},
			{APIGroups: []string{"banlieue.io"}, Resources: []string{"providers"}, ResourceNames: []string{"host-a"}, Verbs: []string{"get"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"host-ca"}, Verbs: []string{"get"}},
		}
		if withSecret {
			rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"host-creds"}, Verbs: []string{"get"}})
		}
		fx.env.Create(ctx, t,
			&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: fx.ns, Name: user}, Rules: rules},
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: fx.ns, Name: user},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}})
		return testenv.KubeconfigOf(t, fx.env.CertUser(t, user))
	}
	out := t.TempDir()
	export := func(kubeconfig string) *exec.Cmd {
		cmd := exec.Command(bin, "provider", "libvirt", "export", "--kubeconfig", kubeconfig,
			"--machine", "web", "--namespace", fx.ns, "--output-dir", out, "--id", "crash-test")
		cmd.Env = append(os.Environ(), "KUBECONFIG=")
		return cmd
	}
	copyName := CopyName(fx.vol.Name, "crash-test")
	hostVolumes := func() []string {
		vols, err := fx.host.c.StoragePoolListAllVolumes(ctx, fx.host.pool)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, v := range vols {
			names = append(names, v.Name)
		}
		return names
	}

	// Least privilege: without the Secret the command stops at the API server.
	if b, err := export(grant("exporter-nosecret", false)).CombinedOutput(); err == nil || !strings.Contains(string(b), "forbidden") {
		t.Fatalf("export without the credentials Secret: %v\n%s", err, b)
	}
	if v := hostVolumes(); len(v) != 2 {
		t.Fatalf("a refused export touched the host: %v", v)
	}

	kubeconfig := grant("exporter", true)
	cmd := export(kubeconfig)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	part := filepath.Join(out, DiskFile+".part")
	testenv.Eventually(t, 3*time.Minute, "the export downloading", func() error {
		if fi, err := os.Stat(part); err == nil && fi.Size() > 0 {
			return nil
		}
		return fmt.Errorf("no partial download yet; the command says %q", stderr.String())
	})
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if _, err := fx.host.c.StorageVolLookupByName(ctx, fx.host.pool, copyName); err != nil {
		t.Fatalf("killed mid-download, the export left no copy on the host (%v): the kill came too late to test anything", err)
	}
	if _, err := os.Stat(filepath.Join(out, DiskFile)); err == nil {
		t.Fatal("a killed export published disk.qcow2")
	}

	var stdout bytes.Buffer
	again := export(kubeconfig)
	again.Stdout, again.Stderr = &stdout, &stderr
	if err := again.Run(); err != nil {
		t.Fatalf("the export run again: %v\n%s", err, stderr.String())
	}
	var res MachineResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("result %q: %v", stdout.String(), err)
	}
	if d := testenv.FileSHA256(t, filepath.Join(out, DiskFile)); "sha256:"+d != res.Digest {
		t.Fatalf("published file %s, result %s", d, res.Digest)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 2 {
		t.Fatalf("the target holds %v, want the disk and its digest", entries)
	}
	run(t, "qemu-io", "-f", "qcow2", "-c", fmt.Sprintf("read -P %#x 0 1M", baseByte),
		"-c", fmt.Sprintf("read -P %#x 1M %d", vmByte, data), "-c", fmt.Sprintf("read -P %#x %d %d", baseByte, 1<<20+data, size-1<<20-data),
		filepath.Join(out, DiskFile))
	if v := hostVolumes(); len(v) != 2 {
		t.Fatalf("the export left volumes on the host: %v", v)
	}
	if strings.Contains(stderr.String(), "PRIVATE KEY") {
		t.Fatal("the command's output holds key material")
	}

	// To a registry: the printed image, pulled by the imagebuilder's OCI source, is the disk.
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	push := exec.Command(bin, "provider", "libvirt", "export", "--kubeconfig", kubeconfig,
		"--machine", "web", "--namespace", fx.ns, "--registry", host+"/exports/web:1", "--insecure-registry",
		"--scratch-dir", t.TempDir())
	push.Env = append(os.Environ(), "KUBECONFIG=", "DOCKER_CONFIG="+t.TempDir())
	stdout.Reset()
	stderr.Reset()
	push.Stdout, push.Stderr = &stdout, &stderr
	if err := push.Run(); err != nil {
		t.Fatalf("export to a registry: %v\n%s", err, stderr.String())
	}
	var pushed MachineResult
	if err := json.Unmarshal(stdout.Bytes(), &pushed); err != nil || !strings.HasPrefix(pushed.Image, host+"/exports/web@sha256:") {
		t.Fatalf("result %q: %v", stdout.String(), err)
	}
	// qemu-img's copy is not promised to be byte-identical each time; only logged.
	t.Logf("the disk exported twice: %s, then %s", res.Digest, pushed.Digest)
	limits := build.DefaultLimits()
	limits.InsecureRegistries = []string{host}
	limits.AllowNetworks = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	artifact := filepath.Join(t.TempDir(), "disk.raw")
	if _, err := build.Build(ctx, build.Options{VMImage: "restored", From: pushed.Image, Output: artifact, Limits: limits}, io.Discard); err != nil {
		t.Fatalf("import of the pushed export: %v", err)
	}
	run(t, "qemu-io", "-f", "raw", "-c", fmt.Sprintf("read -P %#x 0 1M", baseByte),
		"-c", fmt.Sprintf("read -P %#x 1M %d", vmByte, data), artifact)
	if v := hostVolumes(); len(v) != 2 {
		t.Fatalf("the push left volumes on the host: %v", v)
	}
}
