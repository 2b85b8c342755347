package vsphere

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"banlieue.io/banlieue/internal/provider/vsphere/vcenter"
)

// DefaultWorkers is `banlieue provider vsphere`'s default --workers: machines reconciled at
// once; what one vCenter takes at once is bounded apart (Options.Clones, PowerOperations).
const DefaultWorkers = 4

// Options configure the vsphere provider role for one Provider.
type Options struct {
	ProviderName, ProviderNamespace string
	// Folder is the folder below each datacenter's VM folder the machines are cloned into.
	Folder  string
	Workers int
	// Clones and PowerOperations bound what the Provider's session runs on vCenter at once.
	Clones, PowerOperations int
}

// Setup registers the Provider's probe and the VSphereMachine reconciler with mgr, over one
// vCenter session per Provider dialled through vcenter.Dial; the sessions are logged out when
// the manager stops.
func Setup(mgr ctrl.Manager, o Options) error {
	sessions := &Sessions{Dial: Dial(vcenter.WithLimits(o.Clones, o.PowerOperations))}
	if err := (&ProviderReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Sessions: sessions, Folder: o.Folder,
		ProviderName: o.ProviderName, ProviderNamespace: o.ProviderNamespace,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&ImageReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Sessions: sessions,
		ProviderName: o.ProviderName, ProviderNamespace: o.ProviderNamespace,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	r := &MachineReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Sessions: sessions,
		ProviderName: o.ProviderName, ProviderNamespace: o.ProviderNamespace, Folder: o.Folder, Workers: o.Workers,
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return err
	}
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		r.Stop()
		return nil
	}))
}
