package vsphere

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

func TestProviderFailureDomains(t *testing.T) {
	p := &banlieuev1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "vc", Labels: map[string]string{"site": "paris"}},
		Spec: banlieuev1.ProviderSpec{Connection: banlieuev1.ProviderConnection{Endpoint: "https://vc.example/sdk"},
			Capabilities: banlieuev1.ProviderCapabilities{
				StorageClasses: []banlieuev1.StorageClassMapping{
					{Name: "standard", Target: map[string]string{targetDatastore: "ds1"}},
					{Name: "fast", Target: map[string]string{targetDatastore: "ssd"}},
				},
				NetworkClasses: []banlieuev1.NetworkClassMapping{{Name: "prod", Target: map[string]string{targetPortGroup: "pg"}}},
				Features:       []string{"vtpm", "efi-secure-boot"},
			}}}
	a := FailureDomain{Name: "dc1.a", Datacenter: "dc1", Cluster: "a", ResourcePool: "a/Resources", Region: "eu", Zone: "eu-1a",
		Datastores: []string{"ds1", "ssd"}, Networks: []string{"pg"}, VTPM: true, CPUs: 8, MemoryMiB: 1024,
		DatastoreSpace: []DatastoreSpace{{Name: "ds1", CapacityGiB: 1024, FreeGiB: 100}, {Name: "ssd", CapacityGiB: 512, FreeGiB: 0}}}
	// A cluster vCenter reports no size for publishes no capacity, its datastores' space neither.
	b := FailureDomain{Name: "dc1.b", Datacenter: "dc1", Cluster: "b", ResourcePool: "b/Resources",
		Datastores: []string{"ds1"}, DatastoreSpace: []DatastoreSpace{{Name: "ds1", CapacityGiB: 1024, FreeGiB: 100}}}

	for _, tc := range []struct {
		name        string
		p           *banlieuev1.Provider
		fds         []FailureDomain
		wantStorage [][]string
		wantNets    [][]string
		wantMissing []string
	}{
		{"every class somewhere", p, []FailureDomain{a, b}, [][]string{{"standard", "fast"}, {"standard"}}, [][]string{{"prod"}, nil}, nil},
		{"a datastore no cluster reaches", p, []FailureDomain{b}, [][]string{{"standard"}}, [][]string{nil},
			[]string{"storageClass fast (datastore ssd)", "networkClass prod (portGroup pg)"}},
		{"no compute cluster", p, nil, nil, nil, []string{"compute cluster (none in the inventory)"}},
		{"a class without its target key", &banlieuev1.Provider{Spec: banlieuev1.ProviderSpec{Capabilities: banlieuev1.ProviderCapabilities{
			StorageClasses: []banlieuev1.StorageClassMapping{{Name: "x", Target: map[string]string{"pool": "p"}}}}}},
			[]FailureDomain{b}, [][]string{nil}, [][]string{nil}, []string{"storageClass x (no datastore target)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, missing := providerFailureDomains(tc.p, tc.fds)
			if !reflect.DeepEqual(missing, tc.wantMissing) {
				t.Errorf("missing %q, want %q", missing, tc.wantMissing)
			}
			if len(got) != len(tc.fds) {
				t.Fatalf("%d failure domains, want %d", len(got), len(tc.fds))
			}
			for i, fd := range got {
				if !reflect.DeepEqual(fd.Attributes.AvailableStorageClasses, tc.wantStorage[i]) ||
					!reflect.DeepEqual(fd.Attributes.AvailableNetworkClasses, tc.wantNets[i]) {
					t.Errorf("%s: storage %v networks %v, want %v %v", fd.Name, fd.Attributes.AvailableStorageClasses,
						fd.Attributes.AvailableNetworkClasses, tc.wantStorage[i], tc.wantNets[i])
				}
			}
		})
	}

	// Names, topology labels, features and capacity of one cluster.
	got, _ := providerFailureDomains(p, []FailureDomain{a, b})
	if l := got[0].Labels; l["name"] != "dc1.a" || l["site"] != "paris" || l[LabelRegion] != "eu" || l[LabelZone] != "eu-1a" {
		t.Errorf("labels %v", l)
	}
	if _, ok := got[1].Labels[LabelZone]; ok {
		t.Errorf("an untagged cluster has zone label %v", got[1].Labels)
	}
	if !reflect.DeepEqual(got[0].Attributes.Features, []string{"vtpm", "efi-secure-boot"}) ||
		!reflect.DeepEqual(got[1].Attributes.Features, []string{"efi-secure-boot"}) {
		t.Errorf("features %v, %v: vtpm only where the cluster has it", got[0].Attributes.Features, got[1].Attributes.Features)
	}
	wantDatastores := []banlieuev1.PoolCapacity{{Name: "ds1", CapacityGiB: 1024, AvailableGiB: 100}, {Name: "ssd", CapacityGiB: 512, AvailableGiB: 0}}
	if c := got[0].Capacity; c == nil || c.CPUs != 8 || c.MemoryMiB != 1024 || !reflect.DeepEqual(c.Datastores, wantDatastores) || got[1].Capacity != nil {
		t.Errorf("capacity %+v, %+v", got[0].Capacity, got[1].Capacity)
	}
	if p.Labels["name"] != "" {
		t.Error("the Provider's labels were changed")
	}
}

func TestProviderQuery(t *testing.T) {
	p := &banlieuev1.Provider{Spec: banlieuev1.ProviderSpec{Capabilities: banlieuev1.ProviderCapabilities{
		StorageClasses: []banlieuev1.StorageClassMapping{{Name: "a", Target: map[string]string{targetDatastore: "ds"}},
			{Name: "b", Target: map[string]string{targetDatastore: "ds"}}, {Name: "c", Target: map[string]string{"pool": "x"}}},
		NetworkClasses: []banlieuev1.NetworkClassMapping{{Name: "n", Target: map[string]string{targetPortGroup: "pg"}}},
		Features:       []string{"vtpm"}}}}
	want := FailureDomainQuery{Datastores: []string{"ds"}, Networks: []string{"pg"}, Folder: "f", VTPM: true}
	if got := providerQuery(p, "f"); !reflect.DeepEqual(got, want) {
		t.Errorf("query %+v, want %+v", got, want)
	}
}
