package operator

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/naming"
	"banlieue.io/banlieue/internal/operator"
	"banlieue.io/banlieue/internal/testenv"
)

// TestWorkloadNames: Providers whose old workload names collided (docs/reliability.md, "Workload names that cannot collide") each get bindings
// of their own, naming their own ServiceAccount, that stay put over reconcile rounds; a Provider
// with a 70-character name gets a workload at all; objects named the old way are pruned.
func TestWorkloadNames(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := env.Client

	long := strings.Repeat("l", 70)
	ids := []client.ObjectKey{
		{Namespace: "team-a", Name: "edge"}, // shared the build RoleBinding with team-b/edge
		{Namespace: "team-b", Name: "edge"}, //
		{Namespace: "team", Name: "a-edge"}, // shared the ClusterRoleBinding with team-a/edge
		{Namespace: "team-a", Name: long},   // an invalid label value
	}
	for _, ns := range []string{systemNs, buildNs, "team-a", "team-b", "team"} {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	// What an earlier operator left for team-a/edge and team-b/edge: old names, labels, no
	// identity annotation. A decoy labelled like team-a/edge's but annotated as another
	// Provider's must survive team-a/edge's pruning.
	legacy := func(ns, name string) map[string]string {
		return map[string]string{banlieuev1.LabelManagedBy: operator.ManagedBy, banlieuev1.LabelProvider: name, banlieuev1.LabelProviderNamespace: ns}
	}
	oldSubject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "banlieue-provider-libvirt-edge", Namespace: "team-a"}}
	oldCRB := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "banlieue-provider-libvirt-team-a-edge", Labels: legacy("team-a", "edge")},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "banlieue-provider-libvirt"},
		Subjects: oldSubject}
	oldBuild := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "banlieue-provider-libvirt-edge-build", Namespace: buildNs, Labels: legacy("team-b", "edge")},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "banlieue-provider-libvirt-edge-build"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "banlieue-provider-libvirt-edge", Namespace: "team-b"}}}
	decoy := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "decoy", Namespace: buildNs, Labels: legacy("team-a", "edge"),
		Annotations: map[string]string{banlieuev1.AnnotationProvider: "team-a/someone-else"}},
		RoleRef: oldBuild.RoleRef, Subjects: oldSubject}
	for _, obj := range []client.Object{oldCRB, oldBuild, decoy} {
		if err := admin.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}

	startInstalledOperator(ctx, t, env, admin)
	for _, id := range ids {
		var p banlieuev1.Provider
		repoFile(t, "examples/02-provider-libvirt-edge.yaml", &p)
		p.Namespace, p.Name = id.Namespace, id.Name
		if err := admin.Create(ctx, &p); err != nil {
			t.Fatal(err)
		}
	}

	// versions holds every Provider's bindings ("Kind namespace/name" → resourceVersion).
	versions := map[client.ObjectKey]map[string]string{}
	testenv.Eventually(t, timeout, "every Provider has bindings of its own", func() error {
		for _, id := range ids {
			v, err := ownBindings(ctx, admin, id)
			if err != nil {
				return fmt.Errorf("%s: %w", id, err)
			}
			versions[id] = v
		}
		return distinct(versions)
	})
	t.Run("each import and export account reads its own Provider's Secret and no other's", func(t *testing.T) {
		// team-a/edge, team-b/edge and team/a-edge name the same Secret, libvirt-edge-creds, each
		// in its own namespace: only the name-by-name grant of its own Provider tells them apart.
		// The Secrets do not exist, so an allowed get is a 404 and a refused one a 403.
		for _, own := range ids[:3] {
			dep, err := deploymentOf(ctx, admin, own)
			if err != nil {
				t.Fatal(err)
			}
			for _, kind := range []string{"import", "export"} {
				acct := as(t, env.Config, buildNs, dep.Name+"-"+kind)
				for _, other := range ids[:3] {
					secret := client.ObjectKey{Namespace: other.Namespace, Name: "libvirt-edge-creds"}
					err := acct.Get(ctx, secret, &corev1.Secret{})
					if other == own {
						testenv.Allowed(t, fmt.Sprintf("%s's %s account gets its Secret", own, kind), ignoreNotFound(err))
					} else if other.Namespace != own.Namespace {
						testenv.Forbidden(t, fmt.Sprintf("%s's %s account gets %s's Secret %s", own, kind, other, secret), err)
					}
					testenv.Forbidden(t, fmt.Sprintf("%s's %s account lists Secrets in %s", own, kind, other.Namespace),
						acct.List(ctx, &corev1.SecretList{}, client.InNamespace(other.Namespace)))
				}
			}
			// The export Job is given its volume (--volume): its account reads no machine and no
			// export, in its Provider's namespace or any other.
			exp := as(t, env.Config, buildNs, dep.Name+"-export")
			testenv.Forbidden(t, fmt.Sprintf("%s's export account lists LibvirtMachines", own),
				exp.List(ctx, &infrav1.LibvirtMachineList{}, client.InNamespace(own.Namespace)))
			testenv.Forbidden(t, fmt.Sprintf("%s's export account lists VirtualMachineExports", own),
				exp.List(ctx, &banlieuev1.VirtualMachineExportList{}, client.InNamespace(own.Namespace)))
		}
	})
	t.Run("objects named the old way are pruned", func(t *testing.T) {
		for _, obj := range []client.Object{oldCRB, oldBuild} {
			testenv.Eventually(t, timeout, fmt.Sprintf("old %T %s pruned", obj, obj.GetName()), func() error { return gone(ctx, admin, obj) })
		}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(decoy), decoy); err != nil {
			t.Errorf("another Provider's object, labelled like team-a/edge's, was pruned: %v", err)
		}
	})
	t.Run("nothing flips over two reconcile rounds", func(t *testing.T) {
		// A class edit reconciles every Provider of the class, and each reconcile applies its
		// whole workload; a binding two Providers shared would change hands.
		for _, tag := range []string{"v0.2.0", "v0.3.0"} {
			patchClass(ctx, t, admin, "libvirt", func(cl *banlieuev1.ProviderClass) { cl.Spec.Image.Tag = tag })
			testenv.Eventually(t, timeout, "every Deployment at "+tag, func() error {
				for _, id := range ids {
					dep, err := deploymentOf(ctx, admin, id)
					if err != nil {
						return err
					}
					if img := dep.Spec.Template.Spec.Containers[0].Image; img != "registry.example/banlieue:"+tag {
						return fmt.Errorf("%s: image %s", id, img)
					}
				}
				return nil
			})
			for _, id := range ids {
				v, err := ownBindings(ctx, admin, id)
				if err != nil {
					t.Errorf("round %s: %s: %v", tag, id, err)
				} else if !reflect.DeepEqual(v, versions[id]) {
					t.Errorf("round %s: %s: bindings changed: %v, were %v", tag, id, v, versions[id])
				}
			}
		}
	})
}

