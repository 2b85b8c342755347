// Package role wires the libvirt provider role: its controllers, sharing one pool of host
// connections, registered by one Setup for cmd/banlieue, the tests and the benches alike.
package role

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	providerlibvirt "banlieue.io/banlieue/internal/provider/libvirt"
	"banlieue.io/banlieue/internal/provider/libvirt/hostconn"
	"banlieue.io/banlieue/internal/provider/libvirt/image"
)

// Options configure the libvirt provider role (docs/operations.md, "Role-specific flags").
type Options struct {
	// ProviderName, when set, limits the process to one Provider, its machines and its rows.
	ProviderName string
	// BuildNamespace holds the artifacts PVC and the import Jobs.
	BuildNamespace string
	// ImportImage is the image import Jobs run; ImportServiceAccount the account they run as.
	ImportImage, ImportServiceAccount string
	// Tolerations are copied onto import Jobs.
	Tolerations []corev1.Toleration
	// Resync, when set, replaces the Provider and LibvirtMachine controllers' requeue intervals
	// (docs/operations.md, "Requeue intervals"): for tests and benches that cannot wait 30 s.
	Resync time.Duration
}

// Setup registers the Provider, VMImage-import and LibvirtMachine controllers with mgr. They
// share one pool of host connections, closed when the manager stops.
func Setup(mgr manager.Manager, opts Options) error {
	conns := hostconn.NewConnections()
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
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	return (&providerlibvirt.MachineReconciler{
		Client:       mgr.GetClient(),
		APIReader:    mgr.GetAPIReader(),
		Connections:  conns,
		ProviderName: opts.ProviderName,
		Resync:       opts.Resync,
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
