package pool

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/ssa"
	"banlieue.io/banlieue/internal/testenv"
)

// The suite plays the VirtualMachine controller (member conditions and addresses, under its
// field manager) and the imagebuilder (the VMImage build checksum). There is no garbage
// collector in envtest, so only what these controllers delete themselves is ever deleted.
const (
	vmControllerManager = banlieuev1.FieldManagerController
	imagebuilderManager = banlieuev1.FieldManagerImagebuilder
	waitTimeout         = 30 * time.Second
)

type suite struct {
	c client.Client
}

func TestPoolsAndClaimsAgainstAPIServer(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	// Two processes: the first runs both controllers, the second a competing claim controller
	// with its own cache and several workers, so binds race for real.
	first := env.NewManager(t)
	if err := Setup(first, Options{}); err != nil {
		t.Fatal(err)
	}
	second := env.NewManager(t)
	if err := setupClaim(second, Options{}, 8); err != nil {
		t.Fatal(err)
	}
	for _, mgr := range []ctrl.Manager{first, second} {
		testenv.StartManager(t, mgr)
	}

	s := &suite{c: env.Client}
	t.Run("group", func(t *testing.T) {
		t.Run("scale 0, 5, 2, 5", func(t *testing.T) { t.Parallel(); s.testScale(ctx, t) })
		t.Run("image change recycles unclaimed members with surge", func(t *testing.T) { t.Parallel(); s.testRecycle(ctx, t) })
		t.Run("capacity conditions", func(t *testing.T) { t.Parallel(); s.testCapacity(ctx, t) })
		t.Run("20 claims race for 5 members", func(t *testing.T) { t.Parallel(); s.testRace(ctx, t) })
		t.Run("claim lifecycle: TTL, delete, lost member", func(t *testing.T) { t.Parallel(); s.testClaimLifecycle(ctx, t) })
		t.Run("a release deletes only the member the claim bound", func(t *testing.T) { t.Parallel(); s.testReleaseSparesBystanders(ctx, t) })
		t.Run("a VM labelled by hand is no member of the pool", func(t *testing.T) { t.Parallel(); s.testPoolSparesBystanders(ctx, t) })
		t.Run("examples 18 and 19", func(t *testing.T) { t.Parallel(); s.testExamples(ctx, t) })
	})
}

func (s *suite) testScale(ctx context.Context, t *testing.T) {
	ns := s.namespace(ctx, t, "scale")
	s.image(ctx, t, "img-scale", "")
	s.create(ctx, t, poolOf(ns, "web", "img-scale", 0, 10, 2))
	s.waitPool(ctx, t, ns, "web", "Warm=True at 0", func(p *banlieuev1.VirtualMachinePool) bool {
		return hasCondition(p.Status.Conditions, banlieuev1.ConditionWarm, metav1.ConditionTrue, banlieuev1.ReasonWarm, "0/0 warm member(s) available")
	})

	s.setWarm(ctx, t, ns, "web", 5)
	s.fill(ctx, t, ns, "web", 5, 2)
	for _, vm := range s.members(ctx, t, ns, "web") {
		if !strings.HasPrefix(vm.Name, "web-") || vm.Labels[banlieuev1.LabelPoolImageRevision] != "gen-1" || vm.Labels["app"] != "web" ||
			len(vm.OwnerReferences) != 1 || vm.OwnerReferences[0].Name != "web" || !ptr.Deref(vm.OwnerReferences[0].Controller, false) {
			t.Errorf("member metadata = %+v", vm.ObjectMeta)
		}
	}

	s.setWarm(ctx, t, ns, "web", 2)
	testenv.Eventually(t, waitTimeout, "scale down to 2", func() error {
		vms := s.members(ctx, t, ns, "web")
		return testenv.Unmet(len(vms) == 2, fmt.Sprintf("%d members", len(vms)))
	})
	s.waitPool(ctx, t, ns, "web", "2 available", func(p *banlieuev1.VirtualMachinePool) bool {
		return p.Status.Available == 2 && p.Status.Replicas == 2
	})

	s.setWarm(ctx, t, ns, "web", 5)
	s.fill(ctx, t, ns, "web", 5, 2)
}

