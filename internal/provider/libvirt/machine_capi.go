package libvirt

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/capi"
	"banlieue.io/banlieue/internal/finalizer"
)

// A LibvirtMachine whose controller reference is a Cluster API Machine is served as the v1beta2
// InfraMachine contract asks (docs/adr/0136-cluster-api-machines.md): its domain is named after
// it, its bootstrap data comes from the Machine's data Secret, it honours the Machine's failure
// domain and the paused annotation and Cluster, and status.initialization.provisioned never
// turns false again. Every other machine is served as before.

// maxDomainName is spec.domainName's limit (the CRD's MaxLength).
const maxDomainName = 190

// CAPIError is a refusal or a wait of a Cluster API machine, with its Ready reason.
type CAPIError struct {
	Reason string
	Err    error
}

func (e *CAPIError) Error() string { return e.Err.Error() }
func (e *CAPIError) Unwrap() error { return e.Err }

func capiReason(err error) string {
	var c *CAPIError
	if errors.As(err, &c) {
		return c.Reason
	}
	return ""
}

// capiPass is what the owner Machine says for one pass over its LibvirtMachine.
type capiPass struct {
	machine *capi.Machine
}

// clusterAPI prepares a pass over a Cluster API machine (owner is its Machine controller
// reference, nil while a MachineSet or a control plane still owns it): its domain name, once,
// and whether the machine or its Cluster is paused; it sets s.capi when the pass goes on. done
// means the pass ends here, with res and err. A Machine that cannot be read stops a normal
// pass; a deletion goes on without it (Cluster API deletes the LibvirtMachine before it lets the
// Machine go, but the teardown must not depend on that).
func (s *machineScope) clusterAPI(ctx context.Context, owner *metav1.OwnerReference) (res ctrl.Result, done bool, err error) {
	r, m := s.r, s.machine
	deleting := !m.DeletionTimestamp.IsZero()
	if m.Spec.DomainName == "" {
		if deleting {
			// Nothing was made on the host: every host name derives from the domain name.
			_, err := finalizer.Remove(ctx, r.Client, m, infrav1.FinalizerLibvirtMachine)
			return ctrl.Result{}, true, err
		}
		if err := s.setDomainName(ctx); err != nil {
			res, err := s.fail(ctx, err)
			return res, true, err
		}
	}
	if owner == nil {
		if deleting {
			return ctrl.Result{}, false, nil
		}
		res, err := s.fail(ctx, &CAPIError{Reason: infrav1.ReasonOwnerMachineMismatch,
			Err: errors.New("waiting for a Cluster API Machine to become the LibvirtMachine's controller (it is owned by a MachineSet or a control plane)")})
		return res, true, err
	}
	machine, readErr := capi.ReadMachine(ctx, r.APIReader, m.Namespace, owner, m, infrav1.GroupVersion.WithKind("LibvirtMachine"))
	if readErr != nil && !deleting {
		res, err := s.fail(ctx, &CAPIError{Reason: infrav1.ReasonOwnerMachineMismatch, Err: readErr})
		return res, true, err
	}
	clusterName := m.Labels[capi.LabelClusterName]
	if machine != nil {
		clusterName = machine.ClusterName
	}
	paused, why, err := capi.PausedWhy(ctx, r.APIReader, m, "LibvirtMachine", clusterName, deleting)
	if err != nil {
		res, err := s.fail(ctx, err)
		return res, true, err
	}
	if paused {
		st := *m.Status.DeepCopy()
		setMachineCondition(&st, m, infrav1.ConditionPaused, metav1.ConditionTrue, infrav1.ReasonPaused, why+": nothing is reconciled")
		// Unpausing changes no generation the machine's watch passes: it is looked at again.
		res, err := s.stop(ctx, &st, ctrl.Result{RequeueAfter: app.RequeueDefault})
		return res, true, err
	}
	s.capi = &capiPass{machine: machine}
	s.capi.notPaused(m)
	return ctrl.Result{}, false, nil
}

// notPaused records in m.Status that the pass goes on: every status write of the pass starts
// from m.Status and carries it. A write that reads the stored status back into m (the identity's
// patch) must call it again.
func (c *capiPass) notPaused(m *infrav1.LibvirtMachine) {
	setMachineCondition(&m.Status, m, infrav1.ConditionPaused, metav1.ConditionFalse, infrav1.ReasonNotPaused, "neither the LibvirtMachine nor its Cluster is paused")
}

