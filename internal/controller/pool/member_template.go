package pool

import (
	"net/netip"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// newMember builds a member of pool from its template (docs/guides/virtualmachine-pools.md). With addressing, the
// drawn address replaces any template override for addressing.interface and goes first, because
// user-data placeholders (${IP} and friends) read the first override.
func newMember(pool *banlieuev1.VirtualMachinePool, revision string, address netip.Addr, scheme *runtime.Scheme) (*banlieuev1.VirtualMachine, error) {
	t := pool.Spec.Template.DeepCopy()
	labels := make(map[string]string, len(t.Labels)+2)
	for k, v := range t.Labels {
		labels[k] = v
	}
	labels[banlieuev1.LabelPool] = pool.Name
	labels[banlieuev1.LabelPoolImageRevision] = revision
	vm := &banlieuev1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: pool.Name + "-",
			Namespace:    pool.Namespace,
			Labels:       labels,
			Annotations:  t.Annotations,
		},
		Spec: t.Spec,
	}
	if a := pool.Spec.Addressing; a != nil && address.IsValid() {
		overrides := slices.DeleteFunc(vm.Spec.NetworkOverrides, func(o banlieuev1.NetworkOverride) bool {
			return o.Name == a.Interface
		})
		vm.Spec.NetworkOverrides = slices.Insert(overrides, 0, banlieuev1.NetworkOverride{
			Name: a.Interface,
			Static: banlieuev1.StaticIpamConfig{
				Address:     address.String(),
				Prefix:      a.Prefix,
				Gateway:     a.Gateway,
				Nameservers: a.Nameservers,
				Domain:      a.Domain,
			},
		})
	}
	if err := controllerutil.SetControllerReference(pool, vm, scheme); err != nil {
		return nil, err
	}
	return vm, nil
}