func (s *suite) testRecycle(ctx context.Context, t *testing.T) {
	ns := s.namespace(ctx, t, "recycle")
	s.image(ctx, t, "img-recycle", "sha256:"+strings.Repeat("a", 64))
	pool := poolOf(ns, "web", "img-recycle", 3, 4, 1)
	s.create(ctx, t, pool)
	s.fill(ctx, t, ns, "web", 3, 1)

	s.create(ctx, t, claimOf(ns, "keep", "web", 3600))
	held := s.waitClaim(ctx, t, ns, "keep", "Bound", func(c *banlieuev1.VirtualMachineClaim) bool {
		return c.Status.Phase == banlieuev1.ClaimBound
	}).Status.VirtualMachineRef.Name
	// The pool refills behind the claim: 1 claimed + 3 warm = maxReplicas.
	s.fill(ctx, t, ns, "web", 3, 1)

	s.setChecksum(ctx, t, "img-recycle", "sha256:"+strings.Repeat("b", 64))
	testenv.Eventually(t, waitTimeout, "every unclaimed member on the new revision", func() error {
		vms := s.members(ctx, t, ns, "web")
		provisioning, fresh, stale := 0, 0, 0
		for _, vm := range vms {
			switch {
			case vm.Labels[banlieuev1.LabelClaim] != "":
				continue
			case !isReady(&vm):
				provisioning++
			case vm.Labels[banlieuev1.LabelPoolImageRevision] == strings.Repeat("b", 12):
				fresh++
			default:
				stale++
			}
		}
		if provisioning > 1 {
			t.Errorf("%d members provisioning at once, maxSurge is 1", provisioning)
		}
		if fresh+stale+provisioning > 3 {
			t.Errorf("%d unclaimed members alive with one claimed, maxReplicas is 4", fresh+stale+provisioning)
		}
		s.readyAll(ctx, t, vms)
		return testenv.Unmet(fresh == 3 && stale == 0 && provisioning == 0, fmt.Sprintf("fresh %d, stale %d, provisioning %d", fresh, stale, provisioning))
	})
	var vm banlieuev1.VirtualMachine
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: held}, &vm); err != nil || vm.Labels[banlieuev1.LabelPoolImageRevision] != strings.Repeat("a", 12) {
		t.Errorf("the claimed member %s must be left alone: %v %v", held, err, vm.Labels)
	}
	s.waitPool(ctx, t, ns, "web", "status on the new revision", func(p *banlieuev1.VirtualMachinePool) bool {
		return p.Status.ImageRevision == strings.Repeat("b", 12) && p.Status.Available == 3 && p.Status.Claimed == 1 &&
			hasCondition(p.Status.Conditions, banlieuev1.ConditionWarm, metav1.ConditionTrue, banlieuev1.ReasonWarm, "3/3 warm member(s) available")
	})
}

func (s *suite) testCapacity(ctx context.Context, t *testing.T) {
	ns := s.namespace(ctx, t, "capacity")
	s.image(ctx, t, "img-capacity", "")

	addr := poolOf(ns, "addr", "img-capacity", 3, 5, 3)
	addr.Spec.Addressing = &banlieuev1.PoolAddressing{Interface: "nic0", Pool: []string{"10.0.0.1-10.0.0.2"}, Prefix: 24, Gateway: "10.0.0.254"}
	s.create(ctx, t, addr)
	// Members that report no readiness at all would be ReadinessSignalAbsent first.
	testenv.Eventually(t, waitTimeout, "pool addr: Capacity=False AddressRangeExhausted", func() error {
		s.readyAll(ctx, t, s.members(ctx, t, ns, "addr"))
		p := s.getPool(ctx, t, ns, "addr")
		return testenv.Unmet(hasCondition(p.Status.Conditions, banlieuev1.ConditionCapacity, metav1.ConditionFalse, banlieuev1.ReasonAddressRangeExhausted,
			"1 member(s) not created: address range exhausted"), fmt.Sprintf("%+v", p.Status))
	})
	got := map[string]bool{}
	for _, vm := range s.members(ctx, t, ns, "addr") {
		o := vm.Spec.NetworkOverrides
		if len(o) != 1 || o[0].Name != "nic0" || o[0].Static.Prefix != 24 || o[0].Static.Gateway != "10.0.0.254" {
			t.Errorf("overrides of %s = %+v", vm.Name, o)
		}
		got[o[0].Static.Address] = true
	}
	if len(got) != 2 || !got["10.0.0.1"] || !got["10.0.0.2"] {
		t.Errorf("addresses handed out: %v", got)
	}

	bad := poolOf(ns, "bad", "img-capacity", 1, 1, 1)
	bad.Spec.Addressing = &banlieuev1.PoolAddressing{Interface: "nic0", Pool: []string{"10.0.0.x"}, Prefix: 24}
	s.create(ctx, t, bad)
	s.waitPool(ctx, t, ns, "bad", "the parse error", func(p *banlieuev1.VirtualMachinePool) bool {
		return hasCondition(p.Status.Conditions, banlieuev1.ConditionCapacity, metav1.ConditionFalse, banlieuev1.ReasonAddressRangeExhausted,
			`invalid addressing.pool[0] "10.0.0.x": not an IPv4 address, a-b range or CIDR block`)
	})

	s.create(ctx, t, poolOf(ns, "max", "img-capacity", 2, 3, 2))
	s.fill(ctx, t, ns, "max", 2, 2)
	for _, name := range []string{"c1", "c2"} {
		s.create(ctx, t, claimOf(ns, name, "max", 3600))
	}
	s.waitPool(ctx, t, ns, "max", "Capacity=False MaxReplicasReached", func(p *banlieuev1.VirtualMachinePool) bool {
		return p.Status.Claimed == 2 &&
			hasCondition(p.Status.Conditions, banlieuev1.ConditionCapacity, metav1.ConditionFalse, banlieuev1.ReasonMaxReplicasReached,
				"1 member(s) not created: maxReplicas reached")
	})

	signal := poolOf(ns, "signal", "img-capacity", 1, 1, 1)
	signal.Spec.Readiness = banlieuev1.ReadinessGuestReady
	s.create(ctx, t, signal)
	testenv.Eventually(t, waitTimeout, "a member to mark", func() error {
		vms := s.members(ctx, t, ns, "signal")
		s.readyAll(ctx, t, vms) // InfrastructureReady only: the image never announces itself
		return testenv.Unmet(len(vms) == 1, fmt.Sprintf("%d members", len(vms)))
	})
	s.waitPool(ctx, t, ns, "signal", "ReadinessSignalAbsent", func(p *banlieuev1.VirtualMachinePool) bool {
		return hasCondition(p.Status.Conditions, banlieuev1.ConditionWarm, metav1.ConditionFalse, banlieuev1.ReasonReadinessSignalAbsent,
			"0/1 warm member(s) available; "+signalAbsentMessage(banlieuev1.ReadinessGuestReady)) &&
			hasCondition(p.Status.Conditions, banlieuev1.ConditionCapacity, metav1.ConditionFalse, banlieuev1.ReasonReadinessSignalAbsent,
				signalAbsentMessage(banlieuev1.ReadinessGuestReady))
	})
}

