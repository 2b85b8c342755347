package imagebuilder

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/imagebuilder/build"
	"banlieue.io/banlieue/internal/jobbounds"
	"banlieue.io/banlieue/internal/jobimage"
	"banlieue.io/banlieue/internal/ssa"
)

// ControllerName names the controller in logs and in controller-runtime's controller_runtime_reconcile_* series.
const ControllerName = "imagebuilder"

// reconcileTimeout bounds one pass: a handful of API calls.
const reconcileTimeout = 30 * time.Second

// jobNameLabel is the label the Job controller puts on a Job's pods (Kubernetes ≥ 1.27).
const jobNameLabel = "batch.kubernetes.io/job-name"

// Reconciler runs one build Job per VMImage with a Url source and mirrors it into
// status.buildArtifact (docs/guides/libvirt-provider.md, "6. Get an image onto the host"). It never touches image data: the Job does.
type Reconciler struct {
	Client client.Client
	// APIReader lists a finished Job's pods for their termination message. Uncached on
	// purpose: a pod informer would hold every pod of the cluster to read one message per
	// build. Nil falls back to Client.
	APIReader client.Reader
	// BuildNamespace holds the artifacts PVC and the build Jobs.
	BuildNamespace string
	// BuildImage is the container image of build Jobs (the banlieue image).
	BuildImage string
	// ArtifactsPVC is the PVC the builds write to and the imports read from.
	ArtifactsPVC string
	// NodeSelector and Tolerations place build pods (--build-node-selector, --build-toleration).
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
	// Limits are passed to every build Job.
	Limits build.Limits
	// Bounds are every build Job's deadline and resources; without a deadline (a Reconciler
	// made by a test or bench), jobbounds.DefaultBuild.
	Bounds jobbounds.Bounds
	// Pull is how build pods pull BuildImage.
	Pull jobimage.Pull
	// CAConfigMap is the ConfigMap of CA bundles build pods trust beside the image's roots.
	CAConfigMap string
	// Workers is how many VMImages are reconciled at once (--workers); zero means one.
	Workers int

	// recorder announces builds started, published and failed (events.go); set up with the
	// manager.
	recorder events.EventRecorder
}

// SetupWithManager watches VMImages (spec changes only: status is written by three managers,
// and none of the others' writes changes what to build) and the build Jobs.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	switch {
	case r.BuildNamespace == "":
		return errors.New("imagebuilder: BuildNamespace is required")
	case r.BuildImage == "":
		return errors.New("imagebuilder: BuildImage is required")
	case r.ArtifactsPVC == "":
		return errors.New("imagebuilder: ArtifactsPVC is required")
	}
	r.recorder = mgr.GetEventRecorder(recorderName)
	builds.Init()
	isBuildJob := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetLabels()[banlieuev1.LabelComponent] == ComponentBuild
	})
	return ctrl.NewControllerManagedBy(mgr).Named(ControllerName).
		For(&banlieuev1.VMImage{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&batchv1.Job{}, builder.WithPredicates(isBuildJob)).
		WithOptions(app.ControllerOptions(r.Workers)).
		Complete(r)
}

// Reconcile ensures the image's build Job and mirrors it.
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
	src, index, ok := urlSource(&img)
	if !ok {
		return ctrl.Result{RequeueAfter: app.RequeueLong}, nil
	}
	job, err := r.getJob(ctx, BuildJobName(img.Name))
	if err != nil {
		return ctrl.Result{}, err
	}
	kind := urlKind(src.ImportFrom)
	var artifact *banlieuev1.BuildArtifact
	switch {
	case job != nil && !job.DeletionTimestamp.IsZero():
		artifact = pendingArtifact(kind, "waiting for the previous build Job "+job.Name+" to go away")
	case job != nil && stale(job, src):
		// The Job's deletion event brings the pass that creates the new one; creating it now
		// could race a Job that is still being deleted.
		if err := r.deleteJob(ctx, job); err != nil {
			return ctrl.Result{}, err
		}
		artifact = pendingArtifact(kind, "the source changed; replacing build Job "+job.Name)
	case checkSource(src, index) != nil:
		artifact = invalidSourceArtifact(kind, checkSource(src, index))
	case job == nil:
		if job, err = r.createJob(ctx, &img, src, kind); err != nil {
			return ctrl.Result{}, err
		}
		artifact = mirror(job, r.ArtifactsPVC, "")
	default:
		if artifact, err = r.observe(ctx, &img, src, job); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := r.applyStatus(ctx, &img, artifact); err != nil {
		return ctrl.Result{}, err
	}
	if job != nil && artifact.JobRef != nil && artifact.JobRef.Name == job.Name {
		recordBuild(job, artifact)
	}
	if typ, reason, ok := buildTransition(img.Status.BuildArtifact, artifact); ok {
		// The message went through applyStatus: bounded, and the source URL redacted.
		r.recorder.Eventf(&img, nil, typ, reason, "Build", "%s", artifact.Message)
	}
	if artifact.Phase == banlieuev1.BuildReady || artifact.Phase == banlieuev1.BuildFailed {
		return ctrl.Result{RequeueAfter: app.RequeueLong}, nil
	}
	return ctrl.Result{RequeueAfter: app.RequeueDefault}, nil
}

