package vsphere

import (
	"cmp"
	"context"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/provider/providerkit"
)

// ClassName is the ProviderClass this backend serves.
const ClassName = "vsphere"

// RecorderName is the reporting controller of every event of this role.
const RecorderName = "banlieue-provider-vsphere"

// probeTimeout bounds one probe of vCenter, the session's dial and the inventory included.
const probeTimeout = 60 * time.Second

// ProviderReconciler probes a Provider's vCenter and publishes its status through providerkit,
// as the libvirt provider does for a host: ProviderReachable and Ready, one failure domain per
// compute cluster narrowed to the declared classes reachable there, and each cluster's size.
type ProviderReconciler struct {
	Client client.Client
	// APIReader reads the Provider's Secret and CA uncached, by name.
	APIReader client.Reader
	// Sessions is the Provider's one long-lived vCenter session, shared with the machines.
	Sessions *Sessions
	// Folder is the folder below each datacenter's VM folder the machines are cloned into.
	Folder string
	// Resync is how often a healthy Provider is probed again; zero means every 30 s.
	Resync time.Duration
	// Workers is how many Providers are probed at once; zero means one.
	Workers int
	// ProviderName and ProviderNamespace limit this process to one Provider; empty is any.
	ProviderName, ProviderNamespace string

	report *providerkit.Reporter
}

// SetupWithManager registers the reconciler.
func (r *ProviderReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.report = &providerkit.Reporter{Client: r.Client, Class: ClassName, Recorder: mgr.GetEventRecorder(RecorderName),
		Statuses: &providerkit.Statuses{FieldManager: banlieuev1.FieldManagerProviderVSphere}}
	return ctrl.NewControllerManagedBy(mgr).Named("vsphere-provider").
		For(&banlieuev1.Provider{}, builder.WithPredicates(predicate.GenerationChangedPredicate{},
			predicate.NewPredicateFuncs(func(o client.Object) bool {
				return (r.ProviderName == "" || o.GetName() == r.ProviderName) &&
					(r.ProviderNamespace == "" || o.GetNamespace() == r.ProviderNamespace)
			}))).
		WithOptions(app.ControllerOptions(r.Workers)).
		Complete(r)
}

// Reconcile probes vCenter and writes the Provider's status once.
func (r *ProviderReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p, gone, res, err := r.report.Lookup(ctx, req.NamespacedName)
	if gone {
		r.Sessions.Forget(req.NamespacedName)
	}
	if p == nil {
		return res, err
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	retry := ctrl.Result{RequeueAfter: min(app.ErrorRetry, cmp.Or(r.Resync, app.ErrorRetry))}
	failed := func(reason string, err error) (ctrl.Result, error) {
		log.FromContext(ctx).Info("vCenter unavailable", "reason", reason, "error", err.Error())
		if err := r.report.WriteFailed(ctx, p, reason, err.Error()); err != nil {
			return ctrl.Result{}, err
		}
		return retry, nil
	}

	e, version, refusal, err := providerEndpoint(ctx, r.APIReader, p)
	switch {
	case err != nil:
		return ctrl.Result{}, err // the API server's: retried with backoff
	case refusal != nil:
		return failed(refusal.Reason, refusal)
	}
	b, err := r.Sessions.Get(ctx, req.NamespacedName, e, version)
	if err != nil {
		return failed(banlieuev1.ReasonConnectFailed, err)
	}
	q := providerQuery(p, r.Folder)
	fds, err := b.FailureDomains(ctx, q)
	if err != nil {
		return failed(banlieuev1.ReasonConnectFailed, fmt.Errorf("listing failure domains: %w", err))
	}
	out, missing := providerFailureDomains(p, fds)
	if err := r.report.WriteProbed(ctx, p, providerkit.Probe{
		FailureDomains: out,
		Reachable:      fmt.Sprintf("connected; %d compute cluster(s)", len(fds)),
		Missing:        missing,
		Ready:          "all declared capabilities are reachable in vCenter",
	}); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: cmp.Or(r.Resync, app.RequeueDefault)}, nil
}
