package vm

import (
	"banlieue.io/banlieue/internal/testenv/labhost"
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/pkg/libvirt"
)

// checkPool: a pool of 3 warm members on real domains reaches Warm=True; a claim binds one and
// the pool refills; deleting the claim destroys that member's domain.
func (s *suite) checkPool(ctx context.Context, t *testing.T, class, image string) {
	s.host = labhost.Dial(t, s.lab) // the connection of the previous subtest closed with it
	p := &banlieuev1.VirtualMachinePool{
		ObjectMeta: metav1.ObjectMeta{Name: "warm", Namespace: s.ns},
		Spec: banlieuev1.VirtualMachinePoolSpec{
			WarmReplicas: 3,
			MaxReplicas:  4,
			Readiness:    banlieuev1.ReadinessInfrastructureReady,
			Template: banlieuev1.VirtualMachineTemplate{Spec: banlieuev1.VirtualMachineSpec{
				ClassRef:        banlieuev1.LocalObjectReference{Name: class},
				ImageRef:        banlieuev1.LocalObjectReference{Name: image},
				MigrationPolicy: "never",
			}},
		},
	}
	if err := s.env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	waitPool := func(what string, ok func(*banlieuev1.VirtualMachinePool) bool) *banlieuev1.VirtualMachinePool {
		t.Helper()
		deadline := time.Now().Add(3 * time.Minute)
		for {
			var got banlieuev1.VirtualMachinePool
			err := s.env.Client.Get(ctx, client.ObjectKeyFromObject(p), &got)
			if err == nil && ok(&got) {
				return &got
			}
			if time.Now().After(deadline) {
				t.Fatalf("pool never reached %s: %+v (%v)", what, got.Status, err)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	warm := func(p *banlieuev1.VirtualMachinePool) bool {
		c := meta.FindStatusCondition(p.Status.Conditions, banlieuev1.ConditionWarm)
		return c != nil && c.Status == metav1.ConditionTrue && p.Status.Available >= 3
	}
	start := time.Now()
	waitPool("Warm=True with 3 available", warm)
	t.Logf("pool of 3 warm in %s", time.Since(start).Round(time.Millisecond))
	s.expectDomains(ctx, t, 3)

	claim := &banlieuev1.VirtualMachineClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: s.ns},
		Spec: banlieuev1.VirtualMachineClaimSpec{PoolRef: banlieuev1.LocalObjectReference{Name: p.Name},
			Subject: banlieuev1.ClaimSubject{Issuer: "https://issuer.example", ID: "alice"}, TTLSeconds: 3600},
	}
	if err := s.env.Client.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for claim.Status.Phase != banlieuev1.ClaimBound {
		if time.Now().After(deadline) {
			t.Fatalf("claim never bound: %+v", claim.Status)
		}
		time.Sleep(300 * time.Millisecond)
		if err := s.env.Client.Get(ctx, client.ObjectKeyFromObject(claim), claim); err != nil {
			t.Fatal(err)
		}
	}
	member := claim.Status.VirtualMachineRef.Name
	bound := s.ns + "-" + member
	if _, err := s.host.DomainLookupByName(ctx, bound); err != nil {
		t.Fatalf("the bound member's domain %s: %v", bound, err)
	}
	// The pool refills: three warm again besides the claimed one.
	waitPool("refilled (3 available, 1 claimed)", func(p *banlieuev1.VirtualMachinePool) bool {
		return warm(p) && p.Status.Claimed == 1
	})
	s.expectDomains(ctx, t, 4)

	if err := s.env.Client.Delete(ctx, claim); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(2 * time.Minute)
	for {
		_, err := s.host.DomainLookupByName(ctx, bound)
		if libvirt.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("releasing the claim must destroy %s: %v", bound, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	s.expectDomains(ctx, t, 3)

	// Clean up: members are deleted one by one (envtest has no garbage collector).
	if err := s.env.Client.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}
	var members banlieuev1.VirtualMachineList
	if err := s.env.Client.List(ctx, &members, client.InNamespace(s.ns), client.MatchingLabels{"banlieue.io/pool": p.Name}); err != nil {
		t.Fatal(err)
	}
	for i := range members.Items {
		_ = s.env.Client.Delete(ctx, &members.Items[i])
	}
	for i := range members.Items {
		s.waitVMGone(ctx, t, &members.Items[i])
	}
}

// expectDomains counts this run's pool member domains (named <ns>-warm-…) on the host.
func (s *suite) expectDomains(ctx context.Context, t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		doms, err := s.host.ListAllDomains(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, d := range doms {
			if len(d.Name) > len(s.ns)+6 && d.Name[:len(s.ns)+6] == s.ns+"-warm-" {
				n++
			}
		}
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pool member domains on the host, want %d", n, want)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
