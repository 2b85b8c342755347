package operator

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/capi"
	"banlieue.io/banlieue/internal/tenancy"
	"banlieue.io/banlieue/internal/userdata"
)

// machineProviderIndex indexes LibvirtMachines by their Provider, namespace/name
// (LibvirtMachine.ProviderKey), so a shared Provider finds its machines in every namespace and a
// same-named Provider of another namespace never finds them.
const machineProviderIndex = "spec.providerRef"

// machineProviderKey is the index value of a LibvirtMachine.
func machineProviderKey(o client.Object) []string {
	return []string{o.(*infrav1.LibvirtMachine).ProviderKey().String()}
}

// userDataGrants are the per-machine user-data Secrets the provider of p may get, by namespace:
// one for each machine of p (machines) that has user-data, in the machine's namespace, where the
// Secret lives. A namespace other than p's is granted only while p's allowedNamespaces admits
// it (tenancy.AdmitsNamespace over nsLabels, the labels of each such namespace): the provider
// refuses such a machine before reading anything, so a grant there would only widen its
// account. The name is derived from the machine's name (userdata.SecretName), never taken from
// its spec, so whoever writes a LibvirtMachine cannot widen the provider's Role to a Secret of
// their choosing; the provider in turn reads only that name
// (internal/provider/libvirt/userdata.go). Names are sorted, so a Role does not change from one
// pass to the next.
func userDataGrants(p *banlieuev1.Provider, machines []infrav1.LibvirtMachine, nsLabels map[string]map[string]string) map[string][]string {
	return grantsOf(p, machines, nsLabels, func(m *infrav1.LibvirtMachine) (client.ObjectKey, bool) {
		return m.ProviderKey(), m.Spec.UserDataSecretRef != nil
	})
}

// grantsOf is userDataGrants for any machine kind: of says which Provider a machine names and
// whether it has user-data.
func grantsOf[T any, PT interface {
	*T
	client.Object
}](p *banlieuev1.Provider, machines []T, nsLabels map[string]map[string]string, of func(PT) (client.ObjectKey, bool)) map[string][]string {
	grants := map[string][]string{}
	for i := range machines {
		m := PT(&machines[i])
		provider, hasUserData := of(m)
		if !hasUserData || provider != client.ObjectKeyFromObject(p) {
			continue
		}
		if ok, _ := tenancy.AdmitsNamespace(p, m.GetNamespace(), nsLabels[m.GetNamespace()]); !ok {
			continue
		}
		grants[m.GetNamespace()] = append(grants[m.GetNamespace()], userdata.SecretName(m.GetName()))
	}
	for ns, names := range grants {
		slices.Sort(names)
		grants[ns] = slices.Compact(names)
	}
	return grants
}

// machineUserDataGrants lists p's machines in every namespace from the cache and reads, past
// the cache, the labels of each other namespace they are in (its labels now, as the provider
// reads them), then decides with userDataGrants. A namespace whose labels change is seen on
// the Provider's next periodic pass. A tenant namespace where the grant's name (name) is taken
// is left out (withoutForeignGrants).
func (r *providerReconciler) machineUserDataGrants(ctx context.Context, p *banlieuev1.Provider, name string) (map[string][]string, error) {
	var machines infrav1.LibvirtMachineList
	if err := r.client.List(ctx, &machines, client.MatchingFields{machineProviderIndex: client.ObjectKeyFromObject(p).String()}); err != nil {
		return nil, fmt.Errorf("listing the LibvirtMachines of Provider %s/%s: %w", p.Namespace, p.Name, err)
	}
	var vsphereMachines infrav1.VSphereMachineList
	if err := r.client.List(ctx, &vsphereMachines, client.MatchingFields{machineProviderIndex: client.ObjectKeyFromObject(p).String()}); err != nil {
		return nil, fmt.Errorf("listing the VSphereMachines of Provider %s/%s: %w", p.Namespace, p.Name, err)
	}
	nsLabels := map[string]map[string]string{}
	gone := map[string]bool{}
	readLabels := func(namespace string) error {
		if _, seen := nsLabels[namespace]; seen || gone[namespace] || namespace == p.Namespace {
			return nil
		}
		var ns corev1.Namespace
		err := r.apiReader.Get(ctx, client.ObjectKey{Name: namespace}, &ns)
		switch {
		case apierrors.IsNotFound(err):
			// The cache still holds machines of a namespace that is gone: nothing to grant there.
			gone[namespace] = true
			return nil
		case err != nil:
			return fmt.Errorf("reading Namespace %s for Provider %s/%s's allowedNamespaces: %w", namespace, p.Namespace, p.Name, err)
		}
		nsLabels[namespace] = ns.Labels
		return nil
	}
	for i := range machines.Items {
		if m := &machines.Items[i]; m.Spec.UserDataSecretRef != nil || capi.OwnerMachine(m) != nil {
			if err := readLabels(m.Namespace); err != nil {
				return nil, err
			}
		}
	}
	for i := range vsphereMachines.Items {
		if m := &vsphereMachines.Items[i]; m.Spec.UserDataSecretRef != nil || capi.OwnerMachine(m) != nil {
			if err := readLabels(m.Namespace); err != nil {
				return nil, err
			}
		}
	}
	present := slices.DeleteFunc(machines.Items, func(m infrav1.LibvirtMachine) bool { return gone[m.Namespace] })
	grants := userDataGrants(p, present, nsLabels)
	vspherePresent := slices.DeleteFunc(vsphereMachines.Items, func(m infrav1.VSphereMachine) bool { return gone[m.Namespace] })
	for ns, names := range vsphereUserDataGrants(p, vspherePresent, nsLabels) {
		merged := append(grants[ns], names...)
		slices.Sort(merged)
		grants[ns] = slices.Compact(merged)
	}
	if err := r.bootstrapGrants(ctx, p, capiInfraMachines(present, vspherePresent), nsLabels, grants); err != nil {
		return nil, err
	}
	return grants, r.withoutForeignGrants(ctx, p, name, grants)
}

