package controller

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
)

// spreadWorkers is more workers than VMs in a burst, so every VM of it is decided at once.
const spreadWorkers = 16

// TestRequiredAntiAffinityWithManyWorkers: with many workers, a burst of VMs of one namespace
// with a required anti-affinity rule created at once lands on distinct Providers, one per
// Provider, and the VMs left over wait AntiAffinityUnsatisfied: every decision sees the
// placements decided before it, whether the cache shows them yet or not (assumed.go, ADR-0132).
// Without the guard the VMs, all decided from a cache that shows none of them placed, pile
// onto the first Provider.
func TestRequiredAntiAffinityWithManyWorkers(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	mgr := env.NewManager(t)
	if err := Setup(mgr, Options{Workers: spreadWorkers}); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)
	s := &suite{c: env.Client}
	s.create(ctx, t, guideClass("small", false))

	const hosts, vms = 4, 10
	namespaces := []string{"spread-1", "spread-2", "spread-3"}
	var rows []banlieuev1.ProviderImageStatus
	for _, ns := range namespaces {
		s.namespace(ctx, t, ns)
		for h := range hosts {
			name := fmt.Sprintf("host-%d", h)
			s.provider(ctx, t, ns, name, "libvirt")
			rows = append(rows, readyRowIn(ns, name))
		}
	}
	s.image(ctx, t, "img-spread", banlieuev1.InstallImmediate, rows...)

	// Every VM of every namespace at once, so that all of them are queued together.
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, len(namespaces)*vms)
	for _, ns := range namespaces {
		for i := range vms {
			wg.Go(func() {
				vm := guideVM(ns, fmt.Sprintf("web-%02d", i), "small", "img-spread", nil)
				vm.Spec.Placement = &banlieuev1.Placement{AntiAffinity: []banlieuev1.AntiAffinityRule{{TopologyKey: "name", Mode: "required",
					LabelSelector: banlieuev1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}}
				if err := s.c.Create(ctx, vm); err != nil {
					errs <- err
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("creating a VM: %v", err)
	}

	for _, ns := range namespaces {
		testenv.Eventually(t, 30*time.Second, "every VM of "+ns+" decided", func() error {
			var list banlieuev1.VirtualMachineList
			if err := s.c.List(ctx, &list, client.InNamespace(ns)); err != nil {
				return err
			}
			var undecided []string
			for _, vm := range list.Items {
				if meta.FindStatusCondition(vm.Status.Conditions, banlieuev1.ConditionScheduled) == nil {
					undecided = append(undecided, vm.Name)
				}
			}
			return testenv.Unmet(len(list.Items) == vms && len(undecided) == 0, fmt.Sprintf("%d VMs, undecided %v", len(list.Items), undecided))
		})
	}
	t.Logf("%d VMs decided in %v with %d workers", len(namespaces)*vms, time.Since(start).Round(time.Millisecond), spreadWorkers)
	// A pile-up stays: later passes do not move a VM (migrationPolicy never). A VM whose first
	// pass failed after others had avoided its Provider is placed at its retry.
	for _, ns := range namespaces {
		testenv.Eventually(t, 20*time.Second, ns+": one VM per Provider, the rest waiting", func() error {
			return spread(ctx, s.c, ns, hosts, vms)
		})
	}
}

// spread is nil when the VMs of ns use each of the hosts Providers once and the others wait
// for anti-affinity; otherwise it says where they are.
func spread(ctx context.Context, c client.Client, ns string, hosts, vms int) error {
	var list banlieuev1.VirtualMachineList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return err
	}
	byHost := map[string][]string{}
	var waiting, other []string
	for _, vm := range list.Items {
		switch c := meta.FindStatusCondition(vm.Status.Conditions, banlieuev1.ConditionScheduled); {
		case c != nil && c.Status == metav1.ConditionTrue:
			byHost[vm.Status.Scheduled.ProviderName] = append(byHost[vm.Status.Scheduled.ProviderName], vm.Name)
		case c != nil && c.Reason == banlieuev1.ReasonAntiAffinityUnsatisfied:
			waiting = append(waiting, vm.Name)
		default:
			other = append(other, fmt.Sprintf("%s (%+v)", vm.Name, c))
		}
	}
	var piled []string
	for host, names := range byHost {
		if len(names) > 1 {
			piled = append(piled, fmt.Sprintf("%s holds %s", host, strings.Join(names, ", ")))
		}
	}
	if len(piled) > 0 || len(byHost) != hosts || len(waiting) != vms-hosts {
		return fmt.Errorf("want %d Providers with one VM each and %d VMs waiting; piled up: %v; placements %v; waiting %v; other %v",
			hosts, vms-hosts, piled, byHost, waiting, other)
	}
	return nil
}
