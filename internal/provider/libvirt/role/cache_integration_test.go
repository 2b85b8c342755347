package role

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
)

// A provider started for one Provider caches only the machines naming a Provider of that name,
// selected by the real API server on the field the CRD declares selectable: in a fleet, each
// provider would otherwise hold, and be sent every change of, every machine of the cluster. A
// machine placed later (Cluster API's, providerRef set once) enters the cache then.
func TestProviderCachesOnlyItsMachines(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	env.Create(ctx, t,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-b"}},
		machine("team-a", "mine", &infrav1.ProviderReference{Name: "host-a"}),
		machine("team-b", "mine-shared", &infrav1.ProviderReference{Name: "host-a", Namespace: "team-a"}),
		machine("team-b", "same-name-elsewhere", &infrav1.ProviderReference{Name: "host-a"}),
		machine("team-a", "other-host", &infrav1.ProviderReference{Name: "host-b"}),
		machine("team-a", "unplaced", nil),
	)
	opts := testenv.ManagerOptions()
	opts.Cache.ByObject = CacheByObject(Options{ProviderName: "host-a", BuildNamespace: buildNamespace})
	mgr := testenv.NewManagerWith(t, env.Config, opts)
	// The cache's informer for LibvirtMachines starts with the first read through it.
	testenv.StartManager(t, mgr)
	cached := func() ([]string, error) {
		// A read through a cache whose informer cannot sync (a selector the API server refuses)
		// waits for the sync: bounded, so the refusal is what the test reports.
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		var list infrav1.LibvirtMachineList
		if err := mgr.GetClient().List(ctx, &list); err != nil {
			return nil, err
		}
		var names []string
		for _, m := range list.Items {
			names = append(names, m.Namespace+"/"+m.Name)
		}
		slices.Sort(names)
		return names, nil
	}
	want := []string{"team-a/mine", "team-b/mine-shared", "team-b/same-name-elsewhere"}
	testenv.Eventually(t, 10*time.Second, "the cache holds the machines naming host-a", func() error {
		got, err := cached()
		if err != nil {
			return err
		}
		return testenv.Unmet(slices.Equal(got, want), fmt.Sprintf("cached %v, want %v", got, want))
	})

	var unplaced infrav1.LibvirtMachine
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "unplaced"}, &unplaced); err != nil {
		t.Fatal(err)
	}
	unplaced.Spec.ProviderRef = &infrav1.ProviderReference{Name: "host-a"}
	if err := env.Client.Update(ctx, &unplaced); err != nil {
		t.Fatal(err)
	}
	want = []string{"team-a/mine", "team-a/unplaced", "team-b/mine-shared", "team-b/same-name-elsewhere"}
	testenv.Eventually(t, 10*time.Second, "the machine placed on host-a enters the cache", func() error {
		got, err := cached()
		if err != nil {
			return err
		}
		return testenv.Unmet(slices.Equal(got, want), fmt.Sprintf("cached %v, want %v", got, want))
	})
}

func machine(ns, name string, ref *infrav1.ProviderReference) *infrav1.LibvirtMachine {
	return &infrav1.LibvirtMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: infrav1.LibvirtMachineSpec{
			ProviderRef: ref,
			Pool:        "default",
			BootSource:  infrav1.BootSource{Kind: infrav1.BootBackingVolume, Volume: "debian-12.qcow2"},
			VCPUs:       1, MemoryMiB: 512, Firmware: banlieuev1.FirmwareEFI,
			Disks: []infrav1.LibvirtDisk{{Name: "os", SizeGiB: 10}},
		},
	}
}
