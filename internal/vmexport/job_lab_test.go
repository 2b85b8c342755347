package vmexport

import (
	"banlieue.io/banlieue/internal/vmexport/exportjob"
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/imagebuilder/build"
	"banlieue.io/banlieue/internal/jobbounds"
	"banlieue.io/banlieue/internal/testenv"
)

// TestExportJobCommandLab runs the export exportjob.Job's own command line (exportjob.Job's args, with the pod's
// paths pointed at temporary ones) as a user holding only the export account's grants (the
// Provider, its credentials Secret and CA, by name: no machine), against host a of
// hack/migration-lab.sh and a registry. Its termination message, read as the controller reads
// it, is a Ready result; the pushed image, imported by the imagebuilder's OCI source, holds the
// VM's bytes over the base's; nothing of the export stays on the host.
func TestExportJobCommandLab(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	const size, data = 64 << 20, 16 << 20
	fx := newMachineFixture(ctx, t, size, data)
	m := fx.machine(ctx, t, fx.vol.Name)
	bin := testenv.Banlieue(t)

	const user = "export-account"
	fx.env.Create(ctx, t,
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: fx.ns, Name: user}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"banlieue.io"}, Resources: []string{"providers"}, ResourceNames: []string{"host-a"}, Verbs: []string{"get"}},
			{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"host-creds"}, Verbs: []string{"get"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"host-ca"}, Verbs: []string{"get"}},
		}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: fx.ns, Name: user},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}})
	kubeconfig := testenv.KubeconfigOf(t, fx.env.CertUser(t, user))

	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	repo := host + "/exports/web"
	e := &banlieuev1.VirtualMachineExport{ObjectMeta: metav1.ObjectMeta{Namespace: fx.ns, Name: "web-push", UID: "5b0d9c1e-0000-4000-8000-00000000abcd"},
		Spec: banlieuev1.VirtualMachineExportSpec{VirtualMachineName: "web",
			Target: banlieuev1.ExportTarget{Registry: &banlieuev1.ExportRegistryTarget{Repository: repo}}}}
	vol, err := exportjob.MachineVolume(m, "")
	if err != nil {
		t.Fatal(err)
	}
	job := exportjob.Job(exportjob.JobSpec{Export: e, Namespace: "banlieue-imagebuild", Image: "unused", ServiceAccount: "unused",
		Volume: VolumeRef{ProviderNamespace: fx.ns, Provider: "host-a", Domain: m.Spec.DomainName, Pool: m.Spec.Pool, Volume: vol},
		Bounds: jobbounds.DefaultImport()})
	result := filepath.Join(t.TempDir(), "termination-log")
	var args []string
	for _, a := range job.Spec.Template.Spec.Containers[0].Args {
		switch a {
		case exportjob.ScratchMount:
			a = t.TempDir()
		case corev1.TerminationMessagePathDefault:
			a = result
		}
		args = append(args, a)
	}
	// The lab's registry speaks plain HTTP; the exportjob.Job's pushes are to the user's registry.
	cmd := exec.Command(bin, append(args, "--kubeconfig", kubeconfig, "--insecure-registry")...)
	cmd.Env = append(os.Environ(), "KUBECONFIG=", "DOCKER_CONFIG="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the exportjob.Job's command: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "PRIVATE KEY") {
		t.Fatal("the command's output holds key material")
	}
	message, err := os.ReadFile(result)
	if err != nil {
		t.Fatal(err)
	}
	done := &batchv1.Job{ObjectMeta: job.ObjectMeta, Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}}
	o := exportjob.JobOutcome(done, string(message), repo)
	if o.Phase != banlieuev1.ExportReady || !strings.HasPrefix(o.Image, repo+"@sha256:") || o.Size <= 0 {
		t.Fatalf("outcome %+v of report %s", o, message)
	}

	limits := build.DefaultLimits()
	limits.InsecureRegistries = []string{host}
	limits.AllowNetworks = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	artifact := filepath.Join(t.TempDir(), "disk.raw")
	if _, err := build.Build(ctx, build.Options{VMImage: "restored", From: o.Image, Output: artifact, Limits: limits}, io.Discard); err != nil {
		t.Fatalf("import of the pushed export: %v", err)
	}
	run(t, "qemu-io", "-f", "raw", "-c", fmt.Sprintf("read -P %#x 0 1M", baseByte),
		"-c", fmt.Sprintf("read -P %#x 1M %d", vmByte, data),
		"-c", fmt.Sprintf("read -P %#x %d %d", baseByte, 1<<20+data, size-1<<20-data), artifact)
	vols, err := fx.host.c.StoragePoolListAllVolumes(ctx, fx.host.pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vols {
		if strings.Contains(v.Name, ".export-") {
			t.Errorf("the export left %s on the host", v.Name)
		}
	}
}
