//go:build bench

package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/pkg/libvirt"
)

// drift measures how long the provider takes to run a VM's domain again after it was destroyed,
// or undefined and destroyed, out of band: one virsh process (its own connection) does it, as an
// operator would, and the time runs from virsh's return to the host running a domain of that
// name with a new ID, polled every 10 ms over the bench's own connection. With domain events the
// provider notices at once; without, at the machine's resync (30 s for a running VM without
// addresses, as these have no NIC).
func (b *bench) drift(ctx context.Context, rounds int) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	b.seq++
	name := fmt.Sprintf("drift%d", b.seq)
	vm := &banlieuev1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.ns},
		Spec: banlieuev1.VirtualMachineSpec{ClassRef: banlieuev1.LocalObjectReference{Name: "tiny"},
			ImageRef: banlieuev1.LocalObjectReference{Name: "base"}, DesiredPowerState: banlieuev1.PoweredOn, MigrationPolicy: "never"},
	}
	if err := b.kube.Create(ctx, vm); err != nil {
		return err
	}
	domain := b.ns + "-" + name
	for _, undefine := range []bool{false, true} {
		what := map[bool]string{false: "destroy", true: "undefine+destroy"}[undefine]
		var heal, took []time.Duration
		for r := 0; r < rounds; r++ {
			if err := b.settled(ctx, name); err != nil {
				return err
			}
			h, d, err := b.outOfBand(ctx, domain, undefine)
			if err != nil {
				return fmt.Errorf("%s round %d: %w", what, r+1, err)
			}
			heal, took = append(heal, h), append(took, d)
			fmt.Printf("drift %-17s round %2d: virsh %5.0f ms, then running again after %5.0f ms\n", what, r+1, ms(d), ms(h))
		}
		fmt.Printf("drift %-17s %d rounds: p50 %.0f ms  p99 %.0f ms  min %.0f ms  max %.0f ms (virsh itself p50 %.0f ms)\n\n",
			what, rounds, ms(pct(heal, 50)), ms(pct(heal, 99)), ms(slices.Min(heal)), ms(slices.Max(heal)), ms(pct(took, 50)))
	}
	return b.deleteVMs(ctx, []string{name})
}

// settled waits until the VM's machine is Ready for its current generation: no pass of its own
// is due, so only the out-of-band change can cause the next.
func (b *bench) settled(ctx context.Context, name string) error {
	for {
		var m infrav1.LibvirtMachine
		err := b.kube.Get(ctx, client.ObjectKey{Namespace: b.ns, Name: name}, &m)
		if err == nil && meta.IsStatusConditionTrue(m.Status.Conditions, banlieuev1.ConditionReady) &&
			m.Status.ObservedGeneration == m.Generation && m.Status.ObservedPowerState == banlieuev1.PoweredOn {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("machine %s not settled: %w (%v)", name, ctx.Err(), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// outOfBand returns how long after virsh returned the domain ran again, and how long virsh took.
func (b *bench) outOfBand(ctx context.Context, domain string, undefine bool) (heal, took time.Duration, err error) {
	before, err := b.host.DomainLookupByName(ctx, domain)
	if err != nil {
		return 0, 0, err
	}
	// Undefined first, the running domain turns transient and the destroy then removes it
	// whole. The other order races the provider: it may start the stopped domain again between
	// the two commands, and the undefine then finds it transient or not at all.
	cmds := "destroy " + domain
	if undefine {
		cmds = "undefine " + domain + "; " + cmds
	}
	start := time.Now()
	if err := b.virsh.Run(cmds); err != nil {
		return 0, 0, err
	}
	changed := time.Now()
	for {
		got, err := b.host.DomainLookupByName(ctx, domain)
		if err == nil && got.ID > 0 && got.ID != before.ID {
			if st, _, err := b.host.DomainState(ctx, got); err == nil && st == libvirt.DomainRunning {
				return time.Since(changed), changed.Sub(start), nil
			}
		} else if err != nil && !libvirt.IsNotFound(err) {
			return 0, 0, err
		}
		if time.Since(changed) > 2*time.Minute {
			return 0, 0, fmt.Errorf("domain %s not running again within 2 min", domain)
		}
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}