// observe mirrors an existing, current Job, reading the deciding pod's termination message once
// the Job finished.
func (r *Reconciler) observe(ctx context.Context, img *banlieuev1.VMImage, src banlieuev1.ImageSource,
	job *batchv1.Job) (*banlieuev1.BuildArtifact, error) {
	state := stateOf(job)
	if state != jobSucceeded && state != jobFailed {
		return mirror(job, r.ArtifactsPVC, ""), nil
	}
	term, found, err := r.termination(ctx, job, state == jobSucceeded)
	if err != nil {
		return nil, err
	}
	if state == jobSucceeded {
		if cur := img.Status.BuildArtifact; !found && cur != nil && cur.Phase == banlieuev1.BuildReady &&
			cur.JobRef != nil && cur.JobRef.Name == job.Name {
			// The pods are gone (pod GC) but the status already holds what they reported;
			// every replacement of the Job goes through Pending, so it is this Job's.
			return cur, nil
		}
		if res, err := parseResult(term); err == nil && outputKindMismatch(job, res) {
			return r.rebuildAs(ctx, img, src, job, res.Kind)
		}
	}
	return mirror(job, r.ArtifactsPVC, term), nil
}

// rebuildAs replaces a Job whose output name assumed the wrong kind by one with the kind the
// build found. The new Job is created in the same pass, carrying the kind in its annotation:
// a pass that found no Job would guess from the URL again and repeat the wrong build. Deleting
// a Job without finalizers is synchronous, so the name is free by then.
func (r *Reconciler) rebuildAs(ctx context.Context, img *banlieuev1.VMImage, src banlieuev1.ImageSource,
	job *batchv1.Job, kind banlieuev1.ArtifactKind) (*banlieuev1.BuildArtifact, error) {
	if err := r.deleteJob(ctx, job); err != nil {
		return nil, err
	}
	if _, err := r.createJob(ctx, img, src, kind); err != nil {
		return nil, err
	}
	return pendingArtifact(kind, fmt.Sprintf("the source turned out to be of kind %s, not %s; rebuilding it as %s",
		kind, jobKind(job), artifactFile(img.Name, kind))), nil
}

func (r *Reconciler) getJob(ctx context.Context, name string) (*batchv1.Job, error) {
	var job batchv1.Job
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.BuildNamespace, Name: name}, &job)
	if err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return &job, nil
}

// bounds are r.Bounds, or the defaults when unset: a zero deadline would fail every build Job
// at once, and a zero GOMEMLIMIT would keep its collector running without pause.
func (r *Reconciler) bounds() jobbounds.Bounds {
	if r.Bounds.Deadline == 0 {
		return jobbounds.DefaultBuild()
	}
	return r.Bounds
}

func (r *Reconciler) createJob(ctx context.Context, img *banlieuev1.VMImage, src banlieuev1.ImageSource,
	kind banlieuev1.ArtifactKind) (*batchv1.Job, error) {
	spec := jobSpec{
		Image: img, Source: src, Kind: kind, Namespace: r.BuildNamespace, ContainerImage: r.BuildImage,
		PVC: r.ArtifactsPVC, NodeSelector: r.NodeSelector, Tolerations: r.Tolerations, Limits: r.Limits,
		Bounds: r.bounds(), Pull: r.Pull, CAConfigMap: r.CAConfigMap,
	}
	// The Secret first: a pod started before it would wait for it (CreateContainerConfigError),
	// and one started from an earlier Secret would build the previous source.
	secret := sourceSecret(spec)
	if err := r.Client.Apply(ctx, secret, client.FieldOwner(banlieuev1.FieldManagerImagebuilder), client.ForceOwnership); err != nil {
		return nil, fmt.Errorf("applying build Secret %s/%s: %w", spec.Namespace, *secret.Name, err)
	}
	job := buildJob(spec)
	if err := ssa.Apply(ctx, r.Client, job, banlieuev1.FieldManagerImagebuilder); err != nil {
		return nil, fmt.Errorf("creating build Job %s/%s: %w", job.Namespace, job.Name, err)
	}
	// Named by the Job alone: the source URL may carry a credential.
	r.recorder.Eventf(img, job, corev1.EventTypeNormal, banlieuev1.ReasonBuildStarted, "Build",
		"build Job %s/%s created for a %s artifact", job.Namespace, job.Name, kind)
	return job, nil
}

// deleteJob deletes the Job in the background: the Job object goes at once and its pods are
// collected after. The UID precondition keeps a pass working from a stale cache from deleting
// the Job's replacement.
func (r *Reconciler) deleteJob(ctx context.Context, job *batchv1.Job) error {
	err := r.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground),
		client.Preconditions{UID: &job.UID})
	return client.IgnoreNotFound(err)
}

// termination reads the termination message of the pod that decided the Job's outcome.
func (r *Reconciler) termination(ctx context.Context, job *batchv1.Job, succeeded bool) (string, bool, error) {
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	var pods corev1.PodList
	if err := reader.List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingLabels{jobNameLabel: job.Name}); err != nil {
		return "", false, fmt.Errorf("listing the pods of build Job %s/%s: %w", job.Namespace, job.Name, err)
	}
	msg, found := podTermination(pods.Items, job.UID, succeeded)
	return msg, found, nil
}

// applyStatus applies buildArtifact, the only status field the imagebuilder owns, even when it
// equals the cached VMImage's: the imagebuilder ignores status events, so the cached copy may not
// have seen its last write yet. An apply that changes nothing is not stored and wakes no watcher.
func (r *Reconciler) applyStatus(ctx context.Context, img *banlieuev1.VMImage, artifact *banlieuev1.BuildArtifact) error {
	// Bounded and redacted here, where every message passes: a build's error text has no limit
	// of its own, and the tail of a crashed build's log may quote the source URL.
	if src, _, ok := urlSource(img); ok {
		artifact.Message = build.RedactSourceIn(artifact.Message, src.ImportFrom)
	}
	artifact.Message = banlieuev1.ConditionMessage(artifact.Message)
	return ssa.ApplyStatus(ctx, r.Client, img, &banlieuev1.VMImageStatus{BuildArtifact: artifact}, banlieuev1.FieldManagerImagebuilder)
}
