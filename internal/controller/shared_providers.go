package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// CacheByObject widens the manager's cache for the controller role: a Provider shared from
// another namespace (allowedNamespaces) must be seen even when --namespace limits the VMs, and
// Namespaces are read for their labels.
func CacheByObject() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&banlieuev1.Provider{}: {Namespaces: map[string]cache.Config{cache.AllNamespaces: {}}},
	}
}

// shared reports whether p may admit namespaces other than its own.
func shared(p *banlieuev1.Provider) bool {
	a := p.Spec.AllowedNamespaces
	return a != nil && a.From != "" && a.From != banlieuev1.NamespacesFromSame
}

// candidateProviders are the Providers a VM of namespace ns is scheduled among: those of ns and
// the shared ones elsewhere. A Provider that admits only its own namespace is never named to
// another namespace's VM, not even in a refusal.
func candidateProviders(ns string, all []banlieuev1.Provider) []banlieuev1.Provider {
	var out []banlieuev1.Provider
	for _, p := range all {
		if p.Namespace == ns || shared(&p) {
			out = append(out, p)
		}
	}
	return out
}

// byProvider maps a Provider to the VMs it may concern: those of its namespace, and every VM
// when it is shared. An update maps the old object too, so narrowing allowedNamespaces wakes
// the VMs it no longer admits.
func (m *vmMapper) byProvider(ctx context.Context, o client.Object) []reconcile.Request {
	p, ok := o.(*banlieuev1.Provider)
	switch {
	case !ok:
		return nil
	case shared(p):
		return m.list(ctx, client.InNamespace(m.namespace))
	case m.namespace != "" && p.Namespace != m.namespace:
		return nil
	}
	return m.list(ctx, client.InNamespace(p.Namespace))
}

// providerHandler wakes the VMs a Provider change concerns (byProvider). A change of
// status.drain alone concerns only the VMs the drain moves, before or after it: the drain
// writes its status as each VM moves, and waking every VM of a shared Provider each time slowed
// a drain several times over (docs/performance.md, "Placement and drain over a fleet").
func (m *vmMapper) providerHandler() handler.EventHandler {
	all := handler.EnqueueRequestsFromMapFunc(m.byProvider)
	return handler.Funcs{
		CreateFunc:  all.Create,
		DeleteFunc:  all.Delete,
		GenericFunc: all.Generic,
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			before, ok1 := e.ObjectOld.(*banlieuev1.Provider)
			after, ok2 := e.ObjectNew.(*banlieuev1.Provider)
			if !ok1 || !ok2 || !onlyIgnoredStatusChanged(before, after) {
				all.Update(ctx, e, q)
				return
			}
			for _, st := range []*banlieuev1.ProviderDrainStatus{before.Status.Drain, after.Status.Drain} {
				if st == nil {
					continue
				}
				for _, v := range st.Moving {
					if m.namespace == "" || v.Namespace == m.namespace {
						q.Add(reconcile.Request{NamespacedName: client.ObjectKey{Namespace: v.Namespace, Name: v.Name}})
					}
				}
			}
		},
	}
}

// onlyIgnoredStatusChanged reports whether after differs from before only in status fields a
// VM's placement does not read: those the controller writes (drain, allocated) and the
// replicas' console keys. A drain's moving VMs are enqueued by name.
func onlyIgnoredStatusChanged(before, after *banlieuev1.Provider) bool {
	if !equality.Semantic.DeepEqual(before.Spec, after.Spec) || !equality.Semantic.DeepEqual(before.Labels, after.Labels) ||
		!before.DeletionTimestamp.Equal(after.DeletionTimestamp) {
		return false
	}
	b, a := before.Status, after.Status
	b.Drain, a.Drain = nil, nil
	b.Allocated, a.Allocated = nil, nil
	b.ConsoleKeys, a.ConsoleKeys = nil, nil
	return equality.Semantic.DeepEqual(b, a)
}

// byNamespace maps a Namespace to its VMs: its labels decide which shared Providers admit them.
func (m *vmMapper) byNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	if _, ok := o.(*corev1.Namespace); !ok || m.namespace != "" && o.GetName() != m.namespace {
		return nil
	}
	return m.list(ctx, client.InNamespace(o.GetName()))
}
