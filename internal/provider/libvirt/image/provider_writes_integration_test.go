package image

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/ssa"
	"banlieue.io/banlieue/internal/testenv"
)

// TestProviderWritesAdmission installs config/admission/provider-writes.yaml and the shipped
// banlieue-provider-libvirt ClusterRole, bound to two provider accounts, and writes as each:
// RBAC lets both write every Provider's status, every VMImage's rows and every LibvirtMachine;
// the policy lets each change only its own (docs/security.md, "Provider accounts write only
// their own").
func TestProviderWritesAdmission(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, ns := range []string{admBuildNs, admSystemNs} {
		env.Create(ctx, t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	installAdmission(ctx, t, env.Client, "provider-writes.yaml")
	env.Create(ctx, t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "banlieue-provider-accounts", Namespace: admBuildNs},
		Data: map[string]string{
			admSystemNs + "." + accountA + ".provider": admSystemNs + "/host-a",
			admSystemNs + "." + accountB + ".provider": admSystemNs + "/host-b",
		}})
	var role rbacv1.ClusterRole
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", "provider-libvirt", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &role); err != nil {
		t.Fatal(err)
	}
	env.Create(ctx, t, &role)
	var subjects []rbacv1.Subject
	for _, a := range []string{accountA, accountB, unknownAcct} {
		subjects = append(subjects, rbacv1.Subject{Kind: "ServiceAccount", Name: a, Namespace: admSystemNs})
	}
	env.Create(ctx, t, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "providers"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}, Subjects: subjects})

	for _, name := range []string{"host-a", "host-b"} {
		var p banlieuev1.Provider
		data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", "02-provider-libvirt-edge.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, &p); err != nil {
			t.Fatal(err)
		}
		p.Name = name
		env.Create(ctx, t, &p)
	}
	img := &banlieuev1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "cirros"},
		Spec: banlieuev1.VMImageSpec{OSFamily: "linux", OSDistribution: "cirros", OSVersion: "0.6", Architecture: "amd64",
			Sources: []banlieuev1.ImageSource{{ProviderClass: "libvirt", Kind: banlieuev1.SourceURL, ImportFrom: "https://images.example/cirros.img"}}}}
	env.Create(ctx, t, img)
	machine := func(name, provider string) *infrav1.LibvirtMachine {
		return &infrav1.LibvirtMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: admSystemNs},
			Spec: infrav1.LibvirtMachineSpec{ProviderRef: &infrav1.ProviderReference{Name: provider}, Pool: "default",
				DomainName: admSystemNs + "-" + name, BootSource: infrav1.BootSource{Kind: infrav1.BootBackingVolume, Volume: "cirros.raw"},
				VCPUs: 1, MemoryMiB: 128, Firmware: banlieuev1.FirmwareBIOS, Disks: []infrav1.LibvirtDisk{{Name: "os", SizeGiB: 1}}}}
	}
	vmA, vmB := machine("vm-a", "host-a"), machine("vm-b", "host-b")
	// A machine not placed yet (a Cluster API template without providerRef): no Provider's.
	unplaced := machine("vm-unplaced", "")
	unplaced.Spec.ProviderRef = nil
	// A machine of host-a moving live to host-b: host-b's provider records what it prepared.
	moving := machine("vm-moving", "host-a")
	moving.Spec.Migration = &infrav1.LibvirtMachineMigration{MigrationName: "move-1", TargetProvider: infrav1.ProviderReference{Name: "host-b"}}
	env.Create(ctx, t, vmA, vmB, unplaced, moving)

	asA, asB, asUnknown := impersonate(t, env.Config, accountA), impersonate(t, env.Config, accountB), impersonate(t, env.Config, unknownAcct)
	// Each provider applies its own row under its own field manager, as the Reconciler does.
	applyRow := func(c client.Client, manager, provider, resolved string) error {
		status := banlieuev1.VMImageStatus{PerProvider: []banlieuev1.ProviderImageStatus{{ProviderName: provider,
			ProviderNamespace: admSystemNs, Ready: true, Reason: banlieuev1.ReasonReconciled, ResolvedRef: resolved}}}
		return ssa.ApplyStatus(ctx, c, &banlieuev1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: img.Name}}, &status, manager)
	}
	statusPatch := func(c client.Client, obj client.Object, patch string) error {
		return c.Status().Patch(ctx, obj, client.RawPatch("application/merge-patch+json", []byte(patch)))
	}
	annotate := func(c client.Client, m *infrav1.LibvirtMachine) error {
		return c.Patch(ctx, m.DeepCopy(), client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"x":"y"}}}`)))
	}
	prepared := func(phase infrav1.LibvirtMachineMigrationTargetPhase) *infrav1.LibvirtMachineStatus {
		return &infrav1.LibvirtMachineStatus{MigrationTarget: &infrav1.LibvirtMachineMigrationTargetStatus{MigrationName: "move-1",
			Provider: infrav1.ProviderReference{Name: "host-b"}, Pool: "default", Phase: phase, Volumes: []string{moving.Spec.DomainName + "-os.qcow2"}}}
	}
	applyTarget := func(c client.Client, m *infrav1.LibvirtMachine, st *infrav1.LibvirtMachineStatus) error {
		return ssa.ApplyStatus(ctx, c, m.DeepCopy(), st, banlieuev1.FieldManagerProviderLibvirtMigrationTarget)
	}
	conditions := `{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Reconciled","message":"ok","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`
	providerObj := func(name string) *banlieuev1.Provider {
		return &banlieuev1.Provider{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: admSystemNs}}
	}

	testenv.Eventually(t, 30*time.Second, "the writes policy in force", func() error {
		return refusedWith(statusPatch(asA, providerObj("host-b"), conditions), "only the status of its own Provider")
	})
	for _, w := range []struct {
		what string
		err  error
	}{
		{"A applies its own VMImage row", applyRow(asA, "banlieue.io/provider-libvirt/host-a", "host-a", "cirros-a0.raw")},
		{"B applies its own VMImage row", applyRow(asB, "banlieue.io/provider-libvirt/host-b", "host-b", "cirros-b.raw")},
		{"A changes its own row next to B's", applyRow(asA, "banlieue.io/provider-libvirt/host-a", "host-a", "cirros-a.raw")},
		{"A writes its own Provider's status", statusPatch(asA, providerObj("host-a"), conditions)},
		{"A annotates its own LibvirtMachine", annotate(asA, vmA)},
		{"A writes its own machine's status", statusPatch(asA, vmA.DeepCopy(), `{"status":{"observedGeneration":1}}`)},
		{"A writes its own moving machine's status", statusPatch(asA, moving.DeepCopy(), `{"status":{"observedGeneration":1}}`)},
		{"B, the move's target, records what it prepares", applyTarget(asB, moving, prepared(infrav1.MachineMigrationTargetPreparing))},
		{"B marks its host prepared", applyTarget(asB, moving, prepared(infrav1.MachineMigrationTargetPrepared))},
	} {
		if w.err != nil {
			t.Errorf("%s: %v", w.what, w.err)
		}
	}

	tests := []struct {
		name   string
		err    error
		reason string
	}{
		{"A writes B's Provider status (advertising vtpm)", statusPatch(asA, providerObj("host-b"), conditions),
			"only the status of its own Provider, " + admSystemNs + "/host-a"},
		{"A points B's row at another VM's disk", applyRow(asA, "banlieue.io/provider-libvirt/host-a", "host-b", "team-b-db-os.qcow2"),
			"only its own rows of status.perProvider"},
		{"A takes over B's row under B's field manager", applyRow(asA, "banlieue.io/provider-libvirt/host-b", "host-b", "team-b-db-os.qcow2"),
			"only its own rows of status.perProvider"},
		{"A removes B's row", statusPatch(asA, img.DeepCopy(), `{"status":{"perProvider":null}}`),
			"only its own rows of status.perProvider"},
		{"A rewrites the build artifact", statusPatch(asA, img.DeepCopy(),
			`{"status":{"buildArtifact":{"kind":"cloudImage","phase":"Ready","file":"other.raw","checksum":"sha256:00"}}}`),
			"may not change a VMImage's status.buildArtifact"},
		{"A annotates B's LibvirtMachine", annotate(asA, vmB), "only the LibvirtMachines whose providerRef is its own Provider"},
		{"A writes B's machine's status", statusPatch(asA, vmB.DeepCopy(), `{"status":{"observedGeneration":2}}`),
			"only the LibvirtMachines whose providerRef is its own Provider"},
		{"A annotates an unplaced LibvirtMachine", annotate(asA, unplaced), "only the LibvirtMachines whose providerRef is its own Provider"},
		{"A places an unplaced LibvirtMachine on its own Provider", asA.Patch(ctx, unplaced.DeepCopy(),
			client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"providerRef":{"name":"host-a"}}}`))),
			"only the LibvirtMachines whose providerRef is its own Provider"},
		{"B, the move's target, writes another field of the moving machine's status", statusPatch(asB, moving.DeepCopy(),
			`{"status":{"observedGeneration":7}}`), "only status.migrationTarget"},
		{"B writes its record and the source's conditions at once", statusPatch(asB, moving.DeepCopy(),
			`{"status":{"migrationTarget":{"migrationName":"move-1","provider":{"name":"host-b"},"pool":"default","phase":"Prepared"},`+
				`"conditions":[{"type":"Ready","status":"False","reason":"Forged","message":"x","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`),
			"only status.migrationTarget"},
		{"B annotates the machine moving to it", annotate(asB, moving), "only status.migrationTarget"},
		{"B removes the move's request", asB.Patch(ctx, moving.DeepCopy(),
			client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"migration":null}}`))), "only status.migrationTarget"},
		{"B records a move target on a machine not moving", applyTarget(asB, vmA, prepared(infrav1.MachineMigrationTargetPrepared)),
			"only status.migrationTarget"},
		{"the unknown account records a move target", applyTarget(asUnknown, moving, prepared(infrav1.MachineMigrationTargetFailed)),
			"serves no Provider the operator knows"},
		{"an account the operator does not know", statusPatch(asUnknown, providerObj("host-a"), conditions),
			"serves no Provider the operator knows"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := refusedWith(tt.err, tt.reason); err != nil {
				t.Error(err)
			}
		})
	}

	var mv infrav1.LibvirtMachine
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(moving), &mv); err != nil {
		t.Fatal(err)
	}
	if mv.Status.MigrationTarget == nil || mv.Status.MigrationTarget.Phase != infrav1.MachineMigrationTargetPrepared ||
		mv.Status.ObservedGeneration != 1 || mv.Status.Conditions != nil || mv.Spec.Migration == nil || mv.Annotations["x"] != "" {
		t.Errorf("moving machine %+v / %+v: want B's Prepared record beside A's status and the request intact", mv.Spec.Migration, mv.Status)
	}
	var got banlieuev1.VMImage
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(img), &got); err != nil {
		t.Fatal(err)
	}
	for _, r := range got.Status.PerProvider {
		if want := "cirros-" + strings.TrimPrefix(r.ProviderName, "host-") + ".raw"; r.ResolvedRef != want {
			t.Errorf("row %s resolvedRef %q, want %q: a refused write changed it", r.ProviderName, r.ResolvedRef, want)
		}
	}
	if len(got.Status.PerProvider) != 2 {
		t.Errorf("rows %+v, want host-a's and host-b's", got.Status.PerProvider)
	}
}
