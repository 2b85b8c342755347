package install

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
)

// TestTenantRoles: a namespace's users hold banlieue's user-facing kinds through the standard
// view, edit and admin ClusterRoles, as aggregated by kube-controller-manager's own controller
// from config/default's banlieue-tenant-view and -edit (and config/console's
// banlieue-vm-console), and nothing of the infrastructure, the Providers or another namespace.
// Each account is a ServiceAccount with a RoleBinding in its namespace, as a team gets it.
func TestTenantRoles(t *testing.T) {
	kcm := kubeControllerManager(t)
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	installCRDsAndNamespaces(t, c)
	if out, errOut, err := c.run("apply", "--server-side", "-k", defaultDir()); err != nil {
		t.Fatalf("kubectl apply --server-side -k config/default: %v\n%s%s", err, out, errOut)
	}
	console := filepath.Join(testenv.RepoRoot(), "config", "console", "clusterrole.yaml")
	if out, errOut, err := c.run("apply", "--server-side", "-f", console); err != nil {
		t.Fatalf("kubectl apply -f config/console/clusterrole.yaml: %v\n%s%s", err, out, errOut)
	}

	const team, other = "team-a", "team-b"
	accounts := map[string]string{"viewer": "view", "editor": "edit", "owner": "admin"}
	var objs []client.Object
	for _, ns := range []string{team, other} {
		objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	for sa, role := range accounts {
		objs = append(objs,
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: sa}},
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: sa},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: team, Name: sa}}})
	}
	// A VM of another team, and a machine and Provider in this one, to probe.
	otherVM := tenantVM(other, "theirs")
	objs = append(objs, otherVM)
	for _, o := range objs {
		if err := c.admin.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}

	c.startAggregation(t, kcm)
	viewer, editor, owner := c.as(t, team, "viewer"), c.as(t, team, "editor"), c.as(t, team, "owner")
	start := time.Now()
	// admin is aggregated last (view into edit into admin); the console's role goes straight in.
	testenv.Eventually(t, time.Minute, "view, edit and admin aggregate banlieue's tenant roles", func() error {
		for _, p := range []struct {
			as   client.Client
			verb string
		}{{viewer, "list"}, {editor, "create"}, {owner, "create"}} {
			if !selfCan(ctx, t, p.as, team, "banlieue.io", "virtualmachines", "", p.verb) {
				return testenv.Unmet(false, "not aggregated yet")
			}
		}
		return nil
	})
	t.Logf("aggregated in %v", time.Since(start).Round(time.Millisecond))

	t.Run("editor", func(t *testing.T) {
		vm := tenantVM(team, "web")
		testenv.Allowed(t, "editor creates a VirtualMachine", editor.Create(ctx, vm))
		testenv.Allowed(t, "editor labels it", editor.Patch(ctx, vm, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"tier":"web"}}}`))))
		testenv.Allowed(t, "editor lists VirtualMachines", editor.List(ctx, &banlieuev1.VirtualMachineList{}, client.InNamespace(team)))
		pool := tenantPool(team, "pool")
		testenv.Allowed(t, "editor creates a VirtualMachinePool", editor.Create(ctx, pool))
		claim := &banlieuev1.VirtualMachineClaim{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "claim"},
			Spec: banlieuev1.VirtualMachineClaimSpec{PoolRef: banlieuev1.LocalObjectReference{Name: pool.Name},
				Subject: banlieuev1.ClaimSubject{Issuer: "https://ci.example", ID: "job-1"}, TTLSeconds: 600}}
		testenv.Allowed(t, "editor creates a VirtualMachineClaim", editor.Create(ctx, claim))
		testenv.Allowed(t, "editor deletes the claim", editor.Delete(ctx, claim))
		mig := &banlieuev1.VirtualMachineMigration{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "move-web"},
			Spec: banlieuev1.VirtualMachineMigrationSpec{VMName: vm.Name}}
		testenv.Allowed(t, "editor creates a VirtualMachineMigration", editor.Create(ctx, mig))
		testenv.Allowed(t, "editor lists VirtualMachineMigrations", editor.List(ctx, &banlieuev1.VirtualMachineMigrationList{}, client.InNamespace(team)))
		testenv.Allowed(t, "editor cancels the migration", editor.Patch(ctx, mig, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"cancel":true}}`))))
		mig.Status.Phase = banlieuev1.MigrationSucceeded
		testenv.Forbidden(t, "editor writes a migration's status", editor.Status().Update(ctx, mig))
		testenv.Forbidden(t, "editor creates a VirtualMachineMigration in another namespace", editor.Create(ctx,
			&banlieuev1.VirtualMachineMigration{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "move"},
				Spec: banlieuev1.VirtualMachineMigrationSpec{VMName: otherVM.Name}}, client.DryRunAll))
		testenv.Allowed(t, "editor deletes the migration", editor.Delete(ctx, mig))
		snap := &banlieuev1.VirtualMachineSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "snap-web"},
			Spec: banlieuev1.VirtualMachineSnapshotSpec{VMName: vm.Name}}
		testenv.Allowed(t, "editor creates a VirtualMachineSnapshot", editor.Create(ctx, snap))
		testenv.Allowed(t, "editor lists VirtualMachineSnapshots", editor.List(ctx, &banlieuev1.VirtualMachineSnapshotList{}, client.InNamespace(team)))
		snap.Status.Phase = banlieuev1.SnapshotReady
		testenv.Forbidden(t, "editor writes a snapshot's status", editor.Status().Update(ctx, snap))
		restore := &banlieuev1.VirtualMachineRestore{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "back-web"},
			Spec: banlieuev1.VirtualMachineRestoreSpec{SnapshotName: snap.Name}}
		testenv.Allowed(t, "editor creates a VirtualMachineRestore", editor.Create(ctx, restore))
		restore.Status.Phase = banlieuev1.RestoreSucceeded
		testenv.Forbidden(t, "editor writes a restore's status", editor.Status().Update(ctx, restore))
		testenv.Forbidden(t, "editor snapshots a VM of another namespace", editor.Create(ctx,
			&banlieuev1.VirtualMachineSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "snap"},
				Spec: banlieuev1.VirtualMachineSnapshotSpec{VMName: otherVM.Name}}, client.DryRunAll))
		testenv.Allowed(t, "editor deletes the restore", editor.Delete(ctx, restore))
		testenv.Allowed(t, "editor deletes the snapshot", editor.Delete(ctx, snap))
		exp := tenantExport(team, "web-backup", vm.Name)
		testenv.Allowed(t, "editor creates a VirtualMachineExport", editor.Create(ctx, exp))
		testenv.Allowed(t, "editor lists VirtualMachineExports", editor.List(ctx, &banlieuev1.VirtualMachineExportList{}, client.InNamespace(team)))
		exp.Status.Phase = banlieuev1.ExportReady
		exp.Status.Digest = "sha256:" + strings.Repeat("0", 64)
		testenv.Forbidden(t, "editor writes an export's status", editor.Status().Update(ctx, exp))
		testenv.Forbidden(t, "editor creates a VirtualMachineExport in another namespace", editor.Create(ctx,
			tenantExport(other, "steal", otherVM.Name), client.DryRunAll))
		testenv.Allowed(t, "editor deletes the export", editor.Delete(ctx, exp))
		if !selfCan(ctx, t, editor, team, "banlieue.io", "virtualmachinepools", "scale", "update") {
			t.Error("editor may not scale a pool (virtualmachinepools/scale update)")
		}
		// The status is the controller's; the console types into a guest, more than edit.
		vm.Status.Phase = banlieuev1.VMPhaseReady
		testenv.Forbidden(t, "editor writes a VirtualMachine's status", editor.Status().Update(ctx, vm))
		if selfCan(ctx, t, editor, team, "subresources.banlieue.io", "virtualmachines", "console", "get") {
			t.Error("editor may open a VM's console, want admin only")
		}
		denyInfrastructure(ctx, t, "editor", editor, team)
		testenv.Forbidden(t, "editor creates a VirtualMachine in another namespace", editor.Create(ctx, tenantVM(other, "web")))
		testenv.Forbidden(t, "editor reads another team's VirtualMachine", editor.Get(ctx, client.ObjectKeyFromObject(otherVM), &banlieuev1.VirtualMachine{}))
		testenv.Forbidden(t, "editor creates a VMImage", editor.Create(ctx, &banlieuev1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "img"}}, client.DryRunAll))
		testenv.Forbidden(t, "editor lists VMClasses", editor.List(ctx, &banlieuev1.VMClassList{}))
		testenv.Allowed(t, "editor deletes the VirtualMachine", editor.Delete(ctx, vm))
	})

	t.Run("viewer", func(t *testing.T) {
		vm := tenantVM(team, "db")
		if err := c.admin.Create(ctx, vm); err != nil {
			t.Fatal(err)
		}
		testenv.Allowed(t, "viewer gets a VirtualMachine", viewer.Get(ctx, client.ObjectKeyFromObject(vm), &banlieuev1.VirtualMachine{}))
		testenv.Allowed(t, "viewer lists VirtualMachinePools", viewer.List(ctx, &banlieuev1.VirtualMachinePoolList{}, client.InNamespace(team)))
		testenv.Allowed(t, "viewer lists VirtualMachineClaims", viewer.List(ctx, &banlieuev1.VirtualMachineClaimList{}, client.InNamespace(team)))
		testenv.Forbidden(t, "viewer creates a VirtualMachine", viewer.Create(ctx, tenantVM(team, "mine"), client.DryRunAll))
		mig := &banlieuev1.VirtualMachineMigration{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "move-db"},
			Spec: banlieuev1.VirtualMachineMigrationSpec{VMName: vm.Name}}
		if err := c.admin.Create(ctx, mig); err != nil {
			t.Fatal(err)
		}
		testenv.Allowed(t, "viewer gets a VirtualMachineMigration", viewer.Get(ctx, client.ObjectKeyFromObject(mig), &banlieuev1.VirtualMachineMigration{}))
		testenv.Allowed(t, "viewer lists VirtualMachineMigrations", viewer.List(ctx, &banlieuev1.VirtualMachineMigrationList{}, client.InNamespace(team)))
		testenv.Forbidden(t, "viewer creates a VirtualMachineMigration", viewer.Create(ctx, &banlieuev1.VirtualMachineMigration{
			ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "mine"}, Spec: banlieuev1.VirtualMachineMigrationSpec{VMName: vm.Name}}, client.DryRunAll))
		testenv.Forbidden(t, "viewer cancels a migration", viewer.Patch(ctx, mig, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"cancel":true}}`))))
		testenv.Forbidden(t, "viewer deletes a migration", viewer.Delete(ctx, mig, client.DryRunAll))
		snap := &banlieuev1.VirtualMachineSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "snap-db"},
			Spec: banlieuev1.VirtualMachineSnapshotSpec{VMName: vm.Name}}
		if err := c.admin.Create(ctx, snap); err != nil {
			t.Fatal(err)
		}
		testenv.Allowed(t, "viewer gets a VirtualMachineSnapshot", viewer.Get(ctx, client.ObjectKeyFromObject(snap), &banlieuev1.VirtualMachineSnapshot{}))
		testenv.Allowed(t, "viewer lists VirtualMachineRestores", viewer.List(ctx, &banlieuev1.VirtualMachineRestoreList{}, client.InNamespace(team)))
		testenv.Forbidden(t, "viewer deletes a snapshot", viewer.Delete(ctx, snap, client.DryRunAll))
		testenv.Forbidden(t, "viewer creates a VirtualMachineRestore", viewer.Create(ctx, &banlieuev1.VirtualMachineRestore{
			ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "back"}, Spec: banlieuev1.VirtualMachineRestoreSpec{SnapshotName: snap.Name}}, client.DryRunAll))
		exp := tenantExport(team, "db-backup", vm.Name)
		if err := c.admin.Create(ctx, exp); err != nil {
			t.Fatal(err)
		}
		testenv.Allowed(t, "viewer gets a VirtualMachineExport", viewer.Get(ctx, client.ObjectKeyFromObject(exp), &banlieuev1.VirtualMachineExport{}))
		testenv.Allowed(t, "viewer lists VirtualMachineExports", viewer.List(ctx, &banlieuev1.VirtualMachineExportList{}, client.InNamespace(team)))
		testenv.Forbidden(t, "viewer creates a VirtualMachineExport", viewer.Create(ctx, tenantExport(team, "mine", vm.Name), client.DryRunAll))
		testenv.Forbidden(t, "viewer deletes an export", viewer.Delete(ctx, exp, client.DryRunAll))
		testenv.Forbidden(t, "viewer labels a VirtualMachine", viewer.Patch(ctx, vm, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`))))
		testenv.Forbidden(t, "viewer deletes a VirtualMachine", viewer.Delete(ctx, vm, client.DryRunAll))
		if selfCan(ctx, t, viewer, team, "banlieue.io", "virtualmachinepools", "scale", "update") {
			t.Error("viewer may scale a pool")
		}
		denyInfrastructure(ctx, t, "viewer", viewer, team)
	})

	t.Run("admin", func(t *testing.T) {
		if !selfCan(ctx, t, owner, team, "subresources.banlieue.io", "virtualmachines", "console", "get") {
			t.Error("admin may not open a VM's console (banlieue-vm-console, aggregate-to-admin)")
		}
		if !selfCan(ctx, t, owner, team, "banlieue.io", "virtualmachines", "", "deletecollection") {
			t.Error("admin may not delete VirtualMachines as a collection")
		}
		denyInfrastructure(ctx, t, "admin", owner, team)
	})

	t.Run("export Jobs", func(t *testing.T) {
		// A team's exports run as Jobs in the build namespace under the Provider's export account:
		// no tenant role reaches them, and banlieue-controller creates Jobs there and nowhere else.
		for who, as := range map[string]client.Client{"viewer": viewer, "editor": editor, "admin": owner} {
			testenv.Forbidden(t, who+" lists the Jobs of "+buildNS, as.List(ctx, &batchv1.JobList{}, client.InNamespace(buildNS)))
			testenv.Forbidden(t, who+" lists the pods of "+buildNS, as.List(ctx, &corev1.PodList{}, client.InNamespace(buildNS)))
		}
		ctl := c.as(t, "banlieue-system", "banlieue-controller")
		if !selfCan(ctx, t, ctl, buildNS, "batch", "jobs", "", "create") || !selfCan(ctx, t, ctl, buildNS, "", "pods", "", "list") {
			t.Error("banlieue-controller may not create the export Jobs or list their pods in " + buildNS)
		}
		for _, ns := range []string{team, "banlieue-system"} {
			if selfCan(ctx, t, ctl, ns, "batch", "jobs", "", "create") {
				t.Errorf("banlieue-controller may create Jobs in %s: its Job grant is the build namespace's alone", ns)
			}
		}
	})
}

