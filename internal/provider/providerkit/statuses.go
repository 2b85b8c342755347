package providerkit

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/ssa"
)

// Statuses remembers the status this process last applied to each Provider, so that a probe
// finding the backend as before sends nothing: every Provider is probed every 30 s, and a
// fleet's hundred providers would otherwise apply an unchanged status more than three times a
// second between them.
type Statuses struct {
	// FieldManager is the provider role's server-side-apply field manager.
	FieldManager string
	last         sync.Map // types.NamespacedName → banlieuev1.ProviderStatus
}

// Write applies status to p unless Unchanged says the API server already holds it, and
// remembers what it applied.
func (s *Statuses) Write(ctx context.Context, c client.Client, p *banlieuev1.Provider, status *banlieuev1.ProviderStatus) error {
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	var last *banlieuev1.ProviderStatus
	if v, ok := s.last.Load(key); ok {
		l := v.(banlieuev1.ProviderStatus)
		last = &l
	}
	if Unchanged(&p.Status, last, status) {
		return nil
	}
	if err := ssa.ApplyStatus(ctx, c, p, status, s.FieldManager); err != nil {
		s.last.Delete(key) // the write may or may not have landed
		return err
	}
	s.last.Store(key, *status.DeepCopy())
	return nil
}

// Forget drops a deleted Provider's record.
func (s *Statuses) Forget(key types.NamespacedName) { s.last.Delete(key) }

// Unchanged reports whether applying next would change nothing: the status read (cached,
// without the operator's status.workload and the controller's status.drain, which a provider
// role never writes) is next, and so is the last status this process applied. The second keeps
// a read that lags behind this process's own write from hiding it: a probe that wrote
// ConnectFailed and, in its next pass, reads a cache still showing the Ready from before must
// write Ready again. Before its first write a process always writes.
func Unchanged(cached, last, next *banlieuev1.ProviderStatus) bool {
	if last == nil {
		return false
	}
	read := *cached
	read.Workload, read.Drain = nil, nil
	return equality.Semantic.DeepEqual(&read, next) && equality.Semantic.DeepEqual(last, next)
}
