package controller

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// The handover of a live move (docs/adr/0154-live-migration-peer-to-peer-over-tls.md, "Handover
// and providerRef"): once the provider reports the move Succeeded, the domain runs on the target
// alone, and the VM's placement and its machine follow it there.

// handoverDue reports whether the provider reported m's move Succeeded while the machine still
// carries its request: the domain runs on the target, and the machine is still the source's.
func handoverDue(m *banlieuev1.VirtualMachineMigration, machine *infrav1.LibvirtMachine) bool {
	req := machine.Spec.Migration
	r := providerReport(machine, m.Name)
	return req != nil && req.MigrationName == m.Name && r != nil && r.Phase == infrav1.MachineMigrationSucceeded
}

// handedOver is the machine after the handover, in the one update the CEL rule on providerRef
// admits: the request removed, providerRef exactly the request's targetProvider, and the pool,
// failure domain and networks of the target's placement (built, the machine the VM reconciler
// builds for it), so that its next apply changes none of them.
func handedOver(machine, built *infrav1.LibvirtMachine) *infrav1.LibvirtMachine {
	out := machine.DeepCopy()
	target := machine.Spec.Migration.TargetProvider
	out.Spec.Migration = nil
	out.Spec.ProviderRef = &target
	out.Spec.Pool = built.Spec.Pool
	out.Spec.FailureDomain = built.Spec.FailureDomain
	out.Spec.Network = built.Spec.Network
	return out
}

// targetPlacement is the VM's placement on the move's target: the scheduler's decision for the
// VM as if it were recorded there (filters checked, capacity not: the VM already runs there),
// with the target's resolved storage and network mappings.
func targetPlacement(vm *banlieuev1.VirtualMachine, in *vmInputs, req *infrav1.LibvirtMachineMigration) (decision, error) {
	ns := req.TargetProvider.Namespace
	if ns == "" {
		ns = vm.Namespace
	}
	var target *banlieuev1.Provider
	for i := range in.providers {
		if p := &in.providers[i]; p.Namespace == ns && p.Name == req.TargetProvider.Name {
			target = p
		}
	}
	if target == nil {
		return decision{}, fmt.Errorf("the target Provider %s/%s is no candidate of the VM any more", ns, req.TargetProvider.Name)
	}
	there := vm.DeepCopy()
	there.Status.Scheduled = &banlieuev1.ScheduledPlacement{ProviderName: target.Name, ProviderNamespace: target.Namespace,
		ProviderClass: target.Spec.ProviderClassRef.Name, FailureDomain: req.TargetFailureDomain}
	if there.Spec.Placement != nil {
		there.Spec.Placement.ProviderSelector = nil
	}
	d, err := schedule(scheduleInput{VM: there, Class: &in.class, Image: &in.image, Providers: []banlieuev1.Provider{*target},
		NamespaceLabels: in.nsLabels, Siblings: in.siblings, Elsewhere: in.elsewhere, Classes: in.placedClasses})
	if err != nil {
		return decision{}, err
	}
	if d.Provider.Name != target.Name || d.FailureDomain.Name != req.TargetFailureDomain {
		return decision{}, fmt.Errorf("failure domain %s of Provider %s/%s no longer holds the VM", req.TargetFailureDomain, ns, target.Name)
	}
	return d, nil
}

// handover moves the VM's placement to the target, then the machine, in that order: a VM
// reconciler pass in between applies the target's machine, which the API server refuses while
// the request is there (the CEL rule), and changes nothing; the other order would leave the VM
// placed on the source with a machine on the target, a drift.
func (r *migrationReconciler) handover(ctx context.Context, vm *banlieuev1.VirtualMachine, machine *infrav1.LibvirtMachine) error {
	vmIn, err := r.vms.readInputs(ctx, vm)
	if err != nil {
		return fmt.Errorf("reading the VM's scheduling inputs: %w", err)
	}
	d, err := targetPlacement(vm, &vmIn, machine.Spec.Migration)
	if err != nil {
		return err
	}
	built, err := buildLibvirtMachine(buildInput{VM: vm, Class: &vmIn.class, Image: &vmIn.image, Decision: d, Existing: machine})
	if err != nil {
		return fmt.Errorf("building the machine on the target: %w", err)
	}
	next := d.placement()
	if vm.Status.Scheduled == nil || placementDrift(vm.Status.Scheduled, next) != "" {
		body, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": vm.ResourceVersion},
			"status": map[string]any{"scheduled": stamped(vm.Status.Scheduled, next)}})
		if err != nil {
			return err
		}
		if err := r.client.Status().Patch(ctx, vm, client.RawPatch(types.MergePatchType, body), client.FieldOwner(banlieuev1.FieldManagerController)); err != nil {
			return fmt.Errorf("moving VirtualMachine %s's status.scheduled to the target: %w", vm.Name, err)
		}
	}
	out := handedOver(machine, built)
	if err := r.client.Update(ctx, out, client.FieldOwner(fieldManagerMigration)); err != nil {
		return fmt.Errorf("handing LibvirtMachine %s over to Provider %s: %w", machine.Name, out.Spec.ProviderRef.Name, err)
	}
	*machine = *out
	return nil
}
