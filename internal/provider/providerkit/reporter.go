package providerkit

import (
	"context"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
)

// failureDomainsMetric is banlieue_provider_failure_domains{namespace,name,backend}: how many
// failure domains a Provider publishes. It drops to 0 the moment a backend stops answering,
// which is what an alert on an unreachable host or vCenter wants to see. The Provider's
// namespace and name are two labels, as kube-state-metrics names an object, so a query can
// select or group by either.
var failureDomainsMetric = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "banlieue_provider_failure_domains",
	Help: "Failure domains a Provider publishes (0 while its host is unverified).",
}, []string{"namespace", "name", "backend"})

func init() {
	metrics.Registry.MustRegister(failureDomainsMetric)
}

// Reporter publishes what a provider role's probe of its Provider found: the Ready and
// ProviderReachable conditions, the failure domains, the events of reachability changing and
// the failure-domain metric. Each probe ends in one WriteProbed or WriteFailed.
type Reporter struct {
	Client client.Client
	// Class is the ProviderClass the role serves; Providers of another class are not its own.
	Class string
	// Recorder announces the backend becoming reachable or not.
	Recorder events.EventRecorder
	// Statuses keeps a probe that finds the backend as before from writing the status again;
	// its FieldManager is the role's.
	Statuses *Statuses

	announced Announced
}

// Lookup reads the Provider a probe is for. p is nil when there is nothing to probe: the
// Provider is gone (gone is true, and what was remembered of it is dropped), of another class,
// being deleted or paused; the caller then returns res and err.
func (r *Reporter) Lookup(ctx context.Context, key types.NamespacedName) (p *banlieuev1.Provider, gone bool, res ctrl.Result, err error) {
	var got banlieuev1.Provider
	if err := r.Client.Get(ctx, key, &got); err != nil {
		if client.IgnoreNotFound(err) == nil {
			r.Forget(key)
			return nil, true, ctrl.Result{}, nil
		}
		return nil, false, ctrl.Result{}, err
	}
	if got.Spec.ProviderClassRef.Name != r.Class || !got.DeletionTimestamp.IsZero() {
		return nil, false, ctrl.Result{}, nil
	}
	if got.Spec.Paused {
		return nil, false, ctrl.Result{RequeueAfter: app.RequeueLong}, nil
	}
	return &got, false, ctrl.Result{}, nil
}

// Forget drops what this process remembers of a deleted Provider: its last status and its
// metric series.
func (r *Reporter) Forget(key types.NamespacedName) {
	r.Statuses.Forget(key)
	failureDomainsMetric.DeleteLabelValues(key.Namespace, key.Name, r.Class)
}

// WriteFailed publishes an unreachable backend: both conditions False and no failure domains,
// so nothing is ever scheduled onto capabilities that were not verified. p.Status becomes what
// was written, so that a later write in the same pass (a probe after a lost connection) records
// the transition back.
func (r *Reporter) WriteFailed(ctx context.Context, p *banlieuev1.Provider, reason, msg string) error {
	status := p.Status.DeepCopy()
	status.FailureDomains = nil
	status.ObservedGeneration = p.Generation
	status.Workload = nil
	SetCondition(status, p, banlieuev1.ConditionProviderReachable, metav1.ConditionFalse, reason, msg)
	SetCondition(status, p, banlieuev1.ConditionReady, metav1.ConditionFalse, reason, msg)
	failureDomainsMetric.WithLabelValues(p.Namespace, p.Name, r.Class).Set(0)
	if err := r.Statuses.Write(ctx, r.Client, p, status); err != nil {
		return err
	}
	r.EmitReachability(p, p.Status.Conditions, status.Conditions)
	p.Status = *status
	return nil
}

// Probe is what a successful probe found.
type Probe struct {
	FailureDomains []banlieuev1.FailureDomain
	// Reachable is ProviderReachable's message ("connected; 2 pool(s), 1 network(s)").
	Reachable string
	// Missing lists each declared class the backend lacks ("storageClass fast (pool ssd)");
	// any makes Ready False with CapabilitiesIncomplete.
	Missing []string
	// Ready is Ready's message when nothing is missing.
	Ready string
}

// WriteProbed publishes a backend that answered: ProviderReachable True, Ready True unless a
// declared capability is missing (CapabilitiesIncomplete, naming each), and the failure domains.
func (r *Reporter) WriteProbed(ctx context.Context, p *banlieuev1.Provider, pr Probe) error {
	status := p.Status.DeepCopy()
	status.FailureDomains = pr.FailureDomains
	status.ObservedGeneration = p.Generation
	status.Workload = nil
	SetCondition(status, p, banlieuev1.ConditionProviderReachable, metav1.ConditionTrue, banlieuev1.ReasonReconciled, pr.Reachable)
	if len(pr.Missing) == 0 {
		SetCondition(status, p, banlieuev1.ConditionReady, metav1.ConditionTrue, banlieuev1.ReasonReconciled, pr.Ready)
	} else {
		SetCondition(status, p, banlieuev1.ConditionReady, metav1.ConditionFalse, banlieuev1.ReasonCapabilitiesIncomplete,
			MissingMessage(pr.Missing))
	}
	if err := r.Statuses.Write(ctx, r.Client, p, status); err != nil {
		return err
	}
	r.EmitReachability(p, p.Status.Conditions, status.Conditions)
	failureDomainsMetric.WithLabelValues(p.Namespace, p.Name, r.Class).Set(float64(len(status.FailureDomains)))
	return nil
}

// MissingMessage is CapabilitiesIncomplete's message.
func MissingMessage(missing []string) string {
	return "declared capabilities missing on the host: " + strings.Join(missing, ", ")
}

// SetCondition sets one condition of a Provider's status at p's generation.
func SetCondition(status *banlieuev1.ProviderStatus, p *banlieuev1.Provider, typ string,
	st metav1.ConditionStatus, reason, msg string) {
	banlieuev1.SetCondition(&status.Conditions, p.Generation, metav1.Condition{Type: typ, Status: st, Reason: reason, Message: msg})
}

// EmitReachability announces ProviderReachable moving between the status a write found and the
// one it wrote: HostReachable when the backend answers again (or for the first time), the
// failure's own reason (ConnectFailed, CredentialsUnavailable) when it stops. A probe that finds
// the backend as before announces nothing.
func (r *Reporter) EmitReachability(p *banlieuev1.Provider, before, after []metav1.Condition) {
	c, moved := app.Transition(before, after, banlieuev1.ConditionProviderReachable)
	if moved {
		moved = r.announced.First(string(p.UID)+"/reachable", string(c.Status)+"/"+c.Reason)
	}
	switch {
	case !moved:
	case c.Status == metav1.ConditionTrue:
		r.Recorder.Eventf(p, nil, corev1.EventTypeNormal, banlieuev1.ReasonHostReachable, "Probe", "%s", c.Message)
	default:
		r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, c.Reason, "Probe", "%s", c.Message)
	}
}
