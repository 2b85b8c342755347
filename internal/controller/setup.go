package controller

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
)

// Field indexes of the manager's cache.
const (
	imageRefIndex = "spec.imageRef.name"
	classRefIndex = "spec.classRef.name"
)

// DefaultWorkers is the controller role's --workers (docs/operations.md, "Common flags"). The
// scheduler reads the placements of a namespace's other VMs from the cache; the decisions of a
// namespace are taken one at a time and see the placements assumed but not cached yet
// (assumed.go), so several workers keep required anti-affinity (ADR-0132). Four: its passes are
// API work only, and VMs created together wait for a few API round trips, not for each other.
const DefaultWorkers = 4

// Options configure the controller role.
type Options struct {
	// Namespace limits VirtualMachines, Providers and machines to one namespace; empty means
	// every namespace. VMImages, VMClasses and Namespaces are cluster-scoped and always watched,
	// and so are Providers shared from other namespaces (CacheByObject).
	Namespace string
	// Workers is how many objects each controller reconciles at once (--workers); zero means one.
	Workers int
	// Export configures the export Jobs; without an image, exports of stopped VMs wait.
	Export ExportJobs
}

// Setup registers the VirtualMachine, VMImage, Provider-in-use and Provider-drain controllers
// with mgr.
func Setup(mgr manager.Manager, opts Options) error {
	ctx := context.Background()
	indexer := mgr.GetFieldIndexer()
	for _, ix := range []struct {
		obj     client.Object
		field   string
		extract client.IndexerFunc
	}{
		{&banlieuev1.VirtualMachine{}, imageRefIndex, func(o client.Object) []string {
			return []string{o.(*banlieuev1.VirtualMachine).Spec.ImageRef.Name}
		}},
		{&banlieuev1.VirtualMachine{}, classRefIndex, func(o client.Object) []string {
			return []string{o.(*banlieuev1.VirtualMachine).Spec.ClassRef.Name}
		}},
		{&banlieuev1.VirtualMachine{}, placedOnIndex, placedOnKey},
		{&banlieuev1.VirtualMachineMigration{}, migrationVMIndex, func(o client.Object) []string {
			return []string{o.(*banlieuev1.VirtualMachineMigration).Spec.VMName}
		}},
		{&banlieuev1.VirtualMachineSnapshot{}, snapshotVMIndex, func(o client.Object) []string {
			return []string{o.(*banlieuev1.VirtualMachineSnapshot).Spec.VMName}
		}},
	} {
		if err := indexer.IndexField(ctx, ix.obj, ix.field, ix.extract); err != nil {
			return fmt.Errorf("indexing %T by %s: %w", ix.obj, ix.field, err)
		}
	}
	for _, k := range allInfraKinds() {
		if err := indexer.IndexField(ctx, k.newObject(), providerRefIndex, func(o client.Object) []string {
			return []string{k.providerOf(o).String()}
		}); err != nil {
			return fmt.Errorf("indexing %s by %s: %w", k.GVK.Kind, providerRefIndex, err)
		}
	}
	inScope := builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
		return opts.Namespace == "" || o.GetNamespace() == opts.Namespace
	}))
	vms := &vmMapper{client: mgr.GetClient(), namespace: opts.Namespace}

	b := ctrl.NewControllerManagedBy(mgr).
		Named("virtualmachine").
		For(&banlieuev1.VirtualMachine{}, inScope).
		Watches(&banlieuev1.VMImage{}, handler.EnqueueRequestsFromMapFunc(vms.byIndex(imageRefIndex))).
		Watches(&banlieuev1.VMClass{}, handler.EnqueueRequestsFromMapFunc(vms.byIndex(classRefIndex))).
		Watches(&banlieuev1.Provider{}, vms.providerHandler()).
		// An export's phase holds its VM off while it copies (exportHolds).
		Watches(&banlieuev1.VirtualMachineExport{}, handler.EnqueueRequestsFromMapFunc(vmOfExport), inScope).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(vms.byNamespace),
			builder.WithPredicates(predicate.LabelChangedPredicate{})).
		WithOptions(app.ControllerOptions(opts.Workers))
	for _, k := range allInfraKinds() {
		b = b.Owns(k.newObject(), inScope)
	}
	if err := b.Complete(&virtualMachineReconciler{client: mgr.GetClient(), apiReader: mgr.GetAPIReader(),
		recorder: mgr.GetEventRecorder("banlieue-controller"), assumed: newAssumedPlacements(), applied: newAppliedMachines()}); err != nil {
		return fmt.Errorf("creating virtualmachine controller: %w", err)
	}

	if err := ctrl.NewControllerManagedBy(mgr).
		Named("vmimage-ready").
		For(&banlieuev1.VMImage{}).
		// A Provider deleted leaves rows in the images, which the reconciler removes.
		Watches(&banlieuev1.Provider{}, handler.EnqueueRequestsFromMapFunc(allImages(mgr.GetClient())),
			builder.WithPredicates(predicate.Funcs{
				CreateFunc: func(event.CreateEvent) bool { return false },
				UpdateFunc: func(event.UpdateEvent) bool { return false },
				DeleteFunc: func(event.DeleteEvent) bool { return true },
			})).
		WithOptions(app.ControllerOptions(opts.Workers)).
		Complete(&vmImageReconciler{client: mgr.GetClient(), apiReader: mgr.GetAPIReader()}); err != nil {
		return fmt.Errorf("creating vmimage controller: %w", err)
	}

	initReadyMetrics()
	initMigrationMetrics()
	// A second Setup in one process (tests) keeps the first collector rather than failing.
	var already prometheus.AlreadyRegisteredError
	if err := metrics.Registry.Register(newVMPhaseCollector(mgr.GetClient(), opts.Namespace)); err != nil && !errors.As(err, &already) {
		return fmt.Errorf("registering banlieue_virtualmachines: %w", err)
	}

	inUse := ctrl.NewControllerManagedBy(mgr).
		Named("provider-in-use").
		For(&banlieuev1.Provider{}, inScope).
		WithOptions(app.ControllerOptions(opts.Workers))
	for _, k := range allInfraKinds() {
		inUse = inUse.Watches(k.newObject(), handler.EnqueueRequestsFromMapFunc(providerOfMachine(k)), inScope,
			builder.WithPredicates(providerRefChanged(k)))
	}
	if err := inUse.Complete(&providerInUseReconciler{client: mgr.GetClient(), apiReader: mgr.GetAPIReader()}); err != nil {
		return fmt.Errorf("creating provider-in-use controller: %w", err)
	}
	if err := ctrl.NewControllerManagedBy(mgr).
		Named("provider-placement").
		For(&banlieuev1.Provider{}, inScope).
		Watches(&banlieuev1.VirtualMachine{}, handler.EnqueueRequestsFromMapFunc(providerOfVM), inScope).
		Watches(&banlieuev1.VirtualMachineMigration{}, handler.EnqueueRequestsFromMapFunc(providerOfMigration), inScope).
		WithOptions(app.ControllerOptions(opts.Workers)).
		Complete(&providerPlacementReconciler{client: mgr.GetClient(), recorder: mgr.GetEventRecorder("banlieue-controller"), namespace: opts.Namespace}); err != nil {
		return fmt.Errorf("creating provider-placement controller: %w", err)
	}
	if err := ctrl.NewControllerManagedBy(mgr).
		Named("virtualmachinemigration").
		For(&banlieuev1.VirtualMachineMigration{}, inScope).
		Watches(&banlieuev1.VirtualMachine{}, handler.EnqueueRequestsFromMapFunc(migrationsOfVM(mgr.GetClient())), inScope).
		Watches(&infrav1.LibvirtMachine{}, handler.EnqueueRequestsFromMapFunc(migrationsOfVM(mgr.GetClient())), inScope).
		Watches(&banlieuev1.VirtualMachineMigration{}, handler.EnqueueRequestsFromMapFunc(migrationsOfVM(mgr.GetClient())), inScope,
			builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
				// Only an end (or a deletion) can free the VM for a waiting migration.
				o, n := e.ObjectOld.(*banlieuev1.VirtualMachineMigration), e.ObjectNew.(*banlieuev1.VirtualMachineMigration)
				return o.Status.Phase != n.Status.Phase || !n.DeletionTimestamp.IsZero()
			}})).
		WithOptions(app.ControllerOptions(opts.Workers)).
		Complete(&migrationReconciler{client: mgr.GetClient(), vms: &virtualMachineReconciler{client: mgr.GetClient(),
			apiReader: mgr.GetAPIReader()}}); err != nil {
		return fmt.Errorf("creating virtualmachinemigration controller: %w", err)
	}
	if err := setupSnapshots(mgr, inScope, opts); err != nil {
		return err
	}
	if err := setupExports(mgr, opts, inScope); err != nil {
		return fmt.Errorf("creating virtualmachineexport controller: %w", err)
	}
	if err := setupCAPIPlacement(mgr); err != nil {
		return fmt.Errorf("setting up the Cluster API machine placement: %w", err)
	}
	if err := setupLibvirtClusters(mgr); err != nil {
		return fmt.Errorf("creating libvirtcluster controller: %w", err)
	}
	return nil
}

// allImages enqueues every VMImage.
func allImages(c client.Client) handler.MapFunc {
	return func(ctx context.Context, _ client.Object) []reconcile.Request {
		var images banlieuev1.VMImageList
		if err := c.List(ctx, &images); err != nil {
			return nil // the images' own resync removes the rows later
		}
		out := make([]reconcile.Request, 0, len(images.Items))
		for _, img := range images.Items {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&img)})
		}
		return out
	}
}

// vmMapper finds the VMs an event on another object concerns.
type vmMapper struct {
	client    client.Client
	namespace string
}

// byIndex maps a cluster-scoped VMImage or VMClass to the VMs referencing it by name.
func (m *vmMapper) byIndex(index string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		return m.list(ctx, client.MatchingFields{index: o.GetName()}, client.InNamespace(m.namespace))
	}
}

func (m *vmMapper) list(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
	var vms banlieuev1.VirtualMachineList
	if err := m.client.List(ctx, &vms, opts...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing VirtualMachines to requeue")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(vms.Items))
	for _, vm := range vms.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&vm)})
	}
	return reqs
}
