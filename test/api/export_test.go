package api

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
)

// TestVirtualMachineExportAdmission: the API server refuses an export without exactly one
// target, a repository with a tag or digest, and any change to the spec; the message names the
// rule, so a user sees why before any Job runs.
func TestVirtualMachineExportAdmission(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ns = "team-export"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	export := func(name string, target banlieuev1.ExportTarget) *banlieuev1.VirtualMachineExport {
		return &banlieuev1.VirtualMachineExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: banlieuev1.VirtualMachineExportSpec{VirtualMachineName: "web-01", Target: target}}
	}
	pvc := &banlieuev1.ExportPVCTarget{ClaimName: "backups"}
	registry := func(repo string) *banlieuev1.ExportRegistryTarget {
		return &banlieuev1.ExportRegistryTarget{Repository: repo,
			CredentialsSecretRef: &banlieuev1.ExportSecretReference{Name: "push"}}
	}

	for _, tc := range []struct {
		name   string
		target banlieuev1.ExportTarget
	}{
		{"to-claim", banlieuev1.ExportTarget{PersistentVolumeClaim: pvc}},
		{"to-registry", banlieuev1.ExportTarget{Registry: registry("registry.example/team/web-01")}},
		{"to-registry-port", banlieuev1.ExportTarget{Registry: registry("localhost:5000/web-01")}},
		{"anonymous", banlieuev1.ExportTarget{Registry: &banlieuev1.ExportRegistryTarget{Repository: "registry.example/web"}}},
	} {
		if err := env.Client.Create(ctx, export(tc.name, tc.target)); err != nil {
			t.Errorf("%s: a valid export must be admitted, got %v", tc.name, err)
		}
	}

	for _, tc := range []struct {
		name   string
		target banlieuev1.ExportTarget
		want   string
	}{
		{"no-target", banlieuev1.ExportTarget{}, "exactly one of persistentVolumeClaim or registry"},
		{"two-targets", banlieuev1.ExportTarget{PersistentVolumeClaim: pvc, Registry: registry("registry.example/web")},
			"exactly one of persistentVolumeClaim or registry"},
		{"tagged", banlieuev1.ExportTarget{Registry: registry("registry.example/web:v1")}, "repository takes no tag or digest"},
		{"tagged-port", banlieuev1.ExportTarget{Registry: registry("localhost:5000/web:v1")}, "repository takes no tag or digest"},
		{"by-digest", banlieuev1.ExportTarget{Registry: registry("registry.example/web@sha256:" + strings.Repeat("a", 64))},
			"repository takes no tag or digest"},
		{"empty-claim", banlieuev1.ExportTarget{PersistentVolumeClaim: &banlieuev1.ExportPVCTarget{}}, "spec.target.persistentVolumeClaim.claimName"},
	} {
		err := env.Client.Create(ctx, export(tc.name, tc.target), client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: want a refusal containing %q, got %v", tc.name, tc.want, err)
		}
	}
	noVM := export("no-vm", banlieuev1.ExportTarget{PersistentVolumeClaim: pvc})
	noVM.Spec.VirtualMachineName = ""
	if err := env.Client.Create(ctx, noVM, client.DryRunAll); err == nil || !strings.Contains(err.Error(), "spec.virtualMachineName") {
		t.Errorf("an export naming no VM: want a refusal naming spec.virtualMachineName, got %v", err)
	}

	// The spec is immutable: a copy in flight must not change VM or target under its Job.
	for _, patch := range []string{
		`{"spec":{"virtualMachineName":"db-01"}}`,
		`{"spec":{"target":{"persistentVolumeClaim":{"claimName":"elsewhere"}}}}`,
		`{"spec":{"target":{"persistentVolumeClaim":null,"registry":{"repository":"registry.example/web"}}}}`,
	} {
		obj := &banlieuev1.VirtualMachineExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "to-claim"}}
		err := env.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch)))
		if err == nil || !strings.Contains(err.Error(), "spec is immutable") {
			t.Errorf("patch %s: want a refusal saying the spec is immutable, got %v", patch, err)
		}
	}
	// The status is written freely (by the controller), and its phase is an enum.
	got := &banlieuev1.VirtualMachineExport{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "to-registry"}, got); err != nil {
		t.Fatal(err)
	}
	size := int64(1 << 20)
	got.Status = banlieuev1.VirtualMachineExportStatus{Phase: banlieuev1.ExportReady,
		Digest:   "sha256:" + strings.Repeat("b", 64),
		ImageRef: "registry.example/team/web-01@sha256:" + strings.Repeat("c", 64), SizeBytes: &size}
	if err := env.Client.Status().Update(ctx, got); err != nil {
		t.Errorf("the controller's status of a Ready export must be admitted, got %v", err)
	}
	got.Status.Phase = "Done"
	if err := env.Client.Status().Update(ctx, got); err == nil || !strings.Contains(err.Error(), "status.phase") {
		t.Errorf("an unknown phase: want a refusal naming status.phase, got %v", err)
	}
}
