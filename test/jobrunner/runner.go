// Package jobrunner stands in for the kubelet and the Job controller in tests: envtest runs an
// API server but never runs a pod. The runner watches banlieue's Jobs, runs each Job's container
// with the banlieue binary under test, maps the Job's PVC mounts onto local directories, and
// writes the pod and Job statuses a cluster would, so the real controllers see real Job objects
// and real transitions (active, then succeeded or failed with Complete or Failed conditions).
// What a process writes to $BANLIEUE_TERMINATION_LOG becomes its pod's termination message, as
// /dev/termination-log would. Only the image controller's envtest suites use it
// (internal/provider/libvirt/image: import ownership and old-base collection, which configure the
// reconciler's internals); the image pipeline runs its Jobs as real pods on the node
// (test/node/pipeline_test.go), and so does the lab (hack/lab.sh, docs/guides/real-node.md).
package jobrunner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Selector picks the Jobs the runner runs: banlieue's own.
var Selector = client.MatchingLabels{"app.kubernetes.io/name": "banlieue"}

const (
	pollInterval = 100 * time.Millisecond
	// maxTermination is the kubelet's cap on a termination message.
	maxTermination = 4096
	apiTimeout     = 10 * time.Second
)

// TerminationLogEnv names the file `banlieue imagebuilder build` writes its result to where no
// kubelet provides /dev/termination-log.
const TerminationLogEnv = "BANLIEUE_TERMINATION_LOG"

// Runner runs Jobs. Client, Binary, Kubeconfig and Volumes are required.
type Runner struct {
	Client client.Client
	// Binary is the banlieue binary that replaces the container image.
	Binary string
	// Kubeconfig is given to the processes as KUBECONFIG, in place of a service account.
	Kubeconfig string
	// Volumes maps a PVC name to the local directory that stands for it.
	Volumes map[string]string
	// Env is added to every process's environment (KEY=VALUE), after the runner's own and the
	// container's: what a cluster would provide through the image or the node, e.g.
	// SSL_CERT_FILE naming a test server's CA.
	Env []string
	// Logf receives each finished pod's output; nil discards it.
	Logf func(format string, args ...any)
	// Errorf receives the runner's own failures (API errors); nil uses the log package.
	Errorf func(format string, args ...any)

	mu      sync.Mutex
	started map[types.UID]bool
	wg      sync.WaitGroup
	tmp     string
}

// Start runs r until the test ends, then waits for the pods it started. Runner failures go to
// the test log unless Errorf is set.
func (r *Runner) Start(t testing.TB) {
	t.Helper()
	if r.Errorf == nil {
		r.Errorf = t.Logf
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("jobrunner: %v", err)
		}
	})
}

