package vsphere

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/provider/vsphere/vcsimtest"
	"banlieue.io/banlieue/internal/testenv"
)

// TestVSphereProviderStatusAgainstVCSim runs the Provider probe, as the provider's account with
// the shipped ClusterRole, on the real API server over vcsim: the Provider is Ready with its
// compute cluster as a failure domain, narrowed to the declared classes and sized; a class whose
// datastore no cluster reaches makes it CapabilitiesIncomplete, naming the class; a missing
// credentials Secret makes it CredentialsUnavailable with no failure domains.
func TestVSphereProviderStatusAgainstVCSim(t *testing.T) {
	const ns, name = "vs-provider", "vc-status"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s := startSimSuite(ctx, t, ns, name, banlieuev1.ProviderCapabilities{
		StorageClasses: []banlieuev1.StorageClassMapping{{Name: "standard", Target: map[string]string{targetDatastore: vcsimtest.Datastore}}},
		NetworkClasses: []banlieuev1.NetworkClassMapping{{Name: "prod", Target: map[string]string{targetPortGroup: vcsimtest.Network}}},
	}, "gone") // the operator's Role names the Secret the Provider names, there or not
	r := &ProviderReconciler{Client: s.mgr.GetClient(), APIReader: s.mgr.GetAPIReader(), Sessions: &Sessions{Dial: Dial()},
		Folder: vcsimtest.Folder, ProviderName: name, ProviderNamespace: ns}
	if err := r.SetupWithManager(s.mgr); err != nil {
		t.Fatal(err)
	}
	if err := (&ImageReconciler{Client: s.mgr.GetClient(), APIReader: s.mgr.GetAPIReader(), Sessions: r.Sessions,
		ProviderName: name, ProviderNamespace: ns}).SetupWithManager(s.mgr); err != nil {
		t.Fatal(err)
	}
	stop := testenv.StartManager(t, s.mgr)
	t.Cleanup(func() { _ = stop(); r.Sessions.CloseAll() })
	key := client.ObjectKey{Namespace: ns, Name: name}
	provider := func() *banlieuev1.Provider {
		var p banlieuev1.Provider
		if err := s.env.Client.Get(ctx, key, &p); err != nil {
			t.Fatal(err)
		}
		return &p
	}
	waitReady := func(status metav1.ConditionStatus, reason string) *banlieuev1.Provider {
		t.Helper()
		var p *banlieuev1.Provider
		testenv.Eventually(t, simWait, fmt.Sprintf("Provider Ready=%s %s", status, reason), func() error {
			p = provider()
			c := meta.FindStatusCondition(p.Status.Conditions, banlieuev1.ConditionReady)
			return testenv.Unmet(c != nil && c.Status == status && c.Reason == reason && c.ObservedGeneration == p.Generation,
				fmt.Sprintf("Ready %+v", c))
		})
		return p
	}

	t.Run("ready with its compute cluster", func(t *testing.T) {
		p := waitReady(metav1.ConditionTrue, banlieuev1.ReasonReconciled)
		if len(p.Status.FailureDomains) != 1 {
			t.Fatalf("failure domains %+v, want vcsim's one cluster", p.Status.FailureDomains)
		}
		fd := p.Status.FailureDomains[0]
		a := fd.Attributes
		if fd.Name != vcsimtest.FailureDomain || fd.Labels["name"] != vcsimtest.FailureDomain ||
			fmt.Sprint(a.AvailableStorageClasses, a.AvailableNetworkClasses) != "[standard] [prod]" ||
			a.Raw["datacenter"] != vcsimtest.Datacenter || a.Raw["cluster"] != "DC0_C0" {
			t.Errorf("failure domain %+v", fd)
		}
		// vcsim's two hosts of 2 threads and 4 294 430 720 bytes each.
		if c := fd.Capacity; c == nil || c.CPUs != 4 || c.MemoryMiB != (2*4294430720)>>20 {
			t.Errorf("capacity %+v, want 4 CPUs and %d MiB", c, (2*4294430720)>>20)
		}
		// The datastore the storage class maps, with its size and free space as vCenter's summary
		// reports them (vcsim: 1 TiB per host, less the disks on it), in whole GiB.
		size, free := s.sim.DatastoreSpace(t, vcsimtest.Datastore)
		want := []banlieuev1.PoolCapacity{{Name: vcsimtest.Datastore, CapacityGiB: size >> 30, AvailableGiB: free >> 30}}
		if c := fd.Capacity; c == nil || !reflect.DeepEqual(c.Datastores, want) || size <= 0 {
			t.Errorf("capacity.datastores %+v, want %+v", c, want)
		}
		reach := meta.FindStatusCondition(p.Status.Conditions, banlieuev1.ConditionProviderReachable)
		if reach == nil || reach.Status != metav1.ConditionTrue || reach.Message != "connected; 1 compute cluster(s)" {
			t.Errorf("ProviderReachable %+v", reach)
		}
	})

	t.Run("a Template source is ready where vCenter holds the template", func(t *testing.T) {
		image := func(name, ref string) *banlieuev1.VMImage {
			return &banlieuev1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: banlieuev1.VMImageSpec{
				OSFamily: "linux", OSDistribution: "ubuntu", OSVersion: "24.04", Architecture: "amd64", GuestAgent: "cloud-init",
				Sources: []banlieuev1.ImageSource{{ProviderClass: ClassName, Kind: banlieuev1.SourceTemplate, Ref: ref}}}}
		}
		// The template; a path with nothing there; a powered-off virtual machine not marked as one.
		s.sim.CreateForeign(t, "/DC0/vm/"+vcsimtest.Folder, "plain-vm")
		url := image("vs-url", "ubuntu")
		url.Spec.Sources[0].Kind, url.Spec.Sources[0].ImportFrom = banlieuev1.SourceURL, "https://cloud-images.example/ubuntu.img"
		s.env.Create(ctx, t, image("vs-tmpl", vcsimtest.Template), image("vs-nosuch", "/DC0/vm/nosuch"),
			image("vs-plain", "/DC0/vm/"+vcsimtest.Folder+"/plain-vm"), image("vs-moref", "vm-42"), url)
		plain := "/DC0/vm/" + vcsimtest.Folder + "/plain-vm"
		for _, tc := range []struct{ image, reason, message string }{
			{"vs-tmpl", banlieuev1.ReasonReconciled, ""},
			{"vs-nosuch", banlieuev1.ReasonTemplateNotFound,
				"spec.sources[providerClass=vsphere].ref /DC0/vm/nosuch is not a template in vCenter: resolve template: /DC0/vm/nosuch: not found"},
			{"vs-plain", banlieuev1.ReasonTemplateNotFound,
				"spec.sources[providerClass=vsphere].ref " + plain + " is not a template in vCenter: check template: " + plain + " is a virtual machine, not a template: not found"},
			// A managed-object reference is never resolved as one.
			{"vs-moref", banlieuev1.ReasonTemplateNotFound,
				`spec.sources[providerClass=vsphere].ref "vm-42" is not an inventory path: name the template as /<datacenter>/vm/<folder>/<template>`},
			{"vs-url", banlieuev1.ReasonUnsupportedSourceKind,
				"spec.sources[providerClass=vsphere].kind is Url; the vsphere provider clones a virtual machine template, so the kind must be Template"},
		} {
			testenv.Eventually(t, simWait, tc.image+"'s row "+tc.reason, func() error {
				var img banlieuev1.VMImage
				if err := s.env.Client.Get(ctx, client.ObjectKey{Name: tc.image}, &img); err != nil {
					return err
				}
				for _, row := range img.Status.PerProvider {
					if row.ProviderName == name && row.ProviderNamespace == ns {
						return testenv.Unmet(row.Reason == tc.reason && row.Message == tc.message && row.Ready == (tc.reason == banlieuev1.ReasonReconciled),
							fmt.Sprintf("row %+v", row))
					}
				}
				return fmt.Errorf("no row for %s/%s in %+v", ns, name, img.Status.PerProvider)
			})
		}
	})

	t.Run("a datastore no cluster reaches is CapabilitiesIncomplete", func(t *testing.T) {
		testenv.Patch(ctx, t, s.env.Client, key, &banlieuev1.Provider{}, func(p *banlieuev1.Provider) {
			p.Spec.Capabilities.StorageClasses = append(p.Spec.Capabilities.StorageClasses,
				banlieuev1.StorageClassMapping{Name: "fast", Target: map[string]string{targetDatastore: "nosuch"}})
		})
		p := waitReady(metav1.ConditionFalse, banlieuev1.ReasonCapabilitiesIncomplete)
		c := meta.FindStatusCondition(p.Status.Conditions, banlieuev1.ConditionReady)
		if want := "declared capabilities missing on the host: storageClass fast (datastore nosuch)"; c.Message != want {
			t.Errorf("message %q, want %q", c.Message, want)
		}
		if len(p.Status.FailureDomains) != 1 || fmt.Sprint(p.Status.FailureDomains[0].Attributes.AvailableStorageClasses) != "[standard]" {
			t.Errorf("failure domains %+v, want the cluster offering standard only", p.Status.FailureDomains)
		}
	})

	t.Run("a missing Secret is CredentialsUnavailable with no failure domains", func(t *testing.T) {
		testenv.Patch(ctx, t, s.env.Client, key, &banlieuev1.Provider{}, func(p *banlieuev1.Provider) {
			p.Spec.Connection.CredentialsRef.Name = "gone"
		})
		p := waitReady(metav1.ConditionFalse, banlieuev1.ReasonCredentialsUnavailable)
		if len(p.Status.FailureDomains) != 0 {
			t.Errorf("failure domains %+v, want none while vCenter is unverified", p.Status.FailureDomains)
		}
	})
}