// withoutForeignGrants drops from grants each namespace other than p's where a Role or
// RoleBinding named name exists that is not p's (workloadOwner), and reports it: a tenant who
// may write RBAC in their namespace could have taken the name, and applying would take their
// object over. In p's own namespace the name is p's like the rest of its workload.
func (r *providerReconciler) withoutForeignGrants(ctx context.Context, p *banlieuev1.Provider, name string, grants map[string][]string) error {
	for _, ns := range slices.Sorted(maps.Keys(grants)) {
		if ns == p.Namespace {
			continue
		}
		for _, kind := range []string{"RoleList", "RoleBindingList"} {
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind(kind))
			// list, not get: the operator lists RBAC objects for pruning and needs no more.
			if err := r.apiReader.List(ctx, list, client.InNamespace(ns), client.MatchingFields{"metadata.name": name}); err != nil {
				return fmt.Errorf("looking for %s %s/%s: %w", strings.TrimSuffix(kind, "List"), ns, name, err)
			}
			if len(list.Items) == 0 {
				continue
			}
			if owner, ok := workloadOwner(&list.Items[0]); !ok || owner != client.ObjectKeyFromObject(p) {
				r.recorder.Eventf(p, nil, corev1.EventTypeWarning, banlieuev1.ReasonUserDataGrantConflict, "Reconcile",
					"%s %s/%s exists and is not this Provider's: its machines' user-data in namespace %s is not granted; rename or delete it",
					strings.TrimSuffix(kind, "List"), ns, name, ns)
				delete(grants, ns)
				break
			}
		}
	}
	return nil
}

// userDataName names the Role and RoleBinding that grant a provider its machines' user-data
// Secrets in one namespace. The workload name is already unique to (class, Provider namespace,
// Provider name), so two Providers' grants never share a name in a tenant namespace, even when
// the Providers share a name (docs/security.md, "Workload names in shared scopes").
func userDataName(workload string) string {
	return workload + "-userdata"
}

// userDataObjects are a Role and a RoleBinding for each namespace of grants, giving sa get on
// exactly those Secrets. They carry the workload's labels and annotation, so pruning removes
// a namespace's pair once its last machine with user-data is gone and cleanup removes them all
// with the Provider; owner references cannot cross namespaces, so only the pair in the
// Provider's own namespace is owned by it. Sorted by namespace, so they apply in a stable order.
func userDataObjects(p *banlieuev1.Provider, workload string, lbls, ann map[string]string, sa *rbacv1ac.SubjectApplyConfiguration,
	grants map[string][]string) []applyObject {
	name := userDataName(workload)
	var objs []applyObject
	for _, ns := range slices.Sorted(maps.Keys(grants)) {
		rule := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: grants[ns]}
		objs = append(objs,
			withOwner(rbacv1ac.Role(name, ns).WithLabels(lbls).WithAnnotations(ann), p, ns).
				WithRules(policyRules([]rbacv1.PolicyRule{rule})...),
			withOwner(rbacv1ac.RoleBinding(name, ns).WithLabels(lbls).WithAnnotations(ann), p, ns).
				WithRoleRef(roleRef("Role", name)).
				WithSubjects(sa))
	}
	return objs
}

// providerOfMachine maps a LibvirtMachine to its Provider, whose grants list its user-data
// Secret: the Provider's namespace is the machine's providerRef.namespace, defaulted to its own.
func providerOfMachine(_ context.Context, o client.Object) []reconcile.Request {
	m, ok := o.(*infrav1.LibvirtMachine)
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: m.ProviderKey()}}
}

// userDataRefChanged passes a machine's creation and deletion, and an update that sets or
// clears its user-data reference or moves it to another Provider: nothing else of a machine
// changes its Provider's grants. On an update both the old and the new object are mapped, so a
// move wakes both Providers.
var userDataRefChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		old, oldOK := e.ObjectOld.(*infrav1.LibvirtMachine)
		cur, curOK := e.ObjectNew.(*infrav1.LibvirtMachine)
		return !oldOK || !curOK || (old.Spec.UserDataSecretRef == nil) != (cur.Spec.UserDataSecretRef == nil) ||
			old.ProviderKey() != cur.ProviderKey() || machineOwnerUID(old) != machineOwnerUID(cur)
	},
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// machineOwnerUID is the UID of m's Cluster API Machine controller, empty without one: the
// Machine taking a LibvirtMachine over changes its Provider's bootstrap grants.
func machineOwnerUID(m metav1.Object) types.UID {
	if ref := capi.OwnerMachine(m); ref != nil {
		return ref.UID
	}
	return ""
}