func (s *suite) testRace(ctx context.Context, t *testing.T) {
	ns := s.namespace(ctx, t, "race")
	s.image(ctx, t, "img-race", "")
	s.create(ctx, t, poolOf(ns, "web", "img-race", 5, 5, 5))
	s.fill(ctx, t, ns, "web", 5, 5)

	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			if err := s.c.Create(ctx, claimOf(ns, fmt.Sprintf("claim-%02d", i), "web", 3600)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()

	var claims banlieuev1.VirtualMachineClaimList
	testenv.Eventually(t, waitTimeout, "5 bound, 15 pending", func() error {
		// A member taken by a bind that lost its race to record is a stray: its claim deletes it
		// and the pool makes another, which the provider would make Ready, as fill does.
		s.readyAll(ctx, t, s.members(ctx, t, ns, "web"))
		if err := s.c.List(ctx, &claims, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		bound, pending := 0, 0
		for _, c := range claims.Items {
			switch c.Status.Phase {
			case banlieuev1.ClaimBound:
				bound++
			case banlieuev1.ClaimPending:
				pending++
			}
		}
		return testenv.Unmet(bound == 5 && pending == 15, fmt.Sprintf("%d bound, %d pending", bound, pending))
	})
	// Long enough for every pending claim to look again (3 s) and for a second bind to show.
	time.Sleep(4 * time.Second)
	if err := s.c.List(ctx, &claims, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	members := map[string]string{}
	nonces := map[string]bool{}
	hex32 := regexp.MustCompile(`^[0-9a-f]{32}$`)
	for _, c := range claims.Items {
		if c.Status.Phase != banlieuev1.ClaimBound {
			if !hasCondition(c.Status.Conditions, banlieuev1.ConditionBound, metav1.ConditionFalse, banlieuev1.ReasonNoMemberAvailable,
				"no Ready, unclaimed member in pool web (pool: Filling: 0/5 warm member(s) available)") {
				t.Errorf("pending claim %s: %+v", c.Name, c.Status.Conditions)
			}
			continue
		}
		vm := c.Status.VirtualMachineRef.Name
		if prev, dup := members[vm]; dup {
			t.Errorf("member %s bound to both %s and %s", vm, prev, c.Name)
		}
		members[vm] = c.Name
		if !hex32.MatchString(c.Status.Nonce) || nonces[c.Status.Nonce] {
			t.Errorf("claim %s nonce %q", c.Name, c.Status.Nonce)
		}
		nonces[c.Status.Nonce] = true
		if c.Status.ExpiresAt.Sub(c.Status.BoundAt.Time) != time.Hour ||
			!hasCondition(c.Status.Conditions, banlieuev1.ConditionBound, metav1.ConditionTrue, banlieuev1.ReasonBound, "bound to "+vm) {
			t.Errorf("claim %s status = %+v", c.Name, c.Status)
		}
	}
	if len(members) != 5 {
		t.Errorf("%d distinct members bound, want 5", len(members))
	}
	labelled := 0
	for _, vm := range s.members(ctx, t, ns, "web") {
		claim := vm.Labels[banlieuev1.LabelClaim]
		if claim == "" {
			continue
		}
		labelled++
		if members[vm.Name] != claim || vm.Annotations[banlieuev1.AnnotationClaimSubjectIssuer] != "https://broker.example" ||
			vm.Annotations[banlieuev1.AnnotationClaimSubjectID] != "user-"+claim || len(vm.OwnerReferences) != 1 ||
			vm.OwnerReferences[0].Kind != "VirtualMachineClaim" || vm.OwnerReferences[0].Name != claim {
			t.Errorf("member %s labelled %q, annotations %v, owners %+v; bound to %q", vm.Name, claim, vm.Annotations, vm.OwnerReferences, members[vm.Name])
		}
	}
	if labelled != 5 {
		t.Errorf("%d members carry a claim label, want 5", labelled)
	}
}

func (s *suite) testClaimLifecycle(ctx context.Context, t *testing.T) {
	ns := s.namespace(ctx, t, "lifecycle")
	s.image(ctx, t, "img-lifecycle", "")
	s.create(ctx, t, claimOf(ns, "early", "web", 60))
	s.waitClaim(ctx, t, ns, "early", "PoolNotFound", func(c *banlieuev1.VirtualMachineClaim) bool {
		return c.Status.Phase == banlieuev1.ClaimPending &&
			hasCondition(c.Status.Conditions, banlieuev1.ConditionBound, metav1.ConditionFalse, banlieuev1.ReasonPoolNotFound, "pool web does not exist")
	})
	s.delete(ctx, t, &banlieuev1.VirtualMachineClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "early"}})
	s.create(ctx, t, poolOf(ns, "web", "img-lifecycle", 1, 5, 1))

	// TTL: bound, then released and deleted by the controller.
	s.fill(ctx, t, ns, "web", 1, 1)
	s.create(ctx, t, claimOf(ns, "short", "web", 2))
	c := s.waitClaim(ctx, t, ns, "short", "Bound with the member's addresses", func(c *banlieuev1.VirtualMachineClaim) bool {
		return c.Status.Phase == banlieuev1.ClaimBound && len(c.Status.Addresses) == 1 && len(c.Finalizers) == 1
	})
	if c.Finalizers[0] != banlieuev1.FinalizerClaimProtection || c.Status.Addresses[0].Address != "192.168.122.10" {
		t.Errorf("claim = %+v", c)
	}
	// The TTL's promise is the controller's delete, timed by the API server's deletionTimestamp;
	// the member's teardown after it is the garbage collector's pace, which a loaded machine
	// stretches.
	released := time.Now()
	testenv.Eventually(t, waitTimeout, "claim short deleted by its TTL", func() error {
		var got banlieuev1.VirtualMachineClaim
		err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "short"}, &got)
		switch {
		case apierrors.IsNotFound(err):
			released = time.Now() // gone between two reads: at the latest now
			return nil
		case err == nil && got.DeletionTimestamp != nil:
			released = got.DeletionTimestamp.Time
			return nil
		}
		return testenv.Unmet(false, fmt.Sprintf("not deleted yet (%v)", err))
	})
	if took := released.Sub(c.Status.BoundAt.Time); took > 10*time.Second {
		t.Errorf("a 2 s claim was deleted %s after it was bound", took)
	}
	s.waitGone(ctx, t, &banlieuev1.VirtualMachineClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "short"}})
	s.waitGone(ctx, t, &banlieuev1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: c.Status.VirtualMachineRef.Name}})

	// Deleting a claim destroys its member.
	s.fill(ctx, t, ns, "web", 1, 1)
	s.create(ctx, t, claimOf(ns, "deleted", "web", 3600))
	c = s.waitClaim(ctx, t, ns, "deleted", "Bound", func(c *banlieuev1.VirtualMachineClaim) bool {
		return c.Status.Phase == banlieuev1.ClaimBound
	})
	s.delete(ctx, t, c)
	s.waitGone(ctx, t, c)
	s.waitGone(ctx, t, &banlieuev1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: c.Status.VirtualMachineRef.Name}})
	s.waitPool(ctx, t, ns, "web", "released members no longer counted", func(p *banlieuev1.VirtualMachinePool) bool {
		return p.Status.Claimed == 0
	})

	// A lost member fails the claim for good, even with Ready members to spare.
	s.fill(ctx, t, ns, "web", 1, 1)
	s.create(ctx, t, claimOf(ns, "lost", "web", 3600))
	c = s.waitClaim(ctx, t, ns, "lost", "Bound", func(c *banlieuev1.VirtualMachineClaim) bool {
		return c.Status.Phase == banlieuev1.ClaimBound
	})
	lost := c.Status.VirtualMachineRef.Name
	s.delete(ctx, t, &banlieuev1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lost}})
	failed := func(c *banlieuev1.VirtualMachineClaim) bool {
		return c.Status.Phase == banlieuev1.ClaimFailed && c.Status.VirtualMachineRef.Name == lost &&
			hasCondition(c.Status.Conditions, banlieuev1.ConditionBound, metav1.ConditionFalse, banlieuev1.ReasonMemberLost,
				fmt.Sprintf("bound member %s no longer exists; claims are never rebound", lost))
	}
	s.waitClaim(ctx, t, ns, "lost", "Failed MemberLost", failed)
	s.fill(ctx, t, ns, "web", 1, 1)
	time.Sleep(4 * time.Second)
	if c := s.getClaim(ctx, t, ns, "lost"); !failed(c) {
		t.Errorf("claim moved on from Failed: %+v", c.Status)
	}
	for _, vm := range s.members(ctx, t, ns, "web") {
		if vm.Labels[banlieuev1.LabelClaim] != "" {
			t.Errorf("member %s was bound after the claim failed: %v", vm.Name, vm.Labels)
		}
	}
	s.delete(ctx, t, c)
	s.waitGone(ctx, t, c)
}

