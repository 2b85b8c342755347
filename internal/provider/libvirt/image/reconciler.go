package image

import (
	"context"
	"fmt"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/jobbounds"
	"banlieue.io/banlieue/internal/jobimage"
	"banlieue.io/banlieue/internal/naming"
	providerlibvirt "banlieue.io/banlieue/internal/provider/libvirt"
	"banlieue.io/banlieue/internal/provider/libvirt/hostconn"
	"banlieue.io/banlieue/internal/ssa"
	"banlieue.io/banlieue/pkg/libvirt"
)

// reconcileTimeout bounds one pass: API calls plus, for BackingFile sources, a volume lookup
// per verified pool of every Provider.
const reconcileTimeout = 2 * time.Minute

// Reconciler publishes the libvirt perProvider rows of every VMImage and runs the import Jobs
// of Url sources (docs/guides/libvirt-provider.md, "6. Get an image onto the host"). It never moves image data itself: that is the Jobs' work.
type Reconciler struct {
	Client client.Client
	// APIReader reads Provider Secrets and ConfigMaps uncached (the provider may only get
	// them by name) for the BackingFile volume check.
	APIReader   client.Reader
	Connections *hostconn.Connections
	// ProviderName, when set, restricts the controller to that Provider's row (docs/decisions.md, "One
	// provider process per Provider").
	ProviderName string
	// BuildNamespace holds the artifacts PVC and the import Jobs.
	BuildNamespace string
	// ImportImage is the container image of import Jobs.
	ImportImage string
	// ImportServiceAccount runs the import Jobs, in BuildNamespace.
	ImportServiceAccount string
	// Tolerations are copied onto import Jobs (--build-toleration).
	Tolerations []corev1.Toleration
	// WatchJobs says the process may list and watch Jobs in BuildNamespace, so they are watched
	// and read from the cache. Without that grant they are read uncached (a Job informer would
	// never sync, and the controller's start would fail): every zone then reports the refusal.
	WatchJobs bool
	// Bounds are every import Job's deadline and resources; without a deadline (a Reconciler
	// made by a test or bench), jobbounds.DefaultImport.
	Bounds jobbounds.Bounds
	// Pull is how import pods pull ImportImage.
	Pull jobimage.Pull
	// Workers is how many VMImages are reconciled at once (--workers); zero means one.
	Workers int
	// OldBaseGrace is how long after a rebuilt artifact's import finished the bases it
	// replaced are left alone whatever else holds; zero means defaultOldBaseGrace.
	OldBaseGrace time.Duration

	// recorder announces imports started, succeeded and failed (events.go); set up with the
	// manager.
	recorder events.EventRecorder
}

// SetupWithManager watches VMImages, their import Jobs, and Providers: a Provider whose
// verified pools change changes every image's row. A LibvirtMachine's deletion, which comes
// after its teardown deleted its overlay, may free the old base it booted from.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.recorder = mgr.GetEventRecorder(providerlibvirt.RecorderName)
	imports.Init()
	b := ctrl.NewControllerManagedBy(mgr).Named("vmimage-libvirt").For(&banlieuev1.VMImage{})
	if r.WatchJobs {
		b = b.Owns(&batchv1.Job{})
	}
	return b.Watches(&banlieuev1.Provider{}, handler.EnqueueRequestsFromMapFunc(r.allImages)).
		Watches(&infrav1.LibvirtMachine{}, handler.EnqueueRequestsFromMapFunc(r.machineImages),
			builder.WithPredicates(predicate.Funcs{
				CreateFunc:  func(event.CreateEvent) bool { return false },
				UpdateFunc:  func(event.UpdateEvent) bool { return false },
				GenericFunc: func(event.GenericEvent) bool { return false },
			})).
		WithOptions(app.ControllerOptions(r.Workers)).
		Complete(r)
}

