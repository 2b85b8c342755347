package vsphere

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/capi"
	"banlieue.io/banlieue/internal/ssa"
)

// A VSphereMachine whose controller reference is a Cluster API Machine is served as the v1beta2
// InfraMachine contract asks, as a LibvirtMachine is (docs/adr/0136-cluster-api-machines.md):
// its virtual machine is named after it, it goes to the Machine's failure domain, its bootstrap
// data comes from the Machine's data Secret into guestinfo.userdata, it honours the paused
// annotation and Cluster, and status.initialization.provisioned never turns false again.

// maxVMName is spec.vmName's limit (the CRD's MaxLength, vCenter's).
const maxVMName = 80

// capiPass is what the owner Machine says for one pass over its VSphereMachine.
type capiPass struct {
	machine *capi.Machine
}

// clusterAPI prepares a pass over a Cluster API machine: the owner Machine, read by name past
// the cache and checked to name this machine; whether the machine or its Cluster is paused; and,
// once, the machine's vmName and failure domain in its spec, written before any vCenter call and
// before the finalizer, so nothing is cloned under another name. It sets ps.capi when the pass
// goes on; done means the pass ends here with res and err. A deletion goes on without the
// Machine (Cluster API deletes the VSphereMachine first, but the teardown must not depend on it).
func (r *MachineReconciler) clusterAPI(ctx context.Context, ps *pass) (res ctrl.Result, done bool, err error) {
	m := ps.m
	deleting := !m.DeletionTimestamp.IsZero()
	owner := capi.OwnerMachine(m)
	if owner == nil {
		if deleting {
			return ctrl.Result{}, false, nil
		}
		res, err := r.fail(ctx, ps, infrav1.ReasonOwnerMachineMismatch,
			errors.New("waiting for a Cluster API Machine to become the VSphereMachine's controller (it is owned by a MachineSet or a control plane)"))
		return res, true, err
	}
	machine, readErr := capi.ReadMachine(ctx, r.APIReader, m.Namespace, owner, m, infrav1.GroupVersion.WithKind("VSphereMachine"))
	if readErr != nil && !deleting {
		res, err := r.fail(ctx, ps, infrav1.ReasonOwnerMachineMismatch, readErr)
		return res, true, err
	}
	clusterName := m.Labels[capi.LabelClusterName]
	if machine != nil {
		clusterName = machine.ClusterName
	}
	paused, why, err := capi.PausedWhy(ctx, r.APIReader, m, "VSphereMachine", clusterName, deleting)
	if err != nil {
		res, err := r.fail(ctx, ps, infrav1.ReasonReconcileFailed, err)
		return res, true, err
	}
	if paused {
		st := *m.Status.DeepCopy()
		setCondition(&st, m, infrav1.ConditionPaused, metav1.ConditionTrue, infrav1.ReasonPaused, why+": nothing is reconciled")
		if err := ssa.ApplyStatus(ctx, r.Client, m, &st, banlieuev1.FieldManagerProviderVSphere); err != nil {
			return ctrl.Result{}, true, err
		}
		// Unpausing changes no generation the machine's watch passes: it is looked at again.
		return ctrl.Result{RequeueAfter: min(cmp.Or(r.Resync, app.RequeueDefault), app.RequeueDefault)}, true, nil
	}
	if !deleting {
		vmName, failureDomain, refusal := capiIdentity(m, machine)
		if refusal != nil {
			res, err := r.fail(ctx, ps, refusal.Reason, refusal)
			return res, true, err
		}
		if vmName != m.Spec.VMName || failureDomain != m.Spec.FailureDomain {
			patch := client.MergeFrom(m.DeepCopy())
			m.Spec.VMName, m.Spec.FailureDomain = vmName, failureDomain
			if err := r.Client.Patch(ctx, m, patch, client.FieldOwner(banlieuev1.FieldManagerProviderVSphere)); err != nil {
				return ctrl.Result{}, true, fmt.Errorf("setting spec.vmName and spec.failureDomain of a Cluster API machine: %w", err)
			}
		}
	}
	ps.capi = &capiPass{machine: machine}
	return ctrl.Result{}, false, nil
}

