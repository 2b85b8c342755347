package libvirt

import (
	"cmp"
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/tenancy"
)

// namespaceRefusal is why p does not serve a machine of namespace ns whose labels are nsLabels,
// or "" when it does. A machine of the Provider's own namespace is always served; one of
// another namespace only while allowedNamespaces admits that namespace. The provider decides
// this itself, on every pass, rather than trusting the scheduler: anyone who may write a
// LibvirtMachine in their namespace can name a shared Provider in it.
func namespaceRefusal(p *banlieuev1.Provider, ns string, nsLabels map[string]string) string {
	if ok, rule := tenancy.AdmitsNamespace(p, ns, nsLabels); !ok {
		return fmt.Sprintf("invalid spec.providerRef: Provider %s/%s does not admit namespace %s (%s)", p.Namespace, p.Name, ns, rule)
	}
	return ""
}

// admits reads the machine's namespace past the cache (its labels now, not as last watched)
// when the machine is not in its Provider's namespace, and returns namespaceRefusal.
func (r *MachineReconciler) admits(ctx context.Context, m *infrav1.LibvirtMachine, p *banlieuev1.Provider) (string, error) {
	if m.Namespace == p.Namespace {
		return "", nil
	}
	var ns corev1.Namespace
	if err := r.APIReader.Get(ctx, client.ObjectKey{Name: m.Namespace}, &ns); err != nil {
		return "", fmt.Errorf("reading Namespace %s for Provider %s/%s's allowedNamespaces: %w", m.Namespace, p.Namespace, p.Name, err)
	}
	return namespaceRefusal(p, m.Namespace, ns.Labels), nil
}

// refuse records a refused namespace on Ready and looks again later: the Provider or the
// namespace's labels may change. Nothing reaches the host, teardown included: a machine its
// Provider does not admit has no authority over the host's domains. Like every write before the
// identity's, it applies only over the status it read (machineScope), so a refusal from a
// lagging cache cannot drop what the provider recorded since.
func (s *machineScope) refuse(ctx context.Context, msg string) (ctrl.Result, error) {
	log.FromContext(ctx).Info("machine refused", "reason", banlieuev1.ReasonNamespaceNotAllowed, "message", msg)
	st := *s.machine.Status.DeepCopy()
	setMachineCondition(&st, s.machine, banlieuev1.ConditionReady, metav1.ConditionFalse, banlieuev1.ReasonNamespaceNotAllowed, msg)
	res, err := s.stop(ctx, &st, ctrl.Result{RequeueAfter: cmp.Or(s.r.Resync, app.RequeueDefault)})
	return res, client.IgnoreNotFound(err)
}
