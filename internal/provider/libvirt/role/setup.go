// Package role wires the libvirt provider role: its controllers, sharing one pool of host
// connections, registered by one Setup for cmd/banlieue, the tests and the benches alike.
package role

import (
	"context"
	"fmt"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/console"
	"banlieue.io/banlieue/internal/jobbounds"
	"banlieue.io/banlieue/internal/jobimage"
	providerlibvirt "banlieue.io/banlieue/internal/provider/libvirt"
	"banlieue.io/banlieue/internal/provider/libvirt/hostconn"
	"banlieue.io/banlieue/internal/provider/libvirt/image"
)

// DefaultWorkers is the provider's --workers (docs/operations.md, "Common flags"). Its passes
// wait on hosts, and what each host takes at once is bounded apart (hostconn.Limits), so the
// workers may outnumber one host's slots: the extra ones serve other hosts, or wait in the
// host's queue, where they are counted.
const DefaultWorkers = 16

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
	// ImportPull is how import pods pull ImportImage (--import-image-pull-policy,
	// --import-image-pull-secret).
	ImportPull jobimage.Pull
	// Resync, when set, replaces the Provider and LibvirtMachine controllers' requeue intervals
	// (docs/operations.md, "Requeue intervals"): for tests and benches that cannot wait 30 s.
	Resync time.Duration
	// ConsolePort is where the console endpoint listens (--console-port; zero: no endpoint). It
	// needs ProviderName: a console is opened only for the one Provider's machines.
	ConsolePort int
	// ConsoleRelay is the user the console relay's tokens authenticate as (--console-relay).
	ConsoleRelay string
	// PodName names the replica's entry in its Provider's status.consoleKeys.
	PodName string
	// Workers is how many objects each of the role's controllers reconciles at once
	// (--workers); zero means one.
	Workers int
	// HostLimits and Breaker protect each host (--host-domain-operations, --host-volume-uploads,
	// --host-breaker-failures, --host-breaker-cool-down); zero fields take hostconn's defaults.
	HostLimits hostconn.Limits
	Breaker    hostconn.Breaker
}

// CacheByObject narrows the manager's cache to what the role reads: import Jobs of the build
// namespace only (the grant is there and nowhere else), and with a ProviderName that one
// Provider and the machines naming it, selected server-side. LibvirtMachines are the exception
// that widens the namespaces: a shared Provider's machines are in other namespaces than the
// Provider's.
func CacheByObject(o Options) map[client.Object]cache.ByObject {
	machines := cache.ByObject{Namespaces: map[string]cache.Config{cache.AllNamespaces: {}}}
	by := map[client.Object]cache.ByObject{
		&batchv1.Job{}: {Namespaces: map[string]cache.Config{o.BuildNamespace: {}}},
	}
	if o.ProviderName != "" {
		by[&banlieuev1.Provider{}] = cache.ByObject{Field: providerlibvirt.ProviderFieldSelector(o.ProviderName)}
		// Without the selector every provider of a fleet caches, and is sent every change of,
		// every machine of the cluster (ADR-0146). providerRef is immutable once set, so a
		// machine never leaves the selection while its provider serves it; one placed later
		// (Cluster API's) enters it then.
		machines.Field = providerlibvirt.MachineFieldSelector(o.ProviderName)
	}
	by[&infrav1.LibvirtMachine{}] = machines
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
	conns.Limits, conns.Breaker, conns.Observer = opts.HostLimits, opts.Breaker, providerlibvirt.HostObserver()
	if err := mgr.Add(closeOnStop(conns.Close)); err != nil {
		return err
	}
	if err := (&providerlibvirt.ProviderReconciler{
		Client:      mgr.GetClient(),
		APIReader:   mgr.GetAPIReader(),
		Connections: conns,
		Resync:      opts.Resync,
		Workers:     opts.Workers,
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
		Pull:                 opts.ImportPull,
		Workers:              opts.Workers,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&providerlibvirt.MachineReconciler{
		Client:            mgr.GetClient(),
		APIReader:         mgr.GetAPIReader(),
		Connections:       conns,
		ProviderName:      opts.ProviderName,
		ProviderNamespace: opts.ProviderNamespace,
		Resync:            opts.Resync,
		Workers:           opts.Workers,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	// The target's side of a live move: the machines moving to this Provider (ADR-0154).
	if err := (&providerlibvirt.MoveTargetReconciler{
		Client:            mgr.GetClient(),
		APIReader:         mgr.GetAPIReader(),
		Connections:       conns,
		ProviderName:      opts.ProviderName,
		ProviderNamespace: opts.ProviderNamespace,
		Workers:           opts.Workers,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	return setupConsole(mgr, opts, conns)
}

// setupConsole serves the console endpoint (ADR-0140) on every replica, with the pool the
// controllers share, when a port is set and the process serves one Provider.
func setupConsole(mgr manager.Manager, opts Options, conns *hostconn.Connections) error {
	if opts.ConsolePort == 0 || opts.ProviderName == "" {
		return nil
	}
	if opts.PodName == "" {
		return fmt.Errorf("the console endpoint needs the replica's pod name (POD_NAME) for its Provider's status.consoleKeys")
	}
	cfg, err := console.SelfSignedTLS()
	if err != nil {
		return fmt.Errorf("console endpoint certificate: %w", err)
	}
	hash, err := console.ServingKeyHash(cfg)
	if err != nil {
		return err
	}
	provider := types.NamespacedName{Namespace: opts.ProviderNamespace, Name: opts.ProviderName}
	// The relay sends its token only to a key the Provider publishes (ADR-0151).
	if err := mgr.Add(&console.KeyPublisher{Client: mgr.GetClient(), Provider: provider, Pod: opts.PodName, SHA256: hash}); err != nil {
		return fmt.Errorf("console key publisher: %w", err)
	}
	return mgr.Add(&console.Listener{
		Addr: ":" + strconv.Itoa(opts.ConsolePort),
		TLS:  cfg,
		Handler: &providerlibvirt.ConsoleServer{
			Client:      mgr.GetClient(),
			Reader:      mgr.GetAPIReader(),
			Connections: conns,
			Provider:    provider,
			Relay:       opts.ConsoleRelay,
		},
	})
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