// denyInfrastructure: nothing a tenant role holds reaches a host or a Provider's credentials.
func denyInfrastructure(ctx context.Context, t *testing.T, who string, as client.Client, ns string) {
	t.Helper()
	testenv.Forbidden(t, who+" lists LibvirtMachines", as.List(ctx, &infrav1.LibvirtMachineList{}, client.InNamespace(ns)))
	testenv.Forbidden(t, who+" lists Providers", as.List(ctx, &banlieuev1.ProviderList{}, client.InNamespace(ns)))
	for _, p := range []struct{ group, res, sub, verb string }{
		{"banlieue.io", "providers", "", "create"},
		{"banlieue.io", "virtualmachines", "status", "update"},
		{"banlieue.io", "virtualmachines", "status", "patch"},
		{"infrastructure.banlieue.io", "libvirtmachines", "", "create"},
		{"infrastructure.banlieue.io", "libvirtmachinetemplates", "", "create"},
		{"infrastructure.banlieue.io", "vspheremachines", "", "get"},
		{"infrastructure.banlieue.io", "vspheremachines", "", "create"},
		{"infrastructure.banlieue.io", "vspheremachinetemplates", "", "create"},
		{"infrastructure.banlieue.io", "libvirtclusters", "", "get"},
	} {
		if selfCan(ctx, t, as, ns, p.group, p.res, p.sub, p.verb) {
			t.Errorf("%s may %s %s/%s in %s, want denied", who, p.verb, p.res, p.sub, ns)
		}
	}
}

