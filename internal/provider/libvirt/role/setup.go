// Package role wires the libvirt provider role: its controllers, sharing one pool of host
// connections, registered by one Setup for cmd/banlieue, the tests and the benches alike.
package role

import (
	"context"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/jobbounds"
	providerlibvirt "banlieue.io/banlieue/internal/provider/libvirt"
	"banlieue.io/banlieue/internal/provider/libvirt/hostconn"
	"banlieue.io/banlieue/internal/provider/libvirt/image"
)

// Options configure the libvirt provider role (docs/operations.md, "Role-specific flags").
type Options struct {
	// ProviderName, when set, limits the process to one Provider, its machines and its rows.
	ProviderName string
	// ProviderNamespace is that Provider's namespace (--namespace). Its machines may live in any
	// namespace its allowedNamespaces admits, so LibvirtMachines are watched cluster-wide and
	// served only when they name this Provider by namespace and name.
	ProviderNamespace string
	// BuildNamespace holds the artifacts PVC and the import Jobs.
	BuildNamespace string
	// ImportImage is the image import Jobs run; ImportServiceAccount the account they run as.
	ImportImage, ImportServiceAccount string
	// Tolerations are copied onto import Jobs.
	Tolerations []corev1.Toleration
	// ImportBounds are every import Job's deadline and resources (--import-deadline and the
	// other bound flags); without a deadline, jobbounds.DefaultImport (image.Reconciler).
	ImportBounds jobbounds.Bounds
	// Resync, when set, replaces the Provider and LibvirtMachine controllers' requeue intervals
	// (docs/operations.md, "Requeue intervals"): for tests and benches that cannot wait 30 s.
	Resync time.Duration
	// MachineWorkers is how many LibvirtMachines are reconciled at once (--machine-workers);
	// zero means one.
	MachineWorkers int
}

// CacheByObject narrows the manager's cache to what the role reads: import Jobs of the build
// namespace only (the grant is there and nowhere else), and with a ProviderName that one
// Provider, selected server-side. LibvirtMachines are the exception that widens it: a shared
// Provider's machines are in other namespaces than the Provider's.
func CacheByObject(o Options) map[client.Object]cache.ByObject {
	by := map[client.Object]cache.ByObject{
		&batchv1.Job{}:            {Namespaces: map[string]cache.Config{o.BuildNamespace: {}}},
		&infrav1.LibvirtMachine{}: {Namespaces: map[string]cache.Config{cache.AllNamespaces: {}}},
	}
	if o.ProviderName != "" {
		by[&banlieuev1.Provider{}] = cache.ByObject{Field: providerlibvirt.ProviderFieldSelector(o.ProviderName)}
	}
	return by
}

// Setup registers the Provider, VMImage-import and LibvirtMachine controllers with mgr. They
// share one pool of host connections, closed when the manager stops. Import Jobs are watched
// only when the account may watch them (mayWatchJobs).
func Setup(mgr manager.Manager, opts Options) error {
	watchJobs, err := mayWatchJobs(context.Background(), mgr.GetClient(), opts.BuildNamespace)
	if err != nil {
		return err
	}
	if !watchJobs {
		mgr.GetLogger().Error(nil, "this provider may not list and watch Jobs in the build namespace: import Jobs are read uncached, "+
			"every zone reports JobsNotGranted, and rows are retried at the default requeue; grant the ProviderClass's "+
			"additionalRules (examples/09-providerclass-libvirt.yaml) and restart the provider to watch them again",
			"namespace", opts.BuildNamespace)
	}
	return setup(mgr, opts, watchJobs)
}

func setup(mgr manager.Manager, opts Options, watchJobs bool) error {
	conns := hostconn.NewConnections()
	conns.Dialer.Observer = providerlibvirt.RPCObserver()
	if err := mgr.Add(closeOnStop(conns.Close)); err != nil {
		return err
	}
	if err := (&providerlibvirt.ProviderReconciler{
		Client:      mgr.GetClient(),
		APIReader:   mgr.GetAPIReader(),
		Connections: conns,
		Resync:      opts.Resync,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&image.Reconciler{
		Client:               mgr.GetClient(),
		APIReader:            mgr.GetAPIReader(),
		Connections:          conns,
		ProviderName:         opts.ProviderName,
		BuildNamespace:       opts.BuildNamespace,
		ImportImage:          opts.ImportImage,
		ImportServiceAccount: opts.ImportServiceAccount,
		Tolerations:          opts.Tolerations,
		WatchJobs:            watchJobs,
		Bounds:               opts.ImportBounds,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	return (&providerlibvirt.MachineReconciler{
		Client:            mgr.GetClient(),
		APIReader:         mgr.GetAPIReader(),
		Connections:       conns,
		ProviderName:      opts.ProviderName,
		ProviderNamespace: opts.ProviderNamespace,
		Resync:            opts.Resync,
		Workers:           opts.MachineWorkers,
	}).SetupWithManager(mgr)
}

// closeOnStop runs its function when the manager stops, on every replica, leader or not: every
// replica holds connections (the manager would run a plain RunnableFunc on the leader only).
type closeOnStop func()

func (f closeOnStop) Start(ctx context.Context) error {
	<-ctx.Done()
	f()
	return nil
}

func (closeOnStop) NeedLeaderElection() bool { return false }
