package operator

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/capi"
	"banlieue.io/banlieue/internal/tenancy"
)

// bootstrapGrants adds to grants, for each machine of p that a Cluster API Machine controls, the
// bootstrap data Secret that Machine names (spec.bootstrap.dataSecretName), in the machine's
// namespace, where the provider reads it (internal/provider/libvirt/machine_capi.go,
// internal/provider/vsphere/machine_capi.go). The name
// comes from the Machine, so it is granted only when the Machine is the one the machine's
// controller reference means and names the machine as its infrastructure (capi.ReadMachine), and
// the Secret is a bootstrap data Secret of the Machine's cluster (capi.CheckBootstrapSecret): a
// Machine naming any other Secret (a Provider's credentials) widens no provider's account. The
// Machine and the Secret are read by name, past the cache; a Machine whose bootstrap provider has
// not written its Secret yet is granted on the Provider's next pass (30 s). Namespaces are
// admitted as for user-data (tenancy.AdmitsNamespace over nsLabels).
func (r *providerReconciler) bootstrapGrants(ctx context.Context, p *banlieuev1.Provider, machines []capiInfraMachine,
	nsLabels map[string]map[string]string, grants map[string][]string) error {
	for _, im := range machines {
		m := im.obj
		owner := capi.OwnerMachine(m)
		if owner == nil || im.provider != client.ObjectKeyFromObject(p) {
			continue
		}
		if ok, _ := tenancy.AdmitsNamespace(p, m.GetNamespace(), nsLabels[m.GetNamespace()]); !ok {
			continue
		}
		machine, err := capi.ReadMachine(ctx, r.apiReader, m.GetNamespace(), owner, m, infrav1.GroupVersion.WithKind(im.kind))
		if err != nil || machine.DataSecretName == "" {
			// The provider reports why on the machine (OwnerMachineMismatch, WaitingForBootstrapData).
			continue
		}
		var s corev1.Secret
		if err := r.apiReader.Get(ctx, client.ObjectKey{Namespace: m.GetNamespace(), Name: machine.DataSecretName}, &s); apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return fmt.Errorf("reading the bootstrap data Secret %s/%s of Machine %s: %w", m.GetNamespace(), machine.DataSecretName, machine.Name, err)
		}
		if err := capi.CheckBootstrapSecret(&s, machine.ClusterName); err != nil {
			log.FromContext(ctx).Info("bootstrap data Secret not granted", "machine", client.ObjectKeyFromObject(m), "reason", err.Error())
			continue
		}
		grants[m.GetNamespace()] = append(grants[m.GetNamespace()], s.Name)
	}
	for ns, names := range grants {
		slices.Sort(names)
		grants[ns] = slices.Compact(names)
	}
	return nil
}

// capiInfraMachine is one LibvirtMachine or VSphereMachine as bootstrapGrants reads it: the
// object, its kind and the Provider it names.
type capiInfraMachine struct {
	obj      client.Object
	kind     string
	provider client.ObjectKey
}

// capiInfraMachines lists both machine kinds for bootstrapGrants.
func capiInfraMachines(libvirt []infrav1.LibvirtMachine, vsphere []infrav1.VSphereMachine) []capiInfraMachine {
	out := make([]capiInfraMachine, 0, len(libvirt)+len(vsphere))
	for i := range libvirt {
		out = append(out, capiInfraMachine{obj: &libvirt[i], kind: "LibvirtMachine", provider: libvirt[i].ProviderKey()})
	}
	for i := range vsphere {
		out = append(out, capiInfraMachine{obj: &vsphere[i], kind: "VSphereMachine", provider: vsphere[i].ProviderKey()})
	}
	return out
}