// testReleaseSparesBystanders: VMs that merely carry the claim's label, one of them its pool's
// label too, are not the claim's to destroy (docs/reliability.md, "Ownership: only what is
// banlieue's").
func (s *suite) testReleaseSparesBystanders(ctx context.Context, t *testing.T) {
	ns := s.namespace(ctx, t, "release")
	s.image(ctx, t, "img-release", "")
	s.create(ctx, t, poolOf(ns, "web", "img-release", 1, 3, 1))
	s.fill(ctx, t, ns, "web", 1, 1)
	s.create(ctx, t, claimOf(ns, "mine", "web", 3600))
	c := s.waitClaim(ctx, t, ns, "mine", "Bound", func(c *banlieuev1.VirtualMachineClaim) bool {
		return c.Status.Phase == banlieuev1.ClaimBound
	})

	bystanders := []*banlieuev1.VirtualMachine{
		bystander(ns, "labelled", map[string]string{banlieuev1.LabelClaim: "mine"}),
		bystander(ns, "pool-labelled", map[string]string{banlieuev1.LabelClaim: "mine", banlieuev1.LabelPool: "web"}),
	}
	for _, vm := range bystanders {
		s.create(ctx, t, vm)
	}
	s.delete(ctx, t, c)
	s.waitGone(ctx, t, c)
	s.waitGone(ctx, t, &banlieuev1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: c.Status.VirtualMachineRef.Name}})
	for _, b := range bystanders {
		var vm banlieuev1.VirtualMachine
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(b), &vm); err != nil || !vm.DeletionTimestamp.IsZero() {
			t.Errorf("bystander %s: get %v, deletionTimestamp %v; it must be left alone", b.Name, err, vm.DeletionTimestamp)
		}
	}
}

