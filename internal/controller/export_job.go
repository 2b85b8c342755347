package controller

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/jobbounds"
	"banlieue.io/banlieue/internal/jobimage"
	"banlieue.io/banlieue/internal/operator"
	"banlieue.io/banlieue/internal/vmexport/exportjob"
)

// The export Jobs live in the build namespace beside the import Jobs; the controller reads them
// and their pods by name and label, uncached, and creates them. Nothing else there.
// +kubebuilder:rbac:groups=batch,namespace=banlieue-imagebuild,resources=jobs,verbs=get;create
// +kubebuilder:rbac:groups="",namespace=banlieue-imagebuild,resources=pods,verbs=list
// +kubebuilder:rbac:groups=infrastructure.banlieue.io,resources=libvirtmachines,verbs=get

// ExportJobs configure the export Jobs (docs/guides/libvirt-provider.md, "Exporting a disk off
// its host"). Without an Image no Job is made and a stopped VM's export waits Pending.
type ExportJobs struct {
	// Namespace is the build namespace, where the Provider's export account lives.
	Namespace string
	// Image is the banlieue image the Jobs run (--export-image).
	Image string
	// InsecureRegistries are the registries (host or host:port) export Jobs may push to over
	// plain HTTP (--export-insecure-registry).
	InsecureRegistries []string
	Bounds             jobbounds.Bounds
	Pull               jobimage.Pull
	Tolerations        []corev1.Toleration
}

// exportPoll is how often an export in flight reads its Job: the Jobs are read by name, not
// watched, so the controller holds no cache of the build namespace.
const exportPoll = 15 * time.Second

// exportJobStatus is the export's next status from its Job (nil: none by the export's name) and
// the termination message of the Job's pod. A Job of the export's name that is not the export's
// (its annotation names another) is never read as its result.
func exportJobStatus(e *banlieuev1.VirtualMachineExport, job *batchv1.Job, message string, now metav1.Time) banlieuev1.VirtualMachineExportStatus {
	st := *e.Status.DeepCopy()
	st.ObservedGeneration = e.Generation
	set := func(o exportjob.Outcome) {
		st.Phase = o.Phase
		status := metav1.ConditionFalse
		if o.Phase == banlieuev1.ExportReady {
			status = metav1.ConditionTrue
		}
		banlieuev1.SetCondition(&st.Conditions, e.Generation, metav1.Condition{Type: banlieuev1.ConditionReady,
			Status: status, Reason: o.Reason, Message: o.Message})
		if o.Phase.Final() && st.CompletedAt == nil {
			st.CompletedAt = &now
		}
	}
	name := exportjob.JobName(string(e.UID))
	switch {
	case job == nil:
		set(exportjob.Outcome{Phase: banlieuev1.ExportFailed, Reason: banlieuev1.ReasonExportJobFailed, Message: fmt.Sprintf(
			"Job %s was deleted before it reported: the copy's outcome is unknown; create another export", name)})
	case job.Annotations[exportjob.AnnotationExport] != exportjob.ExportRef(e.Namespace, e.Name, string(e.UID)):
		set(exportjob.Outcome{Phase: banlieuev1.ExportFailed, Reason: banlieuev1.ReasonExportJobFailed, Message: fmt.Sprintf(
			"Job %s/%s is not this export's (its %s annotation is %q): it is left alone; create another export",
			job.Namespace, job.Name, exportjob.AnnotationExport, job.Annotations[exportjob.AnnotationExport])})
	default:
		o := exportjob.JobOutcome(job, message, e.Spec.Target.Registry.Repository)
		set(o)
		st.JobName = job.Name
		if st.StartedAt == nil {
			// The pass that created the Job may not have written its status (a conflict, a
			// restart): the Job's creation is when the export started.
			started := job.CreationTimestamp
			st.StartedAt = &started
		}
		if o.Phase == banlieuev1.ExportReady {
			st.Digest, st.ImageRef, st.SizeBytes = o.Digest, o.Image, &o.Size
		}
	}
	return st
}

