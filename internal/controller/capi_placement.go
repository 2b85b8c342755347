package controller

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/capi"
	"banlieue.io/banlieue/internal/ssa"
)

// A LibvirtMachine Cluster API made from a LibvirtMachineTemplate without providerRef is placed
// by banlieue-controller, in its Machine's failure domain (docs/adr/0144-failure-domain-placement.md):
// the controller already reads every Provider and LibvirtCluster and never talks to a host, and a
// provider process sees only its own Provider's machines. It sets spec.providerRef once; from
// then on the machine is the provider's, as every other.

// capiPlacementReconciler sets spec.providerRef of unplaced Cluster API machines.
type capiPlacementReconciler struct {
	client    client.Client
	apiReader client.Reader
}

func setupCAPIPlacement(mgr manager.Manager) error {
	r := &capiPlacementReconciler{client: mgr.GetClient(), apiReader: mgr.GetAPIReader()}
	unplaced := predicate.NewPredicateFuncs(func(o client.Object) bool {
		m, ok := o.(*infrav1.LibvirtMachine)
		return ok && m.Spec.ProviderRef == nil
	})
	return ctrl.ControllerManagedBy(mgr).
		Named("libvirtmachine-placement").
		For(&infrav1.LibvirtMachine{}, ctrl.WithPredicates(unplaced)).
		// One worker, whatever --workers: each placement counts the ones before it (ADR-0144).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1, RateLimiter: app.ErrorRateLimiter()}).
		Complete(r)
}

// Reconcile: fetch; placed or being deleted, nothing to do; otherwise decide, then write the
// Scheduled condition and, once a failure domain is chosen, spec.providerRef.
func (r *capiPlacementReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, clusterTimeout)
	defer cancel()
	// Read past the cache: this pass's own status write wakes the next one, which a cache
	// without this pass's providerRef yet would send to place the machine a second time.
	var m infrav1.LibvirtMachine
	if err := r.apiReader.Get(ctx, req.NamespacedName, &m); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if m.Spec.ProviderRef != nil || !m.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	ref, err := r.decide(ctx, &m)
	var refusal *placementRefusal
	switch {
	case errors.As(err, &refusal):
		// A failure domain can appear (a Provider created, a LibvirtCluster changed) without
		// an event on the machine: looked at again.
		return reconcile.Result{RequeueAfter: app.RequeueDefault}, r.writeScheduled(ctx, &m, metav1.ConditionFalse, refusal.reason, refusal.message)
	case err != nil:
		return reconcile.Result{}, err
	}
	if err := r.writeScheduled(ctx, &m, metav1.ConditionTrue, banlieuev1.ReasonScheduled,
		fmt.Sprintf("placed on Provider %s (failure domain %s)", m.Namespace+"/"+ref.Name, ref.Name)); err != nil {
		return reconcile.Result{}, err
	}
	patch := client.MergeFrom(m.DeepCopy())
	m.Spec.ProviderRef = ref
	if err := r.client.Patch(ctx, &m, patch, client.FieldOwner(banlieuev1.FieldManagerController)); err != nil {
		return reconcile.Result{}, fmt.Errorf("setting LibvirtMachine %s/%s spec.providerRef: %w", m.Namespace, m.Name, err)
	}
	return reconcile.Result{}, nil
}

