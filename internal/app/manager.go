package app

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Lease timings of every role (docs/operations.md).
const (
	LeaseDuration = 15 * time.Second
	RenewDeadline = 10 * time.Second
	RetryPeriod   = 2 * time.Second
)

// RESTConfig resolves --kubeconfig, then the in-cluster config, then ~/.kube/config.
func RESTConfig(kubeconfig string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	return cfg, nil
}

// NewManager builds the manager of one role. role names it in metrics and logs; customize lets a
// role narrow its caches (e.g. one Provider by name) before the manager exists.
func NewManager(cfg *rest.Config, opts Options, role string, scheme *runtime.Scheme,
	customize func(*manager.Options)) (manager.Manager, error) {
	leaseDuration, renewDeadline, retryPeriod := LeaseDuration, RenewDeadline, RetryPeriod
	mgrOpts := manager.Options{
		Scheme:                 scheme,
		HealthProbeBindAddress: ":" + strconv.Itoa(opts.HealthPort),
		LivenessEndpointName:   "/livez",
		ReadinessEndpointName:  "/readyz",
		Metrics:                metricsServer(opts),
		LeaderElection:         !opts.NoLeaderElect,
		LeaseDuration:          &leaseDuration,
		RenewDeadline:          &renewDeadline,
		RetryPeriod:            &retryPeriod,
		// A process that loses its lease exits non-zero so Kubernetes restarts it; releasing on a
		// clean shutdown lets a standby take over without waiting out the lease.
		LeaderElectionReleaseOnCancel: true,
	}
	// No role caches a Secret: every read is a GET by name past the cache, so no informer ever
	// lists or watches Secrets (their RBAC grants get only) and no process holds a copy of every
	// Secret it can see. Set for every role, so a cached client.Get of a Secret cannot start one.
	mgrOpts.Client = client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}}
	if opts.Namespace != "" {
		mgrOpts.Cache = cache.Options{DefaultNamespaces: map[string]cache.Config{opts.Namespace: {}}}
	}
	if customize != nil {
		customize(&mgrOpts)
	}
	if !opts.NoLeaderElect {
		lock, err := newLeaseLock(cfg, opts)
		if err != nil {
			return nil, err
		}
		mgrOpts.LeaderElectionResourceLockInterface = lock
	}
	mgr, err := manager.New(cfg, mgrOpts)
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("leadership", readiness(mgr, opts)); err != nil {
		return nil, err
	}
	if err := mgr.Add(LeaderGauge(mgr, role)); err != nil {
		return nil, err
	}
	return mgr, nil
}

// newLeaseLock exists because controller-runtime derives the holder identity itself; docs/operations.md, "Common flags"
// wants POD_NAME so an operator can tell from the Lease which pod leads.
func newLeaseLock(cfg *rest.Config, opts Options) (resourcelock.Interface, error) {
	clientset, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("creating leader election client: %w", err)
	}
	return resourcelock.New(resourcelock.LeasesResourceLock, opts.LeaderElectionNamespace,
		opts.LeaderElectionID, clientset.CoreV1(), clientset.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: opts.LeaderElectionIdentity})
}

// readiness is ready when the controllers run (leader, or no election), or when this process is
// a standby that can read the lease: a standby that cannot reach the API server could not take
// over either.
func readiness(mgr manager.Manager, opts Options) healthz.Checker {
	lease := types.NamespacedName{Namespace: opts.LeaderElectionNamespace, Name: opts.LeaderElectionID}
	return func(req *http.Request) error {
		select {
		case <-mgr.Elected():
			return nil
		default:
		}
		if opts.NoLeaderElect {
			return fmt.Errorf("controllers not started yet")
		}
		ctx, cancel := context.WithTimeout(req.Context(), 2*time.Second)
		defer cancel()
		var l coordinationv1.Lease
		if err := mgr.GetAPIReader().Get(ctx, lease, &l); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("standby cannot read lease %s: %w", lease, err)
		}
		return nil
	}
}