// exportTargetRefusal is why the Job cannot serve the export's target, "" when it can. The Job
// runs in the build namespace, where a claim or a Secret of the export's namespace cannot be
// mounted, and banlieue-controller may not copy a Secret there (banlieue-controller-secrets).
func exportTargetRefusal(e *banlieuev1.VirtualMachineExport) string {
	switch t := e.Spec.Target; {
	case t.PersistentVolumeClaim != nil:
		return fmt.Sprintf("spec.target.persistentVolumeClaim: claim %s/%s cannot be mounted by the export Job, which runs in the build "+
			"namespace; export to a registry, or into the claim by hand (banlieue provider libvirt export --output-dir)",
			e.Namespace, t.PersistentVolumeClaim.ClaimName)
	case t.Registry == nil:
		return "spec.target: neither persistentVolumeClaim nor registry is set"
	case t.Registry.CredentialsSecretRef != nil:
		return fmt.Sprintf("spec.target.registry.credentialsSecretRef: Secret %s/%s cannot reach the export Job, which runs in the build "+
			"namespace; push to a repository that takes anonymous pushes, or export by hand with DOCKER_CONFIG",
			e.Namespace, t.Registry.CredentialsSecretRef.Name)
	}
	return ""
}

// readExportJob reads the export's Job and its pod's termination message, uncached.
func (r *exportReconciler) readExportJob(ctx context.Context, e *banlieuev1.VirtualMachineExport) (*batchv1.Job, string, error) {
	var job batchv1.Job
	key := client.ObjectKey{Namespace: r.jobs.Namespace, Name: exportjob.JobName(string(e.UID))}
	if err := r.apiReader.Get(ctx, key, &job); apierrors.IsNotFound(err) {
		return nil, "", nil
	} else if err != nil {
		return nil, "", fmt.Errorf("export %s/%s: reading Job %s: %w", e.Namespace, e.Name, key, err)
	}
	var pods corev1.PodList
	if err := r.apiReader.List(ctx, &pods, client.InNamespace(r.jobs.Namespace),
		client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
		return nil, "", fmt.Errorf("export %s/%s: listing the pods of Job %s: %w", e.Namespace, e.Name, key, err)
	}
	return &job, exportjob.TerminationMessage(pods.Items), nil
}

// startExportJob creates the Job for a stopped VM's export: the machine's own volume (its
// status.volumes) on its Provider, run as that Provider's export account. A machine or Provider
// that cannot be exported is a refusal (the message), not an error.
func (r *exportReconciler) startExportJob(ctx context.Context, e *banlieuev1.VirtualMachineExport, vm *banlieuev1.VirtualMachine) (refusal string, err error) {
	if msg := exportTargetRefusal(e); msg != "" {
		return msg, nil
	}
	var m infrav1.LibvirtMachine
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: vm.Namespace, Name: vm.Name}, &m); apierrors.IsNotFound(err) {
		return fmt.Sprintf("spec.virtualMachineName: VirtualMachine %s has no LibvirtMachine: only a libvirt VM that was created on a host is exported", vm.Name), nil
	} else if err != nil {
		return "", fmt.Errorf("export %s/%s: reading LibvirtMachine %s: %w", e.Namespace, e.Name, vm.Name, err)
	}
	vol, err := exportjob.MachineVolume(&m, "")
	if err != nil {
		return "spec.virtualMachineName: " + err.Error(), nil
	}
	var p banlieuev1.Provider
	if err := r.client.Get(ctx, m.ProviderKey(), &p); err != nil {
		return "", fmt.Errorf("export %s/%s: reading Provider %s: %w", e.Namespace, e.Name, m.ProviderKey(), err)
	}
	job := exportjob.Job(exportjob.JobSpec{
		Export:    e,
		Volume:    exportjob.VolumeRef{ProviderNamespace: p.Namespace, Provider: p.Name, Domain: m.Spec.DomainName, Pool: m.Spec.Pool, Volume: vol},
		Namespace: r.jobs.Namespace, Image: r.jobs.Image,
		ServiceAccount:   operator.ExportAccountName(operator.WorkloadName(p.Spec.ProviderClassRef.Name, p.Namespace, p.Name)),
		InsecureRegistry: exportjob.InsecureRegistry(e.Spec.Target.Registry.Repository, r.jobs.InsecureRegistries),
		Bounds:           r.jobs.Bounds, Pull: r.jobs.Pull, Tolerations: r.jobs.Tolerations,
	})
	if err := r.client.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("export %s/%s: creating Job %s/%s: %w", e.Namespace, e.Name, job.Namespace, job.Name, err)
	}
	return "", nil
}