// decide reads what chooseFailureDomain needs: the owner Machine (checked as the provider checks
// it), its Cluster's LibvirtCluster, and the cluster's machines already placed (past the cache,
// so two machines placed one after the other see each other).
func (r *capiPlacementReconciler) decide(ctx context.Context, m *infrav1.LibvirtMachine) (*infrav1.ProviderReference, error) {
	owner := capi.OwnerMachine(m)
	if owner == nil {
		if capi.Managed(m) {
			return nil, &placementRefusal{reason: infrav1.ReasonOwnerMachineMismatch, message: "spec.providerRef is unset: waiting for a Cluster API Machine to become the LibvirtMachine's controller (it is owned by a MachineSet or a control plane)"}
		}
		return nil, &placementRefusal{reason: infrav1.ReasonProviderRefUnset, message: "spec.providerRef is unset and no Cluster API Machine owns the LibvirtMachine: nothing places it; set spec.providerRef"}
	}
	machine, err := capi.ReadMachine(ctx, r.apiReader, m.Namespace, owner, m, infrav1.GroupVersion.WithKind("LibvirtMachine"))
	if err != nil {
		return nil, &placementRefusal{reason: infrav1.ReasonOwnerMachineMismatch, message: err.Error()}
	}
	group, kind, name, err := capi.ClusterInfrastructure(ctx, r.apiReader, m.Namespace, machine.ClusterName)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &placementRefusal{reason: infrav1.ReasonNoFailureDomain, message: fmt.Sprintf("owner Machine %s: %v", machine.Name, err)}
		}
		return nil, err
	}
	if group != infrav1.GroupVersion.Group || kind != "LibvirtCluster" || name == "" {
		return nil, &placementRefusal{reason: infrav1.ReasonNoFailureDomain, message: fmt.Sprintf(
			"Cluster %s spec.infrastructureRef names %s %s/%s, not a LibvirtCluster: no failure domain to place the machine in; set spec.providerRef in the LibvirtMachineTemplate",
			machine.ClusterName, kind, group, name)}
	}
	var lc infrav1.LibvirtCluster
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: name}, &lc); apierrors.IsNotFound(err) {
		return nil, &placementRefusal{reason: infrav1.ReasonNoFailureDomain, message: fmt.Sprintf(
			"Cluster %s spec.infrastructureRef: LibvirtCluster %s/%s is not there", machine.ClusterName, m.Namespace, name)}
	} else if err != nil {
		return nil, fmt.Errorf("reading LibvirtCluster %s/%s: %w", m.Namespace, name, err)
	}
	var list infrav1.LibvirtMachineList
	if err := r.apiReader.List(ctx, &list, client.InNamespace(m.Namespace),
		client.MatchingLabels{capi.LabelClusterName: machine.ClusterName}); err != nil {
		return nil, fmt.Errorf("listing the LibvirtMachines of Cluster %s/%s: %w", m.Namespace, machine.ClusterName, err)
	}
	placed := map[string]int{}
	for i := range list.Items {
		if ref := list.Items[i].Spec.ProviderRef; ref != nil {
			placed[ref.Name]++
		}
	}
	_, controlPlane := m.Labels[capi.LabelControlPlane]
	return chooseFailureDomain(machinePlacement{namespace: m.Namespace, machine: machine.Name, asked: machine.FailureDomain,
		controlPlane: controlPlane, cluster: &lc, placed: placed})
}

// writeScheduled applies the controller's part of an unplaced machine's status: Scheduled, and
// while it is not placed a Ready condition of the same reason (the provider writes Ready once the
// machine is its own, and this manager's copy is dropped by the apply that places it).
func (r *capiPlacementReconciler) writeScheduled(ctx context.Context, m *infrav1.LibvirtMachine, status metav1.ConditionStatus, reason, message string) error {
	types := []string{banlieuev1.ConditionScheduled}
	if status != metav1.ConditionTrue {
		types = append(types, banlieuev1.ConditionReady)
	}
	var st infrav1.LibvirtMachineStatus
	for _, typ := range types {
		// Starting from the stored condition keeps its lastTransitionTime while the status holds.
		if c := meta.FindStatusCondition(m.Status.Conditions, typ); c != nil {
			st.Conditions = append(st.Conditions, *c)
		}
		banlieuev1.SetCondition(&st.Conditions, m.Generation, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message})
	}
	if err := ssa.ApplyStatus(ctx, r.client, m, &st, banlieuev1.FieldManagerController); err != nil {
		return fmt.Errorf("writing LibvirtMachine %s/%s status: %w", m.Namespace, m.Name, err)
	}
	return nil
}