// testPoolSparesBystanders: VMs that carry the pool's label without the pool (or a claim of its
// member) as controlling owner are not the pool's to count, scale down or hand to a claim.
func (s *suite) testPoolSparesBystanders(ctx context.Context, t *testing.T) {
	ns := s.namespace(ctx, t, "handmade")
	s.image(ctx, t, "img-handmade", "")
	controller := func(kind, name string, uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: banlieuev1.GroupVersion.String(), Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}}
	}
	bystanders := []*banlieuev1.VirtualMachine{
		bystander(ns, "by-hand", map[string]string{banlieuev1.LabelPool: "web", banlieuev1.LabelPoolImageRevision: "gen-1"}),
		bystander(ns, "earlier-pool", map[string]string{banlieuev1.LabelPool: "web"}),
		bystander(ns, "forged-claim", map[string]string{banlieuev1.LabelPool: "web", banlieuev1.LabelClaim: "late"}),
	}
	bystanders[1].OwnerReferences = controller("VirtualMachinePool", "web", "uid-of-an-earlier-pool-web")
	bystanders[2].OwnerReferences = controller("VirtualMachineClaim", "someone", "uid-of-claim-someone")
	for _, vm := range bystanders {
		s.create(ctx, t, vm)
	}
	// Ready, and one on the pool's revision: counted as members, they would be warm or stale ones.
	s.readyAll(ctx, t, s.members(ctx, t, ns, "web"))
	versions := map[string]string{}
	for _, vm := range s.members(ctx, t, ns, "web") {
		versions[vm.Name] = vm.ResourceVersion
	}
	spared := func(when string) {
		for _, b := range bystanders {
			var vm banlieuev1.VirtualMachine
			if err := s.c.Get(ctx, client.ObjectKeyFromObject(b), &vm); err != nil || !vm.DeletionTimestamp.IsZero() ||
				vm.ResourceVersion != versions[b.Name] {
				t.Errorf("%s, bystander %s: get %v, deletionTimestamp %v, resourceVersion %s (was %s); it must be left alone",
					when, b.Name, err, vm.DeletionTimestamp, vm.ResourceVersion, versions[b.Name])
			}
		}
	}

	s.create(ctx, t, poolOf(ns, "web", "img-handmade", 2, 5, 2))
	s.fill(ctx, t, ns, "web", 2, 2)
	pool := s.getPool(ctx, t, ns, "web")
	if own := s.controlledBy(ctx, t, ns, pool.UID); len(own) != 2 || pool.Status.Replicas != 2 || pool.Status.Claimed != 0 {
		t.Errorf("%d members of the pool's own, status %+v; want 2 and the bystanders not counted", len(own), pool.Status)
	}

	s.setWarm(ctx, t, ns, "web", 0)
	testenv.Eventually(t, waitTimeout, "the pool's own members deleted", func() error {
		own := s.controlledBy(ctx, t, ns, pool.UID)
		return testenv.Unmet(len(own) == 0, fmt.Sprintf("%d members", len(own)))
	})
	spared("after the scale-down")
	s.waitPool(ctx, t, ns, "web", "nothing counted", func(p *banlieuev1.VirtualMachinePool) bool {
		return p.Status.Replicas == 0 && p.Status.Available == 0 && p.Status.Claimed == 0
	})
	s.create(ctx, t, claimOf(ns, "late", "web", 3600))
	s.waitClaim(ctx, t, ns, "late", "Pending, the Ready bystanders not taken", func(c *banlieuev1.VirtualMachineClaim) bool {
		return c.Status.Phase == banlieuev1.ClaimPending && hasCondition(c.Status.Conditions, banlieuev1.ConditionBound, metav1.ConditionFalse,
			banlieuev1.ReasonNoMemberAvailable, "no Ready, unclaimed member in pool web (pool: Warm: 0/0 warm member(s) available)")
	})
	spared("after a claim looked")

	// Behind poolMembers and the planner, apply itself refuses to delete a VM it does not control.
	r := &poolReconciler{client: s.c, apiReader: s.c}
	var p plan
	vms := make([]banlieuev1.VirtualMachine, 0, len(bystanders))
	for _, b := range bystanders {
		p.Deletes = append(p.Deletes, deletion{b.Name, reasonScaleDown})
		var vm banlieuev1.VirtualMachine
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(b), &vm); err != nil {
			t.Fatal(err)
		}
		vms = append(vms, vm)
	}
	if changed, err := r.apply(ctx, s.getPool(ctx, t, ns, "web"), vms, p, "gen-1"); changed || err != nil {
		t.Errorf("apply of deletions of the bystanders: changed %v, error %v", changed, err)
	}
	spared("after apply was asked to delete them")
}

