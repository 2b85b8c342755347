//go:build capi

package capi

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/pkg/libvirt"
)

// pausedWindow is how long the paused case watches the host stay as it is. Unpaused, the
// provider starts a destroyed domain again within its 1 s resync (or at once, on the domain
// event), and Cluster API's MachineSet creates a Machine within seconds: a window many times
// either.
const pausedWindow = 20 * time.Second

// TestPausedClusterOnLab: Cluster API pauses a cluster with the Cluster's spec.paused (what
// `clusterctl move` sets; the cluster.x-k8s.io/paused annotation pauses only the object that
// carries it, as Cluster API's annotations.IsPaused reads it). While Cluster API's manager runs,
// banlieue observes the pause on the LibvirtMachine of a running Machine (Paused=True) and makes
// no call to the host: the domain, destroyed under it, stays off, and a scale-up creates no
// domain. Unpaused, the domain runs again, the scale-up's domain appears, and Paused=False.
func TestPausedClusterOnLab(t *testing.T) {
	ctx, s := newLabSuite(t, tinyGuest)
	bootVol := s.bootVolume(ctx, t)
	before := s.inventory(ctx, t)
	w := newWorkload(s.ns, s.provider, s.pool, bootVol)
	w.create(ctx, t, s.suite)
	s.scale(ctx, t, w.md, 1)
	first := s.waitMachines(ctx, t, 1, 240*time.Second)[0]
	ref, _, _ := unstructured.NestedString(first.Object, "spec", "infrastructureRef", "name")
	lm := client.ObjectKey{Namespace: s.ns, Name: ref}

	start := time.Now()
	s.pause(ctx, t, true)
	s.waitPaused(ctx, t, lm, metav1.ConditionTrue, "spec.paused")
	t.Logf("Cluster paused → LibvirtMachine Paused=True in %s", time.Since(start).Round(time.Millisecond))

	dom := s.domainOf(ctx, t, lm)
	if err := s.host.DomainDestroy(ctx, dom); err != nil {
		t.Fatalf("destroying %s under the paused machine: %v", dom.Name, err)
	}
	s.scale(ctx, t, w.md, 2)
	deadline := time.Now().Add(pausedWindow)
	for time.Now().Before(deadline) {
		inv := s.inventory(ctx, t)
		if n := countDomains(inv, s.ns+"-"); n != 1 {
			t.Fatalf("paused: %d domains of the cluster on the host, want the one: %s", n, strings.Join(inv, ", "))
		}
		if state, _, err := s.host.DomainState(ctx, dom); err != nil || state == libvirt.DomainRunning {
			t.Fatalf("paused: domain %s state %v (%v), want it left off", dom.Name, state, err)
		}
		// Cluster API pauses its MachineSet too; a LibvirtMachine it made anyway must be paused.
		var lms infrav1.LibvirtMachineList
		if err := s.env.Client.List(ctx, &lms, client.InNamespace(s.ns)); err != nil {
			t.Fatal(err)
		}
		for i := range lms.Items {
			if c := meta.FindStatusCondition(lms.Items[i].Status.Conditions, infrav1.ConditionPaused); lms.Items[i].Name != ref && c != nil && c.Status != metav1.ConditionTrue {
				t.Fatalf("paused: LibvirtMachine %s Paused=%s", lms.Items[i].Name, c.Status)
			}
		}
		time.Sleep(time.Second)
	}

	start = time.Now()
	s.pause(ctx, t, false)
	s.waitPaused(ctx, t, lm, metav1.ConditionFalse, "neither")
	s.waitMachines(ctx, t, 2, 240*time.Second)
	testenv.Eventually(t, 120*time.Second, dom.Name+" running again", func() error {
		state, _, err := s.host.DomainState(ctx, dom)
		if err != nil {
			return err
		}
		return testenv.Unmet(state == libvirt.DomainRunning, fmt.Sprintf("state %v", state))
	})
	s.waitHost(ctx, t, "with two domains", func(inv []string) bool { return countDomains(inv, s.ns+"-") == 2 })
	t.Logf("Cluster unpaused → Paused=False, two Machines provisioned, the first domain running, in %s", time.Since(start).Round(time.Millisecond))

	s.deleteCluster(ctx, t, w.cluster, before)
}

// pause sets the Cluster's spec.paused, as clusterctl move does.
func (s *labSuite) pause(ctx context.Context, t *testing.T, paused bool) {
	t.Helper()
	c := capiObject("Cluster", s.ns, "edge")
	patch := []byte(fmt.Sprintf(`{"spec":{"paused":%t}}`, paused))
	if err := s.env.Client.Patch(ctx, c, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatalf("setting Cluster spec.paused %t: %v", paused, err)
	}
}

// waitPaused waits for the LibvirtMachine's Paused condition to be status, its message holding
// msg.
func (s *labSuite) waitPaused(ctx context.Context, t *testing.T, key client.ObjectKey, status metav1.ConditionStatus, msg string) {
	t.Helper()
	// Unpausing is seen on the provider's requeue of a paused machine (app.RequeueDefault, 30 s).
	testenv.Eventually(t, 90*time.Second, fmt.Sprintf("LibvirtMachine %s Paused=%s", key.Name, status), func() error {
		var lm infrav1.LibvirtMachine
		if err := s.env.Client.Get(ctx, key, &lm); err != nil {
			return err
		}
		c := meta.FindStatusCondition(lm.Status.Conditions, infrav1.ConditionPaused)
		return testenv.Unmet(c != nil && c.Status == status && strings.Contains(c.Message, msg), fmt.Sprintf("%+v", c))
	})
}

// domainOf is the LibvirtMachine's domain on the host.
func (s *labSuite) domainOf(ctx context.Context, t *testing.T, key client.ObjectKey) libvirt.Domain {
	t.Helper()
	var lm infrav1.LibvirtMachine
	if err := s.env.Client.Get(ctx, key, &lm); err != nil {
		t.Fatal(err)
	}
	dom, err := s.host.DomainLookupByName(ctx, lm.Spec.DomainName)
	if err != nil {
		t.Fatalf("domain of %s: %v", key.Name, err)
	}
	return dom
}