// Run runs Jobs until ctx is done, then waits for the pods already started: a pod is not killed
// because its kubelet stops, and a process cut short would leave a half-written Job status.
func (r *Runner) Run(ctx context.Context) error {
	switch {
	case r.Client == nil:
		return errors.New("jobrunner: Client is required")
	case r.Binary == "":
		return errors.New("jobrunner: Binary is required")
	case r.Kubeconfig == "":
		return errors.New("jobrunner: Kubeconfig is required")
	}
	tmp, err := os.MkdirTemp("", "jobrunner-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }() // best-effort cleanup of a temporary directory
	r.mu.Lock()
	r.started, r.tmp = map[types.UID]bool{}, tmp
	r.mu.Unlock()
	for ctx.Err() == nil {
		r.poll(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(pollInterval):
		}
	}
	r.wg.Wait()
	return nil
}

func (r *Runner) errorf(format string, args ...any) {
	if r.Errorf != nil {
		r.Errorf(format, args...)
		return
	}
	log.Printf(format, args...)
}

func (r *Runner) poll(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	var jobs batchv1.JobList
	if err := r.Client.List(ctx, &jobs, Selector); err != nil {
		if ctx.Err() == nil {
			r.errorf("jobrunner: listing Jobs: %v", err)
		}
		return
	}
	for i := range jobs.Items {
		job := jobs.Items[i]
		if !job.DeletionTimestamp.IsZero() || finished(&job) {
			continue
		}
		r.mu.Lock()
		seen := r.started[job.UID]
		r.started[job.UID] = true
		r.mu.Unlock()
		if !seen {
			r.wg.Go(func() { r.run(context.WithoutCancel(ctx), &job) })
		}
	}
}

func finished(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// run plays the Job controller for one Job: one pod at a time, retried up to backoffLimit.
func (r *Runner) run(ctx context.Context, job *batchv1.Job) {
	limit := int32(6) // the Job API's default backoffLimit
	if job.Spec.BackoffLimit != nil {
		limit = *job.Spec.BackoffLimit
	}
	var failed int32
	now := metav1.Now()
	job.Status.StartTime = &now
	for attempt := 0; ; attempt++ {
		job.Status.Active, job.Status.Ready = 1, ptr.To[int32](1)
		if err := r.updateJob(ctx, job); err != nil {
			r.errorf("jobrunner: %v", err)
			return
		}
		env, err := r.containerEnv(ctx, job)
		if err != nil {
			// A cluster's pod would wait in CreateContainerConfigError; this one is not started.
			r.errorf("jobrunner: Job %s/%s: %v", job.Namespace, job.Name, err)
			return
		}
		pod, err := r.createPod(ctx, job, attempt)
		if err != nil {
			// What a cluster does too: the Job stays active with no pod (for example when its
			// service account does not exist) until the problem is fixed.
			r.errorf("jobrunner: Job %s/%s: creating pod: %v", job.Namespace, job.Name, err)
			return
		}
		exitCode, output, termination := r.exec(ctx, job, pod.Name, env)
		if r.Logf != nil {
			r.Logf("jobrunner: pod %s exited %d:\n%s", pod.Name, exitCode, output)
		}
		if err := r.finishPod(ctx, pod, exitCode, output, termination); err != nil {
			r.errorf("jobrunner: %v", err)
		}
		job.Status.Active, job.Status.Ready = 0, ptr.To[int32](0)
		if exitCode == 0 {
			job.Status.Succeeded = 1
			end := metav1.Now()
			job.Status.CompletionTime = &end
			setCondition(job, batchv1.JobSuccessCriteriaMet, "CompletionsReached", "Reached expected number of succeeded pods")
			setCondition(job, batchv1.JobComplete, "CompletionsReached", "Reached expected number of succeeded pods")
			if err := r.updateJob(ctx, job); err != nil {
				r.errorf("jobrunner: %v", err)
			}
			return
		}
		failed++
		job.Status.Failed = failed
		if failed > limit {
			setCondition(job, batchv1.JobFailureTarget, "BackoffLimitExceeded", "Job has reached the specified backoff limit")
			setCondition(job, batchv1.JobFailed, "BackoffLimitExceeded", "Job has reached the specified backoff limit")
			if err := r.updateJob(ctx, job); err != nil {
				r.errorf("jobrunner: %v", err)
			}
			return
		}
	}
}

// exec runs the container's argv with the banlieue binary, PVC mount paths rewritten to the
// local directories that stand for the claims. It returns the exit code, the output and what the
// process wrote to its termination log. env is the container's environment (containerEnv).
func (r *Runner) exec(ctx context.Context, job *batchv1.Job, pod string, env []string) (int, string, string) {
	spec := job.Spec.Template.Spec
	c := spec.Containers[0]
	argv := c.Args
	if len(c.Command) > 0 {
		argv = append(append([]string{}, c.Command[1:]...), c.Args...)
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.PersistentVolumeClaim != nil {
				if dir, ok := r.Volumes[v.PersistentVolumeClaim.ClaimName]; ok {
					mounts[m.MountPath] = dir
				}
			}
		}
	}
	args := make([]string, len(argv))
	for i, a := range argv {
		args[i] = a
		for mountPath, dir := range mounts {
			if a == mountPath || strings.HasPrefix(a, mountPath+"/") {
				args[i] = dir + strings.TrimPrefix(a, mountPath)
			}
		}
	}
	// The kubelet's /dev/termination-log: one file per pod, read back after the exit.
	termLog := filepath.Join(r.tmp, pod+".termination-log")
	defer func() { _ = os.Remove(termLog) }() // best effort; absent when the pod wrote none
	cmd := exec.CommandContext(ctx, r.Binary, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+r.Kubeconfig, "POD_NAMESPACE="+job.Namespace, "POD_NAME="+pod,
		TerminationLogEnv+"="+termLog)
	cmd.Env = append(cmd.Env, env...)
	cmd.Env = append(cmd.Env, r.Env...)
	// A runner that dies (the lab's process is killed) takes its pods with it, as a node would.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil && cmd.ProcessState == nil {
		return 127, err.Error(), ""
	}
	termination, _ := os.ReadFile(termLog)
	return cmd.ProcessState.ExitCode(), out.String(), string(termination[:min(len(termination), maxTermination)])
}

// secretWait is how long containerEnv waits for a Secret the container's environment names: the
// kubelet waits for it too, and a controller may create the Secret just after the Job.
const secretWait = 30 * time.Second

