package image

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/ssa"
	"banlieue.io/banlieue/internal/testenv"
)

// TestImportZoneAdoptsOnlyVerifiedJobs runs importZone against the real API server: the Job it
// creates is adopted on the next pass; a Job at another pool's import name that copies
// banlieue's owner, labels and annotations but runs as another Provider's import account is
// reported and left in place; one that differs only in its image is replaced. A provider whose
// own import account does not exist runs its Jobs as the namespace's default, and stops
// adopting such a Job once the account exists.
func TestImportZoneAdoptsOnlyVerifiedJobs(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	env.CreateRestrictedNamespace(ctx, t, admBuildNs)
	env.Create(ctx, t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: accountA + "-import", Namespace: admBuildNs}})
	img := &banlieuev1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "kairos"},
		Spec: banlieuev1.VMImageSpec{OSFamily: "linux", OSDistribution: "kairos", OSVersion: "3", Architecture: "amd64",
			Sources: []banlieuev1.ImageSource{{ProviderClass: "libvirt", Kind: banlieuev1.SourceURL, ImportFrom: "https://images.example/k.img"}}}}
	env.Create(ctx, t, img)
	artifact := struct {
		BuildArtifact banlieuev1.BuildArtifact `json:"buildArtifact"`
	}{banlieuev1.BuildArtifact{Kind: banlieuev1.ArtifactCloudImage, Phase: banlieuev1.BuildReady, Reason: "Reconciled",
		PVCRef: &banlieuev1.LocalObjectReference{Name: "banlieue-artifacts"}, File: "kairos.raw", Checksum: "sha256:" + strings.Repeat("ab", 32), SizeBytes: 1}}
	if err := ssa.ApplyStatus(ctx, env.Client, &banlieuev1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: img.Name}}, &artifact, "test-imagebuilder"); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(img), img); err != nil {
		t.Fatal(err)
	}
	p := &banlieuev1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "host-a", Namespace: admSystemNs}}
	r := &Reconciler{Client: env.Client, APIReader: env.Client, BuildNamespace: admBuildNs,
		ImportImage: importImageA, ImportServiceAccount: accountA + "-import"}

	zone := func(pool string) banlieuev1.ImageZoneStatus {
		t.Helper()
		z, err := r.importZone(ctx, img, p, pool)
		if err != nil {
			t.Fatal(err)
		}
		return z
	}
	get := func(name string) (*batchv1.Job, error) {
		var job batchv1.Job
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: admBuildNs, Name: name}, &job)
		return &job, err
	}

	t.Run("its own Job is created, then adopted", func(t *testing.T) {
		if z := zone("own"); z.Reason != banlieuev1.ReasonImporting || z.Message != "import Job created" {
			t.Fatalf("first pass: %+v", z)
		}
		if z := zone("own"); z.Reason != banlieuev1.ReasonImporting || z.Message != "import Job running" {
			t.Errorf("second pass: %+v, want the Job adopted", z)
		}
	})

	t.Run("its own Job failed: the zone prints the command that repeats it", func(t *testing.T) {
		job, err := get(ImportJobName(img.Name, p.Namespace, p.Name, "own"))
		if err != nil {
			t.Fatal(err)
		}
		// What the Job controller writes first when it gives a Job up.
		job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue,
			Reason: batchv1.JobReasonBackoffLimitExceeded, LastTransitionTime: metav1.Now()}}
		if err := env.Client.Status().Update(ctx, job); err != nil {
			t.Fatal(err)
		}
		want := "import Job " + job.Name + " failed; to repeat it by hand: banlieue provider libvirt import --vmimage kairos " +
			"--provider host-a --provider-namespace banlieue-system --pool own --source /artifacts/kairos.raw " +
			"--volume-name kairos-abababababababab.raw --checksum sha256:" + strings.Repeat("ab", 32) +
			" (--source /artifacts/kairos.raw is file kairos.raw of PVC banlieue-imagebuild/banlieue-artifacts)"
		if z := zone("own"); z.Reason != banlieuev1.ReasonImportFailed || z.Message != want {
			t.Errorf("zone %+v,\nwant ImportFailed %q", z, want)
		}
	})

	// A squatter: banlieue's Job for pool "squatted", with everything copied, but run as the
	// import account of another Provider, which could read that Provider's key.
	squat := r.importJob(img, p, "squatted", r.ImportServiceAccount)
	squat.Spec.Template.Spec.ServiceAccountName = accountB + "-import"
	env.Create(ctx, t, squat)
	t.Run("a Job running as another account is reported and left alone", func(t *testing.T) {
		z := zone("squatted")
		want := `it runs as ServiceAccount "` + accountB + `-import", not this Provider's import account "` + accountA + `-import"`
		if z.Ready || z.Reason != banlieuev1.ReasonImportFailed || !strings.Contains(z.Message, want) ||
			!strings.Contains(z.Message, "it is left alone") {
			t.Errorf("zone %+v, want ImportFailed with %q", z, want)
		}
		job, err := get(squat.Name)
		if err != nil || job.UID != squat.UID || !job.DeletionTimestamp.IsZero() {
			t.Errorf("the unverified Job was touched: %v %+v", err, job.ObjectMeta)
		}
	})

	earlier := r.importJob(img, p, "upgraded", r.ImportServiceAccount)
	earlier.Spec.Template.Spec.Containers[0].Image = "registry.example/banlieue:v0.0.9"
	env.Create(ctx, t, earlier)
	t.Run("its own Job of an earlier image is replaced", func(t *testing.T) {
		if z := zone("upgraded"); z.Reason != banlieuev1.ReasonImporting || z.Message != "artifact rebuilt or banlieue upgraded; replacing the import Job" {
			t.Errorf("zone %+v", z)
		}
		testenv.Eventually(t, 10*time.Second, "the earlier Job replaced", func() error {
			job, err := get(earlier.Name)
			if err == nil && job.UID == earlier.UID && job.DeletionTimestamp.IsZero() {
				return errors.New("still there")
			}
			return nil
		})
	})

	// A provider whose own account is missing (run by hand with another --import-service-account):
	// admin creates the Jobs here, so the operator's admission policy, which binds provider
	// accounts alone, does not refuse the fallback; on a real node the suite's own namespace has
	// none (node_suite_test.go).
	fallback := &Reconciler{Client: env.Client, APIReader: env.Client, BuildNamespace: admBuildNs,
		ImportImage: importImageA, ImportServiceAccount: "hand-run-import"}
	note := "; ServiceAccount " + admBuildNs + "/hand-run-import does not exist, so the Job runs as " + admBuildNs + "/default, " +
		"which needs the import account's grant (get on the Provider, its credentials Secret and CA)"
	t.Run("without its own account the Job runs as default, and says so", func(t *testing.T) {
		for i, want := range []string{"import Job created" + note, "import Job running" + note} {
			z, err := fallback.importZone(ctx, img, p, "fallback")
			if err != nil || z.Reason != banlieuev1.ReasonImporting || z.Message != want {
				t.Fatalf("pass %d: %+v %v, want Importing %q", i+1, z, err, want)
			}
		}
		job, err := get(ImportJobName(img.Name, p.Namespace, p.Name, "fallback"))
		if err != nil || job.Spec.Template.Spec.ServiceAccountName != fallbackAccount {
			t.Fatalf("Job %v %+v, want it run as %s", err, job.Spec.Template.Spec.ServiceAccountName, fallbackAccount)
		}
	})
	t.Run("once its own account exists, a Job running as default is left alone", func(t *testing.T) {
		env.Create(ctx, t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "hand-run-import", Namespace: admBuildNs}})
		z, err := fallback.importZone(ctx, img, p, "fallback")
		want := `it runs as ServiceAccount "default", not this Provider's import account "hand-run-import"`
		if err != nil || z.Reason != banlieuev1.ReasonImportFailed || !strings.Contains(z.Message, want) {
			t.Errorf("zone %+v %v, want ImportFailed with %q", z, err, want)
		}
	})
}
