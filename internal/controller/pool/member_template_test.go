package pool

import (
	"net/netip"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
)

func TestNewMember(t *testing.T) {
	pool := &banlieuev1.VirtualMachinePool{
		ObjectMeta: metav1.ObjectMeta{Name: "web-pool", Namespace: "banlieue-system", UID: "pool-uid"},
		Spec: banlieuev1.VirtualMachinePoolSpec{
			Template: banlieuev1.VirtualMachineTemplate{
				Labels:      map[string]string{"app": "web"},
				Annotations: map[string]string{"note": "x"},
				Spec: banlieuev1.VirtualMachineSpec{
					ClassRef: banlieuev1.LocalObjectReference{Name: "small"}, ImageRef: banlieuev1.LocalObjectReference{Name: "ubuntu-2404"},
					NetworkOverrides: []banlieuev1.NetworkOverride{
						{Name: "nic1", Static: banlieuev1.StaticIpamConfig{Address: "10.9.9.9", Prefix: 8}},
						{Name: "nic0", Static: banlieuev1.StaticIpamConfig{Address: "10.0.0.1", Prefix: 8}},
					},
				},
			},
			Addressing: &banlieuev1.PoolAddressing{Interface: "nic0", Pool: []string{"192.0.2.10"}, Prefix: 24,
				Gateway: "192.0.2.1", Nameservers: []string{"192.0.2.53"}, Domain: "edge.example"},
		},
	}
	vm, err := newMember(pool, rev, netip.MustParseAddr("192.0.2.10"), app.NewScheme())
	if err != nil {
		t.Fatal(err)
	}
	if vm.GenerateName != "web-pool-" || vm.Name != "" || vm.Namespace != "banlieue-system" ||
		!reflect.DeepEqual(vm.Labels, map[string]string{"app": "web", banlieuev1.LabelPool: "web-pool", banlieuev1.LabelPoolImageRevision: rev}) ||
		vm.Annotations["note"] != "x" {
		t.Errorf("metadata = %+v", vm.ObjectMeta)
	}
	if len(vm.OwnerReferences) != 1 || vm.OwnerReferences[0].Kind != "VirtualMachinePool" || !*vm.OwnerReferences[0].Controller {
		t.Errorf("owners = %+v", vm.OwnerReferences)
	}
	want := []banlieuev1.NetworkOverride{
		{Name: "nic0", Static: banlieuev1.StaticIpamConfig{Address: "192.0.2.10", Prefix: 24, Gateway: "192.0.2.1",
			Nameservers: []string{"192.0.2.53"}, Domain: "edge.example"}},
		{Name: "nic1", Static: banlieuev1.StaticIpamConfig{Address: "10.9.9.9", Prefix: 8}},
	}
	if !reflect.DeepEqual(vm.Spec.NetworkOverrides, want) {
		t.Errorf("overrides = %+v, want %+v", vm.Spec.NetworkOverrides, want)
	}
	if len(pool.Spec.Template.Spec.NetworkOverrides) != 2 || pool.Spec.Template.Spec.NetworkOverrides[1].Name != "nic0" {
		t.Errorf("the template was modified: %+v", pool.Spec.Template.Spec.NetworkOverrides)
	}

	pool.Spec.Addressing = nil
	vm, err = newMember(pool, rev, netip.Addr{}, app.NewScheme())
	if err != nil || len(vm.Spec.NetworkOverrides) != 2 || vm.Spec.NetworkOverrides[0].Name != "nic1" {
		t.Errorf("without addressing the template's overrides stay as they are: %+v, %v", vm.Spec.NetworkOverrides, err)
	}
}