// deploymentOf is the Deployment status.workload of the Provider id names.
func deploymentOf(ctx context.Context, c client.Client, id client.ObjectKey) (*appsv1.Deployment, error) {
	var p banlieuev1.Provider
	if err := c.Get(ctx, id, &p); err != nil {
		return nil, err
	}
	w := p.Status.Workload
	if w == nil {
		return nil, fmt.Errorf("no status.workload yet")
	}
	var dep appsv1.Deployment
	return &dep, c.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: w.DeploymentName}, &dep)
}

// ownBindings finds the bindings labelled as id's workload (the label holds the capped name),
// less those whose identity annotation names another Provider, and checks there is one of each and that they bind id's own ServiceAccount, which exists and
// is id's. It returns their resourceVersions.
func ownBindings(ctx context.Context, c client.Client, id client.ObjectKey) (map[string]string, error) {
	dep, err := deploymentOf(ctx, c, id)
	if err != nil {
		return nil, err
	}
	sa := rbacv1.Subject{Kind: "ServiceAccount", Name: dep.Spec.Template.Spec.ServiceAccountName, Namespace: dep.Namespace}
	var account corev1.ServiceAccount
	if err := c.Get(ctx, client.ObjectKey{Namespace: sa.Namespace, Name: sa.Name}, &account); err != nil {
		return nil, fmt.Errorf("ServiceAccount: %w", err)
	}
	if got := account.Annotations[banlieuev1.AnnotationProvider]; got != id.String() {
		return nil, fmt.Errorf("ServiceAccount %s is annotated as %q's", sa.Name, got)
	}
	sel := client.MatchingLabels{banlieuev1.LabelProvider: naming.Capped(id.Name), banlieuev1.LabelProviderNamespace: id.Namespace}
	// The import Jobs' account is the Provider's own, next to its Jobs in the build namespace.
	importSA := rbacv1.Subject{Kind: "ServiceAccount", Name: dep.Name + "-import", Namespace: buildNs}
	var importAccount corev1.ServiceAccount
	if err := c.Get(ctx, client.ObjectKey{Namespace: buildNs, Name: importSA.Name}, &importAccount); err != nil {
		return nil, fmt.Errorf("import ServiceAccount: %w", err)
	}
	if got := importAccount.Annotations[banlieuev1.AnnotationProvider]; got != id.String() {
		return nil, fmt.Errorf("import ServiceAccount %s is annotated as %q's", importSA.Name, got)
	}
	versions := map[string]string{}
	check := func(kind, ns string, items []metav1.Object, subjects [][]rbacv1.Subject, want ...[]rbacv1.Subject) error {
		if len(items) != len(want) {
			return fmt.Errorf("%d %s in %q, want %d", len(items), kind, ns, len(want))
		}
		for _, w := range want {
			i := slices.IndexFunc(subjects, func(s []rbacv1.Subject) bool { return reflect.DeepEqual(s, w) })
			if i < 0 {
				return fmt.Errorf("no %s in %q binds %v; subjects %v", kind, ns, w, subjects)
			}
			subjects[i] = nil
			versions[kind+" "+ns+"/"+items[i].GetName()] = items[i].GetResourceVersion()
		}
		return nil
	}
	for _, ns := range []string{id.Namespace, buildNs} {
		var list rbacv1.RoleBindingList
		if err := c.List(ctx, &list, sel, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		var items []metav1.Object
		var subjects [][]rbacv1.Subject
		for i := range list.Items {
			if theirs(&list.Items[i], id) {
				continue
			}
			items, subjects = append(items, &list.Items[i]), append(subjects, list.Items[i].Subjects)
		}
		want := [][]rbacv1.Subject{{sa}}
		if ns == id.Namespace {
			exportSA := rbacv1.Subject{Kind: "ServiceAccount", Name: dep.Name + "-export", Namespace: buildNs}
			want = append(want, []rbacv1.Subject{importSA}, []rbacv1.Subject{exportSA})
		}
		if err := check("RoleBinding", ns, items, subjects, want...); err != nil {
			return nil, err
		}
	}
	var crbs rbacv1.ClusterRoleBindingList
	if err := c.List(ctx, &crbs, sel); err != nil {
		return nil, err
	}
	var items []metav1.Object
	var subjects [][]rbacv1.Subject
	for i := range crbs.Items {
		if theirs(&crbs.Items[i], id) {
			continue
		}
		items, subjects = append(items, &crbs.Items[i]), append(subjects, crbs.Items[i].Subjects)
	}
	return versions, check("ClusterRoleBinding", "", items, subjects, []rbacv1.Subject{sa})
}

// theirs reports whether obj's identity annotation names a Provider other than id.
func theirs(obj metav1.Object, id client.ObjectKey) bool {
	ref, ok := obj.GetAnnotations()[banlieuev1.AnnotationProvider]
	return ok && ref != id.String()
}

// distinct fails when two Providers claim the same binding.
func distinct(versions map[client.ObjectKey]map[string]string) error {
	seen := map[string]client.ObjectKey{}
	for _, id := range slices.SortedFunc(maps.Keys(versions), func(a, b client.ObjectKey) int { return strings.Compare(a.String(), b.String()) }) {
		for obj := range versions[id] {
			if other, ok := seen[obj]; ok {
				return fmt.Errorf("%s is both %s's and %s's", obj, other, id)
			}
			seen[obj] = id
		}
	}
	return nil
}