// setDomainName names the domain of a machine Cluster API made from a template after the
// machine, as the controller names a VM's (<namespace>-<name>, which checkAuthority requires):
// part of the identity, written before any host name derived from it is used.
func (s *machineScope) setDomainName(ctx context.Context) error {
	m := s.machine
	name := m.Namespace + "-" + m.Name
	if len(name) > maxDomainName {
		return &CAPIError{Reason: infrav1.ReasonNotPermitted, Err: fmt.Errorf(
			"spec.domainName: <namespace>-<name> (%d characters) is longer than %d; give the Machine a shorter name", len(name), maxDomainName)}
	}
	return s.patchSpec(ctx, "spec.domainName", func(m *infrav1.LibvirtMachine) { m.Spec.DomainName = name })
}

// check refuses a normal pass the Machine does not allow yet: a failure domain other than the
// machine's Provider (a LibvirtMachine cannot move, its providerRef is immutable; a template
// without providerRef lets banlieue-controller place it in the failure domain instead).
func (c *capiPass) check(m *infrav1.LibvirtMachine) error {
	if fd := c.machine.FailureDomain; fd != "" && fd != m.Spec.ProviderRef.Name {
		return &CAPIError{Reason: infrav1.ReasonFailureDomainMismatch, Err: fmt.Errorf(
			"owner Machine %s: spec.failureDomain is %q, but spec.providerRef.name is %q: the machine is placed only on its own Provider; give the MachineDeployment a LibvirtMachineTemplate of that Provider, or one without providerRef",
			c.machine.Name, fd, m.Spec.ProviderRef.Name)}
	}
	return nil
}

// bootstrapData is the Machine's bootstrap data, read by name past the cache each pass until the
// seed exists (a seed is never rewritten): the Secret the Machine's spec.bootstrap.dataSecretName
// names, in the machine's namespace, only when capi.CheckBootstrapSecret accepts it. The
// provider's Role grants get on exactly that name (the operator's bootstrap grants); it is never
// copied into the machine.
func (c *capiPass) bootstrapData(ctx context.Context, reader client.Reader, m *infrav1.LibvirtMachine) ([]byte, error) {
	name := c.machine.DataSecretName
	if name == "" {
		return nil, &CAPIError{Reason: infrav1.ReasonWaitingForBootstrapData, Err: fmt.Errorf(
			"owner Machine %s has no spec.bootstrap.dataSecretName yet (its bootstrap provider writes it)", c.machine.Name)}
	}
	var s corev1.Secret
	if err := reader.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: name}, &s); apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
		return nil, &CAPIError{Reason: infrav1.ReasonWaitingForBootstrapData, Err: fmt.Errorf(
			"owner Machine %s spec.bootstrap.dataSecretName: Secret %s/%s is not there or not granted to the provider yet: %w", c.machine.Name, m.Namespace, name, err)}
	} else if err != nil {
		return nil, fmt.Errorf("owner Machine %s spec.bootstrap.dataSecretName: reading Secret %s/%s: %w", c.machine.Name, m.Namespace, name, err)
	}
	if err := capi.CheckBootstrapSecret(&s, c.machine.ClusterName); err != nil {
		return nil, &CAPIError{Reason: infrav1.ReasonBootstrapDataRefused, Err: fmt.Errorf("owner Machine %s spec.bootstrap.dataSecretName: %w", c.machine.Name, err)}
	}
	return s.Data[capi.KeyBootstrapData], nil
}

// status adjusts a converge pass's status to the contract: provisioned never turns false again
// (a domain powered off stays provisioned infrastructure), and the failure domain is the
// Provider the machine runs on when the spec names none.
func (c *capiPass) status(m *infrav1.LibvirtMachine, st *infrav1.LibvirtMachineStatus) {
	if i := m.Status.Initialization; i != nil && ptrTrue(i.Provisioned) {
		st.Initialization = &banlieuev1.InitializationStatus{Provisioned: ptr.To(true)}
	}
	if st.FailureDomain == "" {
		st.FailureDomain = m.Spec.ProviderRef.Name
	}
}