// selfCan asks the API server, as as, whether it may verb the resource in ns.
func selfCan(ctx context.Context, t *testing.T, as client.Client, ns, group, res, sub, verb string) bool {
	t.Helper()
	r := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Group: group, Resource: res, Subresource: sub, Verb: verb},
	}}
	if err := as.Create(ctx, r); err != nil {
		t.Fatalf("SelfSubjectAccessReview: %v", err)
	}
	return r.Status.Allowed
}

func tenantVM(ns, name string) *banlieuev1.VirtualMachine {
	return &banlieuev1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: banlieuev1.VirtualMachineSpec{ClassRef: banlieuev1.LocalObjectReference{Name: "small"},
			ImageRef: banlieuev1.LocalObjectReference{Name: "debian"}}}
}

func tenantPool(ns, name string) *banlieuev1.VirtualMachinePool {
	return &banlieuev1.VirtualMachinePool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: banlieuev1.VirtualMachinePoolSpec{WarmReplicas: 1, MaxReplicas: 3, Readiness: banlieuev1.ReadinessInfrastructureReady,
			Template: banlieuev1.VirtualMachineTemplate{Spec: tenantVM(ns, "").Spec}}}
}

// tenantExport is an export of vm's disk into a claim of the same name, as a team writes one.
func tenantExport(ns, name, vm string) *banlieuev1.VirtualMachineExport {
	return &banlieuev1.VirtualMachineExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: banlieuev1.VirtualMachineExportSpec{VirtualMachineName: vm, Target: banlieuev1.ExportTarget{
			PersistentVolumeClaim: &banlieuev1.ExportPVCTarget{ClaimName: name}}}}
}
