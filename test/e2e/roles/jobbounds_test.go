package roles

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/imagebuilder"
	"banlieue.io/banlieue/internal/testenv"
)

// TestImagebuilderJobBounds runs the real `banlieue imagebuilder` with non-default bound and
// limit flags and reads back the build Job it creates: the API server accepted the Job, and the
// Job carries the deadline, the resources, GOMEMLIMIT and the limits of the flags.
func TestImagebuilderJobBounds(t *testing.T) {
	env := testenv.Start(t)
	bin := testenv.Banlieue(t)
	kubeconfig := env.Kubeconfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const buildNs = "banlieue-imagebuild"
	for _, ns := range []string{"banlieue-system", buildNs} {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	start(t, bin, kubeconfig, "imagebuilder", "--no-leader-elect", "--build-image", "banlieue:test",
		"--build-deadline", "45m", "--build-cpu-request", "200m", "--build-cpu-limit", "0",
		"--build-memory-request", "256Mi", "--build-memory-limit", "1Gi",
		"--max-disk-size", "10Gi", "--allow-network", "10.0.0.0/8")

	img := &banlieuev1.VMImage{
		ObjectMeta: metav1.ObjectMeta{Name: "bounded"},
		Spec: banlieuev1.VMImageSpec{OSFamily: "linux", OSDistribution: "cirros", OSVersion: "0.6", Architecture: "amd64",
			Sources: []banlieuev1.ImageSource{{ProviderClass: "libvirt", Kind: banlieuev1.SourceURL,
				ImportFrom: "https://images.example/cirros.qcow2"}}},
	}
	if err := env.Client.Create(ctx, img); err != nil {
		t.Fatal(err)
	}
	var job batchv1.Job
	testenv.Eventually(t, 60*time.Second, "build Job build-bounded", func() error {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: buildNs, Name: imagebuilder.BuildJobName("bounded")}, &job)
	})
	if d := job.Spec.ActiveDeadlineSeconds; d == nil || *d != 45*60 {
		t.Errorf("activeDeadlineSeconds %v, want 2700", d)
	}
	c := job.Spec.Template.Spec.Containers[0]
	r := c.Resources
	got := fmt.Sprintf("requests cpu=%s memory=%s limits memory=%s, %d limits", r.Requests.Cpu(), r.Requests.Memory(), r.Limits.Memory(), len(r.Limits))
	if want := "requests cpu=200m memory=256Mi limits memory=1Gi, 1 limits"; got != want {
		t.Errorf("resources %s, want %s (no CPU limit)", got, want)
	}
	if !slices.Contains(c.Env, corev1.EnvVar{Name: "GOMEMLIMIT", Value: "966367638"}) {
		t.Errorf("env %v, want GOMEMLIMIT=966367638 (90%% of 1Gi)", c.Env)
	}
	args := strings.Join(c.Args, " ")
	for _, want := range []string{"--max-disk-size 10Gi", "--allow-network 10.0.0.0/8", "--max-download-size 32Gi"} {
		if !strings.Contains(args, want) {
			t.Errorf("build args %q lack %s", args, want)
		}
	}
}

// TestBoundFlagsRefused: bound flags no Job could live with, and worker counts out of range,
// stop each role before it starts, naming the flag.
func TestBoundFlagsRefused(t *testing.T) {
	bin := testenv.Banlieue(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"imagebuilder", "--build-memory-limit", "200Mi"},
			"invalid --build-memory-limit: 200Mi: build Jobs need at least 256Mi (--max-xz-dictionary 64Mi, --max-zstd-window 128Mi and 64Mi for the runtime)"},
		{[]string{"imagebuilder", "--max-zstd-window", "1Gi"}, "invalid --build-memory-limit: 512Mi: build Jobs need at least 1152Mi"},
		{[]string{"imagebuilder", "--build-deadline", "10s"}, "invalid --build-deadline: 10s: want at least 1m0s"},
		{[]string{"operator", "--import-memory-limit", "32Mi"}, "invalid --import-memory-limit: 32Mi: import Jobs need at least 64Mi"},
		{[]string{"provider", "libvirt", "--import-memory-request", "1Gi", "--import-service-account", "p-import"},
			"invalid --import-memory-request: 1Gi is above --import-memory-limit 256Mi"},
		{[]string{"provider", "libvirt"}, "invalid --import-service-account: empty"},
		{[]string{"provider", "libvirt", "--import-cpu-limit", "lots"}, `invalid argument "lots" for "--import-cpu-limit" flag`},
		{[]string{"provider", "libvirt", "--workers", "0", "--import-service-account", "p-import"}, "invalid --workers: 0: want 1 to 64"},
		{[]string{"controller", "--workers", "65"}, "invalid --workers: 65: want 1 to 64"},
	} {
		out, err := exec.Command(bin, append(tt.args, "--kubeconfig", "/nonexistent")...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), tt.want) {
			t.Errorf("%v: got %v: %s\nwant an error with %q", tt.args, err, out, tt.want)
		}
	}
}