// controlledBy lists the VMs of ns whose controlling owner has uid.
func (s *suite) controlledBy(ctx context.Context, t *testing.T, ns string, uid types.UID) []banlieuev1.VirtualMachine {
	t.Helper()
	var list banlieuev1.VirtualMachineList
	if err := s.c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []banlieuev1.VirtualMachine
	for _, vm := range list.Items {
		if owner := metav1.GetControllerOfNoCopy(&vm); owner != nil && owner.UID == uid {
			out = append(out, vm)
		}
	}
	return out
}

// bystander is a VM nobody's pool or claim created, carrying labels.
func bystander(ns, name string, labels map[string]string) *banlieuev1.VirtualMachine {
	return &banlieuev1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: banlieuev1.VirtualMachineSpec{ClassRef: banlieuev1.LocalObjectReference{Name: "small"},
			ImageRef: banlieuev1.LocalObjectReference{Name: "img-release"}, MigrationPolicy: "never"},
	}
}

// testExamples runs the pool and claim of examples/18 and examples/19 as published.
func (s *suite) testExamples(ctx context.Context, t *testing.T) {
	var pool banlieuev1.VirtualMachinePool
	var claim banlieuev1.VirtualMachineClaim
	readExample(t, "18-virtualmachinepool.yaml", &pool)
	readExample(t, "19-virtualmachineclaim.yaml", &claim)
	ns := s.namespace(ctx, t, pool.Namespace)
	s.image(ctx, t, pool.Spec.Template.Spec.ImageRef.Name, "")
	s.create(ctx, t, &pool)
	s.fill(ctx, t, ns, pool.Name, pool.Spec.WarmReplicas, 2)
	addresses := map[string]bool{}
	for _, vm := range s.members(ctx, t, ns, pool.Name) {
		addresses[vm.Spec.NetworkOverrides[0].Static.Address] = true
	}
	if len(addresses) != 2 || !addresses["192.0.2.10"] || !addresses["192.0.2.11"] {
		t.Errorf("example members' addresses = %v, want the first two of the range", addresses)
	}

	s.create(ctx, t, &claim)
	c := s.waitClaim(ctx, t, ns, claim.Name, "Bound", func(c *banlieuev1.VirtualMachineClaim) bool {
		return c.Status.Phase == banlieuev1.ClaimBound
	})
	var vm banlieuev1.VirtualMachine
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Status.VirtualMachineRef.Name}, &vm); err != nil {
		t.Fatal(err)
	}
	if vm.Annotations[banlieuev1.AnnotationClaimSubjectIssuer] != claim.Spec.Subject.Issuer || vm.Annotations[banlieuev1.AnnotationClaimSubjectID] != claim.Spec.Subject.ID {
		t.Errorf("bound member annotations = %v", vm.Annotations)
	}
	// The pool refills behind the claim with the next address. Waited for, not read once: the
	// pool may not have counted the claim yet, and then it is still "full" for a moment.
	testenv.Eventually(t, waitTimeout, "the refill takes 192.0.2.12", func() error {
		for _, m := range s.members(ctx, t, ns, pool.Name) {
			addresses[m.Spec.NetworkOverrides[0].Static.Address] = true
		}
		return testenv.Unmet(addresses["192.0.2.12"], fmt.Sprintf("addresses %v", addresses))
	})
	s.fill(ctx, t, ns, pool.Name, pool.Spec.WarmReplicas, 2)
}