func (r *Reconciler) allImages(ctx context.Context, _ client.Object) []reconcile.Request {
	var list banlieuev1.VMImageList
	if err := r.Client.List(ctx, &list); err != nil {
		log.FromContext(ctx).Error(err, "listing VMImages for a Provider change")
		return nil
	}
	reqs := make([]reconcile.Request, len(list.Items))
	for i := range list.Items {
		reqs[i] = reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}}
	}
	return reqs
}

// fieldManager is the provider's SSA manager. Serving one Provider, each process owns only its
// own row; under one shared manager name a process would, by applying its row alone, remove
// the rows the others applied, so each gets a manager of its own.
func (r *Reconciler) fieldManager() string {
	if r.ProviderName == "" {
		return banlieuev1.FieldManagerProviderLibvirt
	}
	return banlieuev1.FieldManagerProviderLibvirt + "/" + naming.Capped(r.ProviderName)
}

// Reconcile computes and applies the image's libvirt rows.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, reconcileTimeout)
	defer cancel()
	var img banlieuev1.VMImage
	if err := r.Client.Get(ctx, req.NamespacedName, &img); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !img.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	src, ok := libvirtSource(&img, providerlibvirt.ClassName)
	if !ok {
		return ctrl.Result{RequeueAfter: app.RequeueLong}, nil
	}
	providers, err := r.providers(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(providers) == 0 {
		return ctrl.Result{RequeueAfter: app.RequeueLong}, nil
	}

	rows := make([]banlieuev1.ProviderImageStatus, 0, len(providers))
	allReady := true
	var collect []*banlieuev1.Provider
	for i := range providers {
		row, err := r.row(ctx, &img, src, &providers[i])
		if err != nil {
			return ctrl.Result{}, err
		}
		allReady = allReady && row.Ready
		rows = append(rows, row)
		if src.Kind == banlieuev1.SourceURL && row.Ready && row.ResolvedRef == artifactVolume(&img) &&
			publishedOn(img.Status.PerProvider, &providers[i], row.ResolvedRef) {
			collect = append(collect, &providers[i])
		}
	}
	sortRows(rows)
	if !rowsApplied(&img.Status, img.Generation, rows, r.ProviderName != "") {
		status := banlieuev1.VMImageStatus{PerProvider: rows, ObservedGeneration: img.Generation}
		if err := ssa.ApplyStatus(ctx, r.Client, &img, &status, r.fieldManager()); err != nil {
			return ctrl.Result{}, err
		}
	}
	for _, e := range importTransitions(img.Status.PerProvider, rows, src.Kind == banlieuev1.SourceURL) {
		r.recorder.Eventf(&img, nil, e.eventType, e.reason, "Import", "%s", e.note)
	}
	// Old bases go only after the row naming their successor is applied, and only for rows
	// the previous pass had already published on it (publishedOn).
	requeue := app.RequeueLong
	for _, p := range collect {
		if wait := r.collectOldBases(ctx, &img, p, artifactVolume(&img)); wait > 0 {
			requeue = min(requeue, wait)
		}
	}
	if !allReady {
		return ctrl.Result{RequeueAfter: app.RequeueDefault}, nil
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// providers are the libvirt Providers in scope: all of them, or the one this process serves.
func (r *Reconciler) providers(ctx context.Context) ([]banlieuev1.Provider, error) {
	var list banlieuev1.ProviderList
	if err := r.Client.List(ctx, &list); err != nil {
		return nil, err
	}
	var out []banlieuev1.Provider
	for _, p := range list.Items {
		if p.Spec.ProviderClassRef.Name != providerlibvirt.ClassName || !p.DeletionTimestamp.IsZero() {
			continue
		}
		if r.ProviderName != "" && p.Name != r.ProviderName {
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

// row is one Provider's row. Only API failures are errors; everything about the image or the
// host is reported in the row.
func (r *Reconciler) row(ctx context.Context, img *banlieuev1.VMImage, src banlieuev1.ImageSource,
	p *banlieuev1.Provider) (banlieuev1.ProviderImageStatus, error) {
	switch src.Kind {
	case banlieuev1.SourceBackingFile:
		return r.backingFileRow(ctx, p, backingFileVolume(src.Ref)), nil
	case banlieuev1.SourceURL:
		pools := targetPools(p)
		if row, gated := buildGate(p, img.Status.BuildArtifact); gated {
			return gatedZones(row, pools), nil
		}
		if len(pools) == 0 {
			return notReadyRow(p, banlieuev1.ReasonNoFailureDomains, "the Provider has no verified storage pool to import into"), nil
		}
		zones := make([]banlieuev1.ImageZoneStatus, 0, len(pools))
		for _, pool := range pools {
			zone, err := r.importZone(ctx, img, p, pool)
			if err != nil {
				return banlieuev1.ProviderImageStatus{}, err
			}
			zones = append(zones, zone)
		}
		return urlRow(p, artifactVolume(img), zones), nil
	default:
		return notReadyRow(p, banlieuev1.ReasonUnsupportedSourceKind,
			fmt.Sprintf("source kind %s is not supported by the libvirt provider; use BackingFile or Url", src.Kind)), nil
	}
}

// backingFileRow looks the volume up in each verified pool of the Provider's host.
func (r *Reconciler) backingFileRow(ctx context.Context, p *banlieuev1.Provider, volume string) banlieuev1.ProviderImageStatus {
	pools := targetPools(p)
	if len(pools) == 0 {
		return notReadyRow(p, banlieuev1.ReasonNoFailureDomains, "the Provider has no verified storage pool")
	}
	host, err := r.Connections.Connect(ctx, r.APIReader, p)
	if err != nil {
		return notReadyRow(p, banlieuev1.ReasonVolumeNotFound, "cannot reach the Provider's host to look for volume "+volume+": "+err.Error())
	}
	zones := make([]banlieuev1.ImageZoneStatus, 0, len(pools))
	for _, name := range pools {
		zones = append(zones, volumeZone(ctx, host, name, volume))
	}
	return backingFileRow(p, volume, zones)
}

func volumeZone(ctx context.Context, host *libvirt.Client, poolName, volume string) banlieuev1.ImageZoneStatus {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	pool, err := host.StoragePoolLookupByName(ctx, poolName)
	if err == nil {
		_, err = host.StorageVolLookupByName(ctx, pool, volume)
	}
	switch {
	case err == nil:
		return banlieuev1.ImageZoneStatus{Name: poolName, Ready: true, Reason: banlieuev1.ReasonReconciled, ResolvedRef: volume}
	case libvirt.IsNotFound(err):
		return notReadyZone(poolName, banlieuev1.ReasonVolumeNotFound, fmt.Sprintf("volume %s is not in pool %s", volume, poolName))
	default:
		return notReadyZone(poolName, banlieuev1.ReasonVolumeNotFound, fmt.Sprintf("looking up volume %s in pool %s: %v", volume, poolName, err))
	}
}

// bounds are r.Bounds, or the defaults when unset: a zero deadline would fail every import Job
// at once, and a zero GOMEMLIMIT would keep its collector running without pause.
func (r *Reconciler) bounds() jobbounds.Bounds {
	if r.Bounds.Deadline == 0 {
		return jobbounds.DefaultImport()
	}
	return r.Bounds
}

// importJob is the import Job this provider makes for img, p and pool, run as account.
func (r *Reconciler) importJob(img *banlieuev1.VMImage, p *banlieuev1.Provider, pool, account string) *batchv1.Job {
	return importJob(importJobSpec{
		Image: img, Provider: p, Pool: pool, Volume: artifactVolume(img), Namespace: r.BuildNamespace,
		ContainerImage: r.ImportImage, ServiceAccount: account, Tolerations: r.Tolerations,
		Bounds: r.bounds(), Pull: r.Pull,
	})
}

// importZone adopts the pool's import Job or creates it. An existing Job is never updated: a
// running multi-gigabyte transfer must not be restarted by a re-reconcile. A Job of the
// expected name is adopted only when it proves to be this import's (jobOwnership); one of
// banlieue's for an older artifact is replaced, by deleting it (its deletion event brings the
// next pass, which creates the new one); any other is reported and left alone. A new Job runs
// as the provider's own import account, or as the build namespace's default while that account
// does not exist (importAccount).
func (r *Reconciler) importZone(ctx context.Context, img *banlieuev1.VMImage, p *banlieuev1.Provider, pool string) (banlieuev1.ImageZoneStatus, error) {
	want := r.importJob(img, p, pool, r.ImportServiceAccount)
	var job batchv1.Job
	err := r.jobs().Get(ctx, client.ObjectKeyFromObject(want), &job)
	switch {
	case apierrors.IsNotFound(err):
		account := r.importAccount(ctx)
		want = r.importJob(img, p, pool, account)
		// Create, not apply: an apply would take over a Job of this name created since the Get.
		if err := r.Client.Create(ctx, want, client.FieldOwner(banlieuev1.FieldManagerProviderLibvirt)); err != nil {
			return notReadyZone(pool, banlieuev1.ReasonImportFailed, fmt.Sprintf("creating import Job %s/%s: %v", want.Namespace, want.Name, err)), nil
		}
		return notReadyZone(pool, banlieuev1.ReasonImporting, "import Job created"+fallbackNote(r.BuildNamespace, r.ImportServiceAccount, account)), nil
	case apierrors.IsForbidden(err):
		return notReadyZone(pool, banlieuev1.ReasonJobsNotGranted, jobsNotGranted(p, want, err)), nil
	case err != nil:
		return notReadyZone(pool, banlieuev1.ReasonImportFailed, fmt.Sprintf("reading import Job %s/%s: %v", want.Namespace, want.Name, err)), nil
	}
	want = r.expectedJob(ctx, img, p, pool, &job)
	stale, conflict := jobOwnership(img, p, pool, want, &job)
	switch {
	case conflict != "":
		return notReadyZone(pool, banlieuev1.ReasonImportFailed, conflict), nil
	case !job.DeletionTimestamp.IsZero():
		return notReadyZone(pool, banlieuev1.ReasonImporting, "waiting for the stale import Job to go away"), nil
	case stale:
		if err := r.Client.Delete(ctx, &job, client.PropagationPolicy("Background"),
			client.Preconditions{UID: &job.UID}); client.IgnoreNotFound(err) != nil {
			return banlieuev1.ImageZoneStatus{}, fmt.Errorf("deleting import Job %s/%s of an older artifact: %w", job.Namespace, job.Name, err)
		}
		return notReadyZone(pool, banlieuev1.ReasonImporting, "artifact rebuilt or banlieue upgraded; replacing the import Job"), nil
	}
	// Not stale: the Job imported the image's current artifact.
	recordImport(&job, img.Status.BuildArtifact)
	z := jobZone(pool, &job)
	if !z.Ready {
		z.Message += fallbackNote(r.BuildNamespace, r.ImportServiceAccount, job.Spec.Template.Spec.ServiceAccountName)
	}
	if z.Reason == banlieuev1.ReasonImportFailed {
		z.Message += byHandNote(&job)
	}
	return z, nil
}

// jobsNotGranted is the zone's message when the API server refuses this process a read of its
// import Job. Only RBAC refuses a get (admission sees writes alone), and the provider's only grant
// on Jobs is its class's additionalRules, so the message names that rule and where it lives.
func jobsNotGranted(p *banlieuev1.Provider, job *batchv1.Job, err error) string {
	return fmt.Sprintf("this provider may not read import Job %s/%s: ProviderClass %s lacks the additionalRules "+
		"that grant batch/jobs get, list, watch, create and delete in namespace %s (examples/09-providerclass-libvirt.yaml); "+
		"grant them and restart the provider pod: %v", job.Namespace, job.Name, p.Spec.ProviderClassRef.Name, job.Namespace, err)
}

// jobs reads import Jobs: from the cache when they are watched, else from the API server.
func (r *Reconciler) jobs() client.Reader {
	if r.WatchJobs {
		return r.Client
	}
	return r.APIReader
}

// jobOwnership tells whether job, found at this import's Job name, is banlieue's. It is when its
// controller is this VMImage, by UID, its banlieuev1.AnnotationImportIdentity is the import's
// identity, and it runs as this Provider's own import account (want's): for the current
// artifact, with want's command and arguments (adopt), or for the checksum the Job records
// (stale: an import of an older artifact of this same VMImage, Provider and pool). A Job of the
// current artifact that differs from want only in its image was made by an earlier banlieue
// and is stale too. Anything else yields the conflict message for the zone: banlieue neither
// adopts nor deletes a Job it cannot prove it created.
//
// The account is the proof that the Job is this Provider's: the admission policy
// banlieue-import-jobs (config/admission/import-jobs.yaml) lets a provider account create only
// Jobs that run as its own import account, so labels, owner and annotations, which any
// provider account can copy, are never enough alone. want runs as the build namespace's default
// only while the provider's own account does not exist there (expectedJob), which in the
// operator's build namespace the policy refuses: the fallback is for a namespace of the user's.
func jobOwnership(img *banlieuev1.VMImage, p *banlieuev1.Provider, pool string, want, job *batchv1.Job) (stale bool, conflict string) {
	refuse := func(why string) (bool, string) {
		return false, fmt.Sprintf("import Job %s/%s was not created by banlieue for VMImage %s, Provider %s/%s and pool %q: %s; "+
			"it is left alone (delete it and banlieue creates its own)", job.Namespace, job.Name, img.Name, p.Namespace, p.Name, pool, why)
	}
	owner := metav1.GetControllerOf(job)
	switch {
	case owner == nil:
		return refuse("it has no controller reference")
	case owner.APIVersion != banlieuev1.GroupVersion.String() || owner.Kind != "VMImage" || owner.Name != img.Name:
		return refuse(fmt.Sprintf("its controller is %s %s", owner.Kind, owner.Name))
	case owner.UID != img.UID:
		return refuse(fmt.Sprintf("its controller is an earlier VMImage %s (uid %s, this one is %s)", owner.Name, owner.UID, img.UID))
	}
	recorded := job.Annotations[banlieuev1.AnnotationArtifactChecksum]
	switch job.Annotations[banlieuev1.AnnotationImportIdentity] {
	case importIdentity(img.Name, p.Namespace, p.Name, pool, img.Status.BuildArtifact.Checksum):
	case importIdentity(img.Name, p.Namespace, p.Name, pool, recorded):
		stale = true
	default:
		return refuse("its " + banlieuev1.AnnotationImportIdentity + " annotation is not this import's")
	}
	got, wanted := job.Spec.Template.Spec, want.Spec.Template.Spec
	switch {
	case len(got.Containers) != 1:
		return refuse(fmt.Sprintf("it has %d containers, an import Job one", len(got.Containers)))
	case got.ServiceAccountName != wanted.ServiceAccountName:
		return refuse(fmt.Sprintf("it runs as ServiceAccount %q, not this Provider's import account %q", got.ServiceAccountName, wanted.ServiceAccountName))
	case stale:
		// An older artifact's arguments differ by design; the Job is only deleted.
		return true, ""
	case len(got.Containers[0].Command) != 0 || !sameImportArgs(got.Containers[0].Args, wanted.Containers[0].Args):
		return refuse("its container's command or arguments are not this import's")
	}
	return got.Containers[0].Image != wanted.Containers[0].Image, ""
}

// sameImportArgs tells whether a Job's args are the import want's args, or those without the
// trailing --extent-digest: a Job created for the same artifact before its build published an
// extent digest verifies the same bytes by their sha256, so it is adopted, not redone.
func sameImportArgs(got, want []string) bool {
	if slices.Equal(got, want) {
		return true
	}
	n := len(want)
	return n >= 2 && want[n-2] == "--extent-digest" && slices.Equal(got, want[:n-2])
}
