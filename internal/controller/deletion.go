package controller

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/finalizer"
)

// presence is what a lookup of one machine kind found (ADR-0090).
type presence int

const (
	absent presence = iota
	present
	terminating
	// unknown is a failed lookup: neither absent nor present, so it blocks the finalizer but
	// not the deletes of other kinds.
	unknown
)

// kindPresence is one kind's lookup result.
type kindPresence struct {
	kind     string
	presence presence
	err      error
}

// deletionProgress says whether every machine is gone and, if not, what the VM waits for.
func deletionProgress(ns, name string, results []kindPresence) (done bool, waiting string) {
	var parts []string
	for _, r := range results {
		switch r.presence {
		case present, terminating:
			parts = append(parts, fmt.Sprintf("%s %s/%s is being torn down by its provider", r.kind, ns, name))
		case unknown:
			parts = append(parts, fmt.Sprintf("%s %s/%s could not be looked up: %v", r.kind, ns, name, r.err))
		}
	}
	if len(parts) == 0 {
		return true, ""
	}
	return false, "deletion waits: " + strings.Join(parts, "; ")
}

// finalize deletes the VM's machines and releases the VM once all are gone (docs/guides/libvirt-provider.md, "8. Delete a VM").
func (r *virtualMachineReconciler) finalize(ctx context.Context, vm *banlieuev1.VirtualMachine) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(vm, banlieuev1.FinalizerVirtualMachine) {
		return ctrl.Result{}, nil
	}
	key := client.ObjectKeyFromObject(vm)
	r.applied.forget(key)
	var results []kindPresence
	for _, k := range allInfraKinds() {
		obj := k.newObject()
		// The cache answers first: a machine it holds is deleted, or waited for, without a
		// request, and its removal wakes the VM again. Only what the cache does not show as
		// existing is read live, because the cache may not hold a machine yet, and a stale
		// "absent" would release the VM too early (ADR-0090).
		p, err := lookup(ctx, r.client, key, obj)
		if p != present && p != terminating {
			p, err = lookup(ctx, r.apiReader, key, obj)
		}
		res := kindPresence{kind: k.GVK.Kind, presence: p, err: err}
		if res.presence == present {
			if err := r.client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
				res.presence, res.err = unknown, err
			} else {
				res.presence = terminating
			}
		}
		results = append(results, res)
	}

	done, waiting := deletionProgress(vm.Namespace, vm.Name, results)
	if done {
		_, err := finalizer.Remove(ctx, r.client, vm, banlieuev1.FinalizerVirtualMachine)
		return ctrl.Result{}, err
	}
	status := vm.Status.DeepCopy()
	banlieuev1.SetCondition(&status.Conditions, vm.Generation, metav1.Condition{Type: banlieuev1.ConditionReady, Status: metav1.ConditionFalse,
		Reason: banlieuev1.ReasonDeleting, Message: waiting})
	return r.writeStatus(ctx, vm, status, app.ErrorRetry)
}

// lookup classifies one machine. A kind whose CRD is not installed cannot have a machine, so it
// is absent rather than unknown.
func lookup(ctx context.Context, reader client.Reader, key client.ObjectKey, obj client.Object) (presence, error) {
	err := reader.Get(ctx, key, obj)
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return absent, nil
	case err != nil:
		return unknown, err
	case !obj.GetDeletionTimestamp().IsZero():
		return terminating, nil
	}
	return present, nil
}