// capiIdentity is the vmName and failure domain a Cluster API machine gets, decided from the
// machine and its owner Machine: the virtual machine is named <namespace>-<name>, as
// banlieue-controller names a VM's, and the failure domain is the spec's when set (the
// template's), else the Machine's. A Machine asking for another failure domain than the spec's,
// or neither naming one, is refused: the machine never moves once cloned. A Machine asking for
// the machine's own Provider asks for nothing more: a LibvirtCluster's failure domains are
// Providers, and a control plane spreading over them names one.
func capiIdentity(m *infrav1.VSphereMachine, machine *capi.Machine) (vmName, failureDomain string, refusal *Refusal) {
	vmName, failureDomain = m.Spec.VMName, m.Spec.FailureDomain
	if vmName == "" {
		vmName = m.Namespace + "-" + m.Name
		if len(vmName) > maxVMName {
			return "", "", &Refusal{Reason: infrav1.ReasonNotPermitted, Message: fmt.Sprintf(
				"spec.vmName: <namespace>-<name> (%d characters) is longer than vCenter's %d; give the Machine a shorter name", len(vmName), maxVMName)}
		}
	}
	asked := machine.FailureDomain
	if m.Spec.ProviderRef != nil && asked == m.Spec.ProviderRef.Name {
		asked = ""
	}
	switch {
	case failureDomain == "" && asked == "":
		return "", "", &Refusal{Reason: infrav1.ReasonNoFailureDomain, Message: fmt.Sprintf(
			"spec.failureDomain is unset and owner Machine %s names no spec.failureDomain: set one of the Provider's status.failureDomains in the VSphereMachineTemplate or the MachineDeployment",
			machine.Name)}
	case failureDomain == "":
		failureDomain = asked
	case asked != "" && asked != failureDomain:
		return "", "", &Refusal{Reason: infrav1.ReasonFailureDomainMismatch, Message: fmt.Sprintf(
			"owner Machine %s: spec.failureDomain is %q, but the VSphereMachine's spec.failureDomain is %q: a machine is cloned into one failure domain only; give the MachineDeployment a VSphereMachineTemplate without failureDomain, or the same one",
			machine.Name, asked, failureDomain)}
	}
	return vmName, failureDomain, nil
}

// bootstrapData is the Machine's bootstrap data, read by name past the cache on every pass: the
// Secret its spec.bootstrap.dataSecretName names, in the machine's namespace, only when
// capi.CheckBootstrapSecret accepts it. The provider's Role grants get on exactly that name (the
// operator's bootstrap grants); it goes into guestinfo.userdata and is never copied into a
// custom resource.
func (c *capiPass) bootstrapData(ctx context.Context, reader client.Reader, m *infrav1.VSphereMachine) ([]byte, *Refusal, error) {
	name := c.machine.DataSecretName
	if name == "" {
		return nil, &Refusal{Reason: infrav1.ReasonWaitingForBootstrapData, Message: fmt.Sprintf(
			"owner Machine %s has no spec.bootstrap.dataSecretName yet (its bootstrap provider writes it)", c.machine.Name)}, nil
	}
	var s corev1.Secret
	if err := reader.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: name}, &s); apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
		return nil, &Refusal{Reason: infrav1.ReasonWaitingForBootstrapData, Message: fmt.Sprintf(
			"owner Machine %s spec.bootstrap.dataSecretName: Secret %s/%s is not there or not granted to the provider yet: %v", c.machine.Name, m.Namespace, name, err)}, nil
	} else if err != nil {
		return nil, nil, fmt.Errorf("owner Machine %s spec.bootstrap.dataSecretName: reading Secret %s/%s: %w", c.machine.Name, m.Namespace, name, err)
	}
	if err := capi.CheckBootstrapSecret(&s, c.machine.ClusterName); err != nil {
		return nil, &Refusal{Reason: infrav1.ReasonBootstrapDataRefused, Message: fmt.Sprintf("owner Machine %s spec.bootstrap.dataSecretName: %v", c.machine.Name, err)}, nil
	}
	return s.Data[capi.KeyBootstrapData], nil, nil
}

// capiStatus adjusts a status of a Cluster API machine's pass to the contract: provisioned never
// turns false again once m's stored status had it (a virtual machine powered off is still
// provisioned infrastructure), and a pass past the pause check (notPaused) records it.
func capiStatus(m *infrav1.VSphereMachine, st *infrav1.VSphereMachineStatus, notPaused bool) {
	if i := m.Status.Initialization; i != nil && i.Provisioned != nil && *i.Provisioned {
		yes := true
		st.Initialization = &banlieuev1.InitializationStatus{Provisioned: &yes}
	}
	if !notPaused {
		return
	}
	setCondition(st, m, infrav1.ConditionPaused, metav1.ConditionFalse, infrav1.ReasonNotPaused, "neither the VSphereMachine nor its Cluster is paused")
}

// setCondition sets one condition of st for m's generation.
func setCondition(st *infrav1.VSphereMachineStatus, m *infrav1.VSphereMachine, typ string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: m.Generation})
}
