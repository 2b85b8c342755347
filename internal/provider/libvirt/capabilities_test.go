package libvirt

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/pkg/libvirt"
)

// guideCapabilities are the capabilities of the guide's libvirt-edge-host-7.
var guideCapabilities = banlieuev1.ProviderCapabilities{
	StorageClasses: []banlieuev1.StorageClassMapping{
		{Name: "gold", Target: map[string]string{"pool": "nvme-pool"}},
		{Name: "standard", Target: map[string]string{"pool": "default"}},
	},
	NetworkClasses: []banlieuev1.NetworkClassMapping{
		{Name: "prod", Target: map[string]string{"network": "br-prod"}},
	},
}

func TestNarrowCapabilities(t *testing.T) {
	tests := []struct {
		name        string
		caps        banlieuev1.ProviderCapabilities
		host        hostInventory
		wantStorage []string
		wantNetwork []string
		wantMissing []string
	}{
		{
			name:        "guide host without nvme-pool",
			caps:        guideCapabilities,
			host:        hostInventory{pools: []string{"default"}, networks: []string{"br-prod", "default"}},
			wantStorage: []string{"standard"},
			wantNetwork: []string{"prod"},
			wantMissing: []string{"storageClass gold (pool nvme-pool)"},
		},
		{
			name:        "everything present",
			caps:        guideCapabilities,
			host:        hostInventory{pools: []string{"default", "nvme-pool"}, networks: []string{"br-prod"}},
			wantStorage: []string{"gold", "standard"},
			wantNetwork: []string{"prod"},
		},
		{
			name:        "network missing",
			caps:        guideCapabilities,
			host:        hostInventory{pools: []string{"default", "nvme-pool"}},
			wantStorage: []string{"gold", "standard"},
			wantMissing: []string{"networkClass prod (network br-prod)"},
		},
		{
			name: "bridge verified against host interfaces",
			caps: banlieuev1.ProviderCapabilities{NetworkClasses: []banlieuev1.NetworkClassMapping{
				{Name: "lan", Target: map[string]string{"bridge": "br0"}},
				{Name: "dmz", Target: map[string]string{"bridge": "br9"}},
			}},
			host:        hostInventory{interfaces: []string{"br0", "eth0"}},
			wantNetwork: []string{"lan"},
			wantMissing: []string{"networkClass dmz (bridge br9)"},
		},
		{
			name: "a class without target is missing",
			caps: banlieuev1.ProviderCapabilities{
				StorageClasses: []banlieuev1.StorageClassMapping{{Name: "fast"}},
				NetworkClasses: []banlieuev1.NetworkClassMapping{{Name: "x", Target: map[string]string{"vlan": "7"}}},
			},
			host:        hostInventory{pools: []string{"fast"}},
			wantMissing: []string{"storageClass fast (no pool target)", "networkClass x (no network or bridge target)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := narrowCapabilities(tt.caps, tt.host)
			if !reflect.DeepEqual(got.storageClasses, tt.wantStorage) ||
				!reflect.DeepEqual(got.networkClasses, tt.wantNetwork) ||
				!reflect.DeepEqual(got.missing, tt.wantMissing) {
				t.Errorf("got storage %v network %v missing %v; want %v %v %v",
					got.storageClasses, got.networkClasses, got.missing, tt.wantStorage, tt.wantNetwork, tt.wantMissing)
			}
		})
	}
}

func TestFailureDomain(t *testing.T) {
	p := &banlieuev1.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: "libvirt-edge-host-7", Labels: map[string]string{"site": "edge", "name": "user"}},
		Spec: banlieuev1.ProviderSpec{
			Connection:   banlieuev1.ProviderConnection{Endpoint: "qemu+tls://kvm-7.edge.example/system"},
			Capabilities: banlieuev1.ProviderCapabilities{Features: []string{"vtpm"}},
		},
	}
	host := hostInventory{pools: []string{"zeta", "default"}, networks: []string{"br-prod"}, domainType: "qemu", libVersion: 7_000_000}
	fd := failureDomain(p, host, narrowed{storageClasses: []string{"standard"}, networkClasses: []string{"prod"}})
	want := banlieuev1.FailureDomain{
		Name:   "libvirt-edge-host-7",
		Labels: map[string]string{"site": "edge", "name": "libvirt-edge-host-7"},
		Attributes: banlieuev1.FailureDomainAttributes{
			AvailableStorageClasses: []string{"standard"},
			AvailableNetworkClasses: []string{"prod"},
			Features:                []string{"vtpm"},
			Raw: map[string]string{"endpoint": "qemu+tls://kvm-7.edge.example/system", "pools": "default,zeta",
				"networks": "br-prod", "domainType": "qemu", "libvirtVersion": "7.0.0"},
		},
	}
	if !reflect.DeepEqual(fd, want) {
		t.Errorf("got %+v\nwant %+v", fd, want)
	}
}

// The probe publishes the host's memory in MiB and its mapped pools' sizes in whole GiB,
// rounded down, in pool-name order; a host whose size was not read publishes none.
func TestCapacity(t *testing.T) {
	if got := capacity(hostInventory{}); got != nil {
		t.Errorf("no node info: capacity = %+v, want nil", got)
	}
	host := hostInventory{cpus: 16, memoryKiB: 24<<20 + 1023, poolSizes: map[string]libvirt.StoragePoolInfo{
		"nvme-pool": {State: libvirt.StoragePoolRunning, Capacity: 2<<40 + 1, Available: 3<<30 - 1},
		"default":   {State: libvirt.StoragePoolRunning, Capacity: 100 << 30, Available: 40 << 30},
	}}
	want := &banlieuev1.FailureDomainCapacity{CPUs: 16, MemoryMiB: 24 << 10, Pools: []banlieuev1.PoolCapacity{
		{Name: "default", CapacityGiB: 100, AvailableGiB: 40},
		{Name: "nvme-pool", CapacityGiB: 2048, AvailableGiB: 2},
	}}
	if got := capacity(host); !reflect.DeepEqual(got, want) {
		t.Errorf("capacity = %+v, want %+v", got, want)
	}
	if got := mappedPools(guideCapabilities); !reflect.DeepEqual(got, map[string]bool{"nvme-pool": true, "default": true}) {
		t.Errorf("mappedPools = %v", got)
	}
}
