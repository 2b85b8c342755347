package operator

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// vsphereMachineProviderKey is the machineProviderIndex value of a VSphereMachine.
func vsphereMachineProviderKey(o client.Object) []string {
	return []string{o.(*infrav1.VSphereMachine).ProviderKey().String()}
}

// vsphereUserDataGrants are the per-machine user-data Secrets the provider of p may get for its
// VSphereMachines, by namespace, decided as userDataGrants decides them for LibvirtMachines:
// only p's machines with user-data, only in namespaces p admits, each name derived from the
// machine's name and never taken from its spec.
func vsphereUserDataGrants(p *banlieuev1.Provider, machines []infrav1.VSphereMachine, nsLabels map[string]map[string]string) map[string][]string {
	return grantsOf(p, machines, nsLabels, func(m *infrav1.VSphereMachine) (client.ObjectKey, bool) {
		return m.ProviderKey(), m.Spec.UserDataSecretRef != nil
	})
}

// providerOfVSphereMachine maps a VSphereMachine to its Provider, whose grants list its
// user-data Secret.
func providerOfVSphereMachine(_ context.Context, o client.Object) []reconcile.Request {
	m, ok := o.(*infrav1.VSphereMachine)
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: m.ProviderKey()}}
}

// vsphereUserDataRefChanged passes a VSphereMachine's creation and deletion, and an update that
// sets or clears its user-data reference, moves it to another Provider or changes the Cluster API
// Machine that controls it (whose bootstrap data Secret is granted).
var vsphereUserDataRefChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		old, oldOK := e.ObjectOld.(*infrav1.VSphereMachine)
		cur, curOK := e.ObjectNew.(*infrav1.VSphereMachine)
		return !oldOK || !curOK || (old.Spec.UserDataSecretRef == nil) != (cur.Spec.UserDataSecretRef == nil) ||
			old.ProviderKey() != cur.ProviderKey() || machineOwnerUID(old) != machineOwnerUID(cur)
	},
	GenericFunc: func(event.GenericEvent) bool { return false },
}
