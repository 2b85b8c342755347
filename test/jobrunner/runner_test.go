package jobrunner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"banlieue.io/banlieue/internal/testenv"
)

// script stands in for the banlieue binary: it reports its argv, an extra variable, the
// variable a Secret feeds and the rewritten mount in the termination log, and fails when asked
// to, without a message.
const script = `#!/bin/sh
if [ "$1" = fail ]; then echo "the tail of the output"; exit 3; fi
printf '%s|%s|%s|%s' "$*" "$EXTRA" "$POD_NAMESPACE" "$FROM" > "$BANLIEUE_TERMINATION_LOG"
`

func TestRunTerminationMessages(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "fake")
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "jobs"}}); err != nil {
		t.Fatal(err)
	}
	vol := t.TempDir()
	r := &Runner{Client: env.Client, Binary: bin, Kubeconfig: "unused", Volumes: map[string]string{"pvc": vol},
		Env: []string{"EXTRA=from-runner"}, Errorf: t.Logf}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()

	ok := job("ok", []string{"build", "--output", "/artifacts/x.raw"})
	bad := job("bad", []string{"fail"})
	// The source of a build Job comes from a Secret, which may be created after the Job.
	fed := job("fed", []string{"build"})
	fed.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "FROM", ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "src"}, Key: "from"}}}}
	for _, j := range []*batchv1.Job{ok, bad, fed} {
		if err := env.Client.Create(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(3 * pollInterval)
	if err := env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "src", Namespace: "jobs"},
		Data: map[string][]byte{"from": []byte("https://u:p@example.org/d.raw")}}); err != nil {
		t.Fatal(err)
	}
	wantOK := "build --output " + vol + "/x.raw|from-runner|jobs|"
	if msg := waitMessage(ctx, t, env.Client, ok, corev1.PodSucceeded); msg != wantOK {
		t.Errorf("succeeded pod message %q, want %q", msg, wantOK)
	}
	if msg, want := waitMessage(ctx, t, env.Client, fed, corev1.PodSucceeded), "build|from-runner|jobs|https://u:p@example.org/d.raw"; msg != want {
		t.Errorf("Secret-fed pod message %q, want %q", msg, want)
	}
	// No termination log: the tail of the output, as FallbackToLogsOnError gives.
	if msg := waitMessage(ctx, t, env.Client, bad, corev1.PodFailed); !strings.Contains(msg, "the tail of the output") {
		t.Errorf("failed pod message %q", msg)
	}
	var live batchv1.Job
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(bad), &live); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the failed Job's Failed condition", func() bool {
		_ = env.Client.Get(ctx, client.ObjectKeyFromObject(bad), &live)
		return finished(&live) && live.Status.Failed == 1
	})

	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

func job(name string, args []string) *batchv1.Job {
	labels := map[string]string{"app.kubernetes.io/name": "banlieue"}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "jobs", Labels: labels},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "c", Image: "banlieue:test", Args: args,
						VolumeMounts: []corev1.VolumeMount{{Name: "a", MountPath: "/artifacts"}}}},
					Volumes: []corev1.Volume{{Name: "a", VolumeSource: corev1.VolumeSource{
						PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "pvc"}}}},
				},
			},
		},
	}
}

// waitMessage waits for the Job's pod to reach phase and returns its termination message.
func waitMessage(ctx context.Context, t *testing.T, c client.Client, j *batchv1.Job, phase corev1.PodPhase) string {
	t.Helper()
	var msg string
	waitFor(ctx, t, "pod of "+j.Name+" "+string(phase), func() bool {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(j.Namespace), client.MatchingLabels{"batch.kubernetes.io/job-name": j.Name}); err != nil {
			return false
		}
		for _, p := range pods.Items {
			if p.Status.Phase == phase && p.Status.ContainerStatuses[0].State.Terminated != nil {
				msg = p.Status.ContainerStatuses[0].State.Terminated.Message
				return true
			}
		}
		return false
	})
	return msg
}

func waitFor(ctx context.Context, t *testing.T, what string, ok func() bool) {
	t.Helper()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
