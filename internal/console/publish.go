package console

import (
	"context"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/ssa"
)

// KeyPublisher keeps one provider replica's console key in its Provider's status.consoleKeys
// (ADR-0151): written at start and renewed every ConsoleKeyValidity/3, removed on a graceful
// stop. Each replica writes its own entry under a field manager of its own, so replicas never
// overwrite each other's; entries of replicas gone without a stop are pruned once they are
// past ConsoleKeyValidity, so the list stays within its bound.
type KeyPublisher struct {
	// Client writes the Provider's status (the provider account may write only its own).
	Client client.Client
	// Provider is the replica's Provider; Pod its pod name; SHA256 its key (ServingKeyHash).
	Provider types.NamespacedName
	Pod      string
	SHA256   string
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// publishTimeout bounds each write; a write that fails is retried at the next renewal, well
// within the key's validity.
const publishTimeout = 30 * time.Second

// Start publishes the key until ctx ends, then removes it.
func (k *KeyPublisher) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithValues("provider", k.Provider, "pod", k.Pod)
	renew := time.NewTicker(banlieuev1.ConsoleKeyValidity / 3)
	defer renew.Stop()
	for {
		if err := k.publish(ctx); err != nil && ctx.Err() == nil {
			log.Error(err, "publishing the console key; trying again at the next renewal")
		}
		select {
		case <-ctx.Done():
			// The manager's context is over; the removal gets a short one of its own.
			stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := k.withdraw(stop); err != nil {
				log.Error(err, "removing the console key at stop; it expires by itself")
			}
			return nil
		case <-renew.C:
		}
	}
}

// NeedLeaderElection is false: every replica serves consoles, so every replica publishes.
func (k *KeyPublisher) NeedLeaderElection() bool { return false }

func (k *KeyPublisher) manager() string {
	const prefix = "banlieue-console/"
	pod := k.Pod
	if len(pod) > 128-len(prefix) {
		pod = pod[:128-len(prefix)]
	}
	return prefix + pod
}

func (k *KeyPublisher) now() time.Time {
	if k.Now != nil {
		return k.Now()
	}
	return time.Now()
}

func (k *KeyPublisher) publish(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	var p banlieuev1.Provider
	if err := k.Client.Get(ctx, k.Provider, &p); err != nil {
		return fmt.Errorf("reading Provider %s: %w", k.Provider, err)
	}
	now := k.now()
	if kept := freshKeys(p.Status.ConsoleKeys, k.Pod, now); len(kept) != len(p.Status.ConsoleKeys) {
		orig := p.DeepCopy()
		p.Status.ConsoleKeys = kept
		// Optimistic: a replica renewing meanwhile must not lose its entry to this patch. A
		// conflict leaves the expired entries to the next renewal; the own key is written anyway.
		if err := k.Client.Status().Patch(ctx, &p, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			logf.FromContext(ctx).Info("pruning expired console keys failed; trying again at the next renewal", "provider", k.Provider, "error", err.Error())
			p = *orig
		}
	}
	key := banlieuev1.ConsoleKey{Pod: k.Pod, SHA256: k.SHA256, RenewedAt: metav1.NewTime(now)}
	if err := ssa.ApplyStatus(ctx, k.Client, &p, &banlieuev1.ProviderStatus{ConsoleKeys: []banlieuev1.ConsoleKey{key}}, k.manager()); err != nil {
		return fmt.Errorf("writing the console key of pod %s to Provider %s: %w", k.Pod, k.Provider, err)
	}
	return nil
}

// withdraw applies nothing under the replica's manager, which removes the entry it owns.
func (k *KeyPublisher) withdraw(ctx context.Context) error {
	var p banlieuev1.Provider
	if err := k.Client.Get(ctx, k.Provider, &p); err != nil {
		return client.IgnoreNotFound(err)
	}
	return client.IgnoreNotFound(ssa.ApplyStatus(ctx, k.Client, &p, &banlieuev1.ProviderStatus{}, k.manager()))
}

// freshKeys is keys without the entries of other pods past ConsoleKeyValidity at now: the
// relay refuses those already, and a replica that crashed never removes its own.
func freshKeys(keys []banlieuev1.ConsoleKey, self string, now time.Time) []banlieuev1.ConsoleKey {
	return slices.DeleteFunc(slices.Clone(keys), func(k banlieuev1.ConsoleKey) bool {
		return k.Pod != self && now.Sub(k.RenewedAt.Time) > banlieuev1.ConsoleKeyValidity
	})
}
