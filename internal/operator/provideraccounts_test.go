package operator

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

func TestProviderAccountsData(t *testing.T) {
	const wl = "banlieue-provider-libvirt-libvirt-edge-host-7-6f5aeeba6513f8e3"
	libvirt := libvirtClass()
	elsewhere := libvirtClass()
	elsewhere.Name = "libvirt-shared"
	elsewhere.Spec.WorkloadNamespace = "providers"
	elsewhere.Spec.Image = banlieuev1.ProviderImage{Repository: "registry.example/banlieue", Tag: "v0.2.0", Digest: "sha256:0123"}
	classes := map[string]*banlieuev1.ProviderClass{libvirt.Name: libvirt, elsewhere.Name: elsewhere}

	guide := *guideProvider()
	shared := *guideProvider()
	shared.Namespace, shared.Name, shared.Spec.ProviderClassRef.Name = "team-a", "edge", elsewhere.Name
	sharedWl := workloadName(elsewhere.Name, "team-a", "edge")
	orphan := *guideProvider()
	orphan.Name, orphan.Spec.ProviderClassRef.Name = "orphan", "missing"
	leaving := *guideProvider()
	now := metav1.Now()
	leaving.Name, leaving.DeletionTimestamp = "leaving", &now
	held := leaving
	held.Name, held.Finalizers = "held", []string{banlieuev1.FinalizerProviderInUse}
	heldWl := workloadName("libvirt", "banlieue-system", "held")

	tests := []struct {
		name      string
		providers []banlieuev1.Provider
		want      map[string]string
	}{
		{"no Provider, no entry: every provider account is refused", nil, map[string]string{}},
		{"the guide's Provider", []banlieuev1.Provider{guide}, map[string]string{
			"banlieue-system." + wl + ".image":    "registry.example/banlieue:v0.1.0",
			"banlieue-system." + wl + ".provider": "banlieue-system/libvirt-edge-host-7",
		}},
		{"keyed by the account's namespace, the class's workloadNamespace; the image as providerArgs pass it",
			[]banlieuev1.Provider{shared}, map[string]string{
				"providers." + sharedWl + ".image":    "registry.example/banlieue:v0.2.0@sha256:0123",
				"providers." + sharedWl + ".provider": "team-a/edge",
			}},
		{"a missing class and a cleanup under way get none; a Provider held by its machines keeps its own",
			[]banlieuev1.Provider{orphan, leaving, held}, map[string]string{
				"banlieue-system." + heldWl + ".image":    "registry.example/banlieue:v0.1.0",
				"banlieue-system." + heldWl + ".provider": "banlieue-system/held",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := providerAccountsData(tt.providers, classes); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %v\nwant %v", got, tt.want)
			}
		})
	}
}