// containerEnv is the first container's environment as the kubelet would set it: plain values,
// and values from a key of a Secret in the Job's namespace (env valueFrom.secretKeyRef), waited
// for up to secretWait. Other valueFrom sources are not resolved.
func (r *Runner) containerEnv(ctx context.Context, job *batchv1.Job) ([]string, error) {
	var env []string
	for _, e := range job.Spec.Template.Spec.Containers[0].Env {
		switch {
		case e.ValueFrom == nil:
			env = append(env, e.Name+"="+e.Value)
		case e.ValueFrom.SecretKeyRef != nil:
			v, err := r.secretKey(ctx, job.Namespace, e.ValueFrom.SecretKeyRef)
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
			env = append(env, e.Name+"="+v)
		}
	}
	return env, nil
}

func (r *Runner) secretKey(ctx context.Context, ns string, ref *corev1.SecretKeySelector) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, secretWait)
	defer cancel()
	for {
		var s corev1.Secret
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, &s)
		optional := ptr.Deref(ref.Optional, false)
		switch {
		case err == nil:
			v, ok := s.Data[ref.Key]
			if !ok && !optional {
				return "", fmt.Errorf("secret %s/%s has no key %q", ns, ref.Name, ref.Key)
			}
			return string(v), nil
		case apierrors.IsNotFound(err) && optional:
			return "", nil
		case !apierrors.IsNotFound(err):
			return "", fmt.Errorf("secret %s/%s: %w", ns, ref.Name, err)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("secret %s/%s: still absent after %s", ns, ref.Name, secretWait)
		case <-time.After(pollInterval):
		}
	}
}

func (r *Runner) createPod(ctx context.Context, job *batchv1.Job, attempt int) (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	labels := map[string]string{"job-name": job.Name, "batch.kubernetes.io/job-name": job.Name, "controller-uid": string(job.UID)}
	for k, v := range job.Spec.Template.Labels {
		labels[k] = v
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			// The UID keeps a replaced Job's pods apart: envtest runs no garbage collector.
			Name:      fmt.Sprintf("%s-%s-%d", job.Name, string(job.UID)[:5], attempt),
			Namespace: job.Namespace,
			Labels:    labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		},
		Spec: *job.Spec.Template.Spec.DeepCopy(),
	}
	if err := r.Client.Create(ctx, pod); err != nil {
		return nil, err
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: pod.Spec.Containers[0].Name, Image: pod.Spec.Containers[0].Image,
		Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}
	return pod, r.Client.Status().Update(ctx, pod)
}

// finishPod records the exit as the kubelet would with terminationMessagePolicy
// FallbackToLogsOnError: the message is what the process wrote to its termination log, or, for a
// failed container that wrote none, the tail of its output. (The runner falls back for every
// policy: Jobs that never set one still get a useful message in tests.)
func (r *Runner) finishPod(ctx context.Context, pod *corev1.Pod, exitCode int, output, termination string) error {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	phase, reason, message := corev1.PodSucceeded, "Completed", termination
	if exitCode != 0 {
		phase, reason = corev1.PodFailed, "Error"
		if message == "" {
			message = output[max(0, len(output)-maxTermination):]
		}
	}
	pod.Status.Phase = phase
	pod.Status.ContainerStatuses[0].Ready = false
	pod.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: int32(exitCode), Reason: reason, Message: message, FinishedAt: metav1.Now(),
	}}
	if err := r.Client.Status().Update(ctx, pod); err != nil {
		return fmt.Errorf("pod %s/%s status: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// updateJob writes job.Status over the live Job's, retrying on conflicts with the controllers
// that also touch the Job (metadata only; nothing else writes a Job's status).
func (r *Runner) updateJob(ctx context.Context, job *batchv1.Job) error {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	status := job.Status
	for {
		var live batchv1.Job
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(job), &live); err != nil {
			return fmt.Errorf("job %s/%s: %w", job.Namespace, job.Name, err)
		}
		if live.UID != job.UID {
			return fmt.Errorf("job %s/%s was replaced", job.Namespace, job.Name)
		}
		live.Status = status
		err := r.Client.Status().Update(ctx, &live)
		if err == nil {
			live.DeepCopyInto(job)
			return nil
		}
		if !apierrors.IsConflict(err) {
			return fmt.Errorf("job %s/%s status: %w", job.Namespace, job.Name, err)
		}
	}
}

func setCondition(job *batchv1.Job, typ batchv1.JobConditionType, reason, message string) {
	now := metav1.Now()
	job.Status.Conditions = append(job.Status.Conditions, batchv1.JobCondition{
		Type: typ, Status: corev1.ConditionTrue, Reason: reason, Message: message, LastProbeTime: now, LastTransitionTime: now,
	})
}
