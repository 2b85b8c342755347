package operator

import (
	"context"
	"fmt"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/userdata"
)

// machineProviderIndex indexes LibvirtMachines by spec.providerRef.name, so a Provider finds its
// machines from the cache.
const machineProviderIndex = "spec.providerRef.name"

// machineUserDataSecrets are the per-machine user-data Secrets the provider of p may get: one for
// each machine of p that has user-data. The name is derived from the machine's name
// (userdata.SecretName), never taken from its spec, so whoever writes a LibvirtMachine cannot
// widen the provider's Role to a Secret of their choosing; the provider in turn reads only that
// name (internal/provider/libvirt/userdata.go). Sorted, so the Role does not change from one
// pass to the next.
func machineUserDataSecrets(ctx context.Context, c client.Reader, p *banlieuev1.Provider) ([]string, error) {
	var machines infrav1.LibvirtMachineList
	if err := c.List(ctx, &machines, client.InNamespace(p.Namespace), client.MatchingFields{machineProviderIndex: p.Name}); err != nil {
		return nil, fmt.Errorf("listing the LibvirtMachines of Provider %s/%s: %w", p.Namespace, p.Name, err)
	}
	var names []string
	for i := range machines.Items {
		if machines.Items[i].Spec.UserDataSecretRef != nil {
			names = append(names, userdata.SecretName(machines.Items[i].Name))
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// providerOfMachine maps a LibvirtMachine to the Provider whose Role lists its user-data Secret.
func providerOfMachine(_ context.Context, o client.Object) []reconcile.Request {
	m, ok := o.(*infrav1.LibvirtMachine)
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.ProviderRef.Name}}}
}

// userDataRefChanged passes a machine's creation and deletion, and an update that sets or
// clears its user-data reference: nothing else of a machine changes its Provider's Role.
var userDataRefChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		old, oldOK := e.ObjectOld.(*infrav1.LibvirtMachine)
		cur, curOK := e.ObjectNew.(*infrav1.LibvirtMachine)
		return !oldOK || !curOK || (old.Spec.UserDataSecretRef == nil) != (cur.Spec.UserDataSecretRef == nil)
	},
	GenericFunc: func(event.GenericEvent) bool { return false },
}