func readExample(t *testing.T, name string, obj any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, obj); err != nil {
		t.Fatalf("examples/%s: %v", name, err)
	}
}

// fill marks members Ready until the pool has want available and nothing provisioning,
// checking that no more than surge members are ever provisioning at once.
func (s *suite) fill(ctx context.Context, t *testing.T, ns, pool string, want int32, surge int) {
	t.Helper()
	testenv.Eventually(t, waitTimeout, fmt.Sprintf("pool %s filled to %d", pool, want), func() error {
		vms := s.members(ctx, t, ns, pool)
		provisioning := 0
		for _, vm := range vms {
			if vm.Labels[banlieuev1.LabelClaim] == "" && !isReady(&vm) {
				provisioning++
			}
		}
		if provisioning > surge {
			t.Errorf("pool %s: %d members provisioning at once, maxSurge is %d", pool, provisioning, surge)
		}
		s.readyAll(ctx, t, vms)
		p := s.getPool(ctx, t, ns, pool)
		return testenv.Unmet(p.Status.Available == want && p.Status.Provisioning == 0 && provisioning == 0,
			fmt.Sprintf("status %+v, %d provisioning", p.Status, provisioning))
	})
}

// readyAll does what the VM controller does once a machine runs: InfrastructureReady=True and
// the machine's address, under the VM controller's field manager.
func (s *suite) readyAll(ctx context.Context, t *testing.T, vms []banlieuev1.VirtualMachine) {
	t.Helper()
	for i := range vms {
		vm := &vms[i]
		if isReady(vm) || !vm.DeletionTimestamp.IsZero() {
			continue
		}
		status := banlieuev1.VirtualMachineStatus{
			Addresses: []banlieuev1.MachineAddress{{Type: banlieuev1.MachineInternalIP, Address: "192.168.122.10"}},
			Conditions: []metav1.Condition{{Type: string(banlieuev1.ReadinessInfrastructureReady), Status: metav1.ConditionTrue,
				Reason: "DomainRunning", Message: "domain is running", LastTransitionTime: metav1.Now()}},
		}
		if err := ssa.ApplyStatus(ctx, s.c, vm, &status, vmControllerManager); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
}

func isReady(vm *banlieuev1.VirtualMachine) bool {
	return meta.IsStatusConditionTrue(vm.Status.Conditions, string(banlieuev1.ReadinessInfrastructureReady))
}

// members lists the pool's members not being deleted, straight from the API server.
func (s *suite) members(ctx context.Context, t *testing.T, ns, pool string) []banlieuev1.VirtualMachine {
	t.Helper()
	var list banlieuev1.VirtualMachineList
	if err := s.c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{banlieuev1.LabelPool: pool}); err != nil {
		t.Fatal(err)
	}
	var alive []banlieuev1.VirtualMachine
	for _, vm := range list.Items {
		if vm.DeletionTimestamp.IsZero() {
			alive = append(alive, vm)
		}
	}
	return alive
}

func poolOf(ns, name, image string, warm, maxReplicas, surge int32) *banlieuev1.VirtualMachinePool {
	return &banlieuev1.VirtualMachinePool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: banlieuev1.VirtualMachinePoolSpec{
			WarmReplicas: warm, MaxReplicas: maxReplicas, MaxSurge: ptr.To(surge),
			Readiness: banlieuev1.ReadinessInfrastructureReady,
			Template: banlieuev1.VirtualMachineTemplate{
				Labels: map[string]string{"app": "web"},
				Spec: banlieuev1.VirtualMachineSpec{ClassRef: banlieuev1.LocalObjectReference{Name: "small"},
					ImageRef: banlieuev1.LocalObjectReference{Name: image}, MigrationPolicy: "never"},
			},
		},
	}
}

func claimOf(ns, name, pool string, ttl int64) *banlieuev1.VirtualMachineClaim {
	return &banlieuev1.VirtualMachineClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: banlieuev1.VirtualMachineClaimSpec{PoolRef: banlieuev1.LocalObjectReference{Name: pool},
			Subject: banlieuev1.ClaimSubject{Issuer: "https://broker.example", ID: "user-" + name}, TTLSeconds: ttl},
	}
}

// image creates a VMImage; a checksum makes it a built one, as the imagebuilder reports.
func (s *suite) image(ctx context.Context, t *testing.T, name, checksum string) {
	t.Helper()
	s.create(ctx, t, &banlieuev1.VMImage{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: banlieuev1.VMImageSpec{OSFamily: "linux", OSDistribution: "ubuntu", OSVersion: "24.04", Architecture: "amd64",
			Sources: []banlieuev1.ImageSource{{ProviderClass: "libvirt", Kind: banlieuev1.SourceURL, Ref: name,
				ImportFrom: "https://cloud-images.ubuntu.com/noble/current/noble-server-cloudimg-amd64.img"}}},
	})
	if checksum != "" {
		s.setChecksum(ctx, t, name, checksum)
	}
}

func (s *suite) setChecksum(ctx context.Context, t *testing.T, image, checksum string) {
	t.Helper()
	status := banlieuev1.VMImageStatus{BuildArtifact: &banlieuev1.BuildArtifact{Kind: banlieuev1.ArtifactCloudImage,
		Phase: banlieuev1.BuildReady, Reason: "Reconciled", Checksum: checksum}}
	if err := ssa.ApplyStatus(ctx, s.c, &banlieuev1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: image}}, &status, imagebuilderManager); err != nil {
		t.Fatal(err)
	}
}

func (s *suite) setWarm(ctx context.Context, t *testing.T, ns, name string, warm int32) {
	t.Helper()
	p := &banlieuev1.VirtualMachinePool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	patch := fmt.Appendf(nil, `{"spec":{"warmReplicas":%d}}`, warm)
	if err := s.c.Patch(ctx, p, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
}

func (s *suite) namespace(ctx context.Context, t *testing.T, name string) string {
	t.Helper()
	s.create(ctx, t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	return name
}

func (s *suite) create(ctx context.Context, t *testing.T, obj client.Object) {
	t.Helper()
	if err := s.c.Create(ctx, obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

func (s *suite) delete(ctx context.Context, t *testing.T, obj client.Object) {
	t.Helper()
	if err := s.c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
		t.Fatalf("deleting %T %s: %v", obj, obj.GetName(), err)
	}
}

func (s *suite) getPool(ctx context.Context, t *testing.T, ns, name string) *banlieuev1.VirtualMachinePool {
	t.Helper()
	var p banlieuev1.VirtualMachinePool
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

func (s *suite) getClaim(ctx context.Context, t *testing.T, ns, name string) *banlieuev1.VirtualMachineClaim {
	t.Helper()
	var c banlieuev1.VirtualMachineClaim
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &c); err != nil {
		t.Fatal(err)
	}
	return &c
}

func (s *suite) waitPool(ctx context.Context, t *testing.T, ns, name, what string, ok func(*banlieuev1.VirtualMachinePool) bool) {
	t.Helper()
	testenv.Eventually(t, waitTimeout, fmt.Sprintf("pool %s: %s", name, what), func() error {
		p := s.getPool(ctx, t, ns, name)
		return testenv.Unmet(ok(p), fmt.Sprintf("%+v", p.Status))
	})
}

func (s *suite) waitClaim(ctx context.Context, t *testing.T, ns, name, what string,
	ok func(*banlieuev1.VirtualMachineClaim) bool) *banlieuev1.VirtualMachineClaim {
	t.Helper()
	var c *banlieuev1.VirtualMachineClaim
	testenv.Eventually(t, waitTimeout, fmt.Sprintf("claim %s: %s", name, what), func() error {
		c = s.getClaim(ctx, t, ns, name)
		return testenv.Unmet(ok(c), fmt.Sprintf("%+v", c.Status))
	})
	return c
}

func (s *suite) waitGone(ctx context.Context, t *testing.T, obj client.Object) {
	t.Helper()
	testenv.Eventually(t, waitTimeout, fmt.Sprintf("%T %s gone", obj, obj.GetName()), func() error {
		err := s.c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		return testenv.Unmet(apierrors.IsNotFound(err), fmt.Sprintf("get: %v", err))
	})
}

// eventually polls cond until it holds, failing with cond's last explanation after waitTimeout.
func hasCondition(conds []metav1.Condition, typ string, status metav1.ConditionStatus, reason, msg string) bool {
	c := meta.FindStatusCondition(conds, typ)
	return c != nil && c.Status == status && c.Reason == reason && c.Message == msg
}
