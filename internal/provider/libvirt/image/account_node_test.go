//go:build node

package image

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
)

// TestImportAccountFallbackOnTheRealNode provokes the guide's row "Import Job Pending,
// ServiceAccount not found" on the real node (node_suite_test.go): the provider's own import
// account does not exist in the Job's namespace, so its import Job runs as that namespace's
// default ServiceAccount; its pods fail until that account holds the import grant, and the zone
// says so; with the grant, the image is imported.
func TestImportAccountFallbackOnTheRealNode(t *testing.T) {
	s := newNodeSuite(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	own := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: importSA, Namespace: buildNamespace}}
	if err := s.env.Client.Delete(ctx, own); err != nil {
		t.Fatal(err)
	}
	testenv.WaitGone(ctx, t, s.env.Client, own, time.Minute)
	artifacts := s.startControllers(ctx, t)
	pool := s.createPool(ctx, t, "fallback")
	s.createProvider(ctx, t, "lab", pool.Name)
	img := s.createImage(ctx, t, "fallback", banlieuev1.ImageSource{ProviderClass: "libvirt", Kind: banlieuev1.SourceURL,
		ImportFrom: "https://images.example/fallback.img"})
	src := writeFile(t, filepath.Join(artifacts, "fallback.raw"), 1<<20, []int64{0}, 1<<20)
	s.publishArtifact(ctx, t, img.Name, "fallback.raw", src)
	jobName := ImportJobName(img.Name, providerNamespace, "lab", pool.Name)
	note := "; ServiceAccount " + buildNamespace + "/" + importSA + " does not exist, so the Job runs as " + buildNamespace +
		"/default, which needs the import account's grant (get on the Provider, its credentials Secret and CA)"

	// Without the grant, default may not read the Provider: both pods (backoffLimit 1) fail.
	row := s.waitRow(ctx, t, img.Name, "lab", func(r banlieuev1.ProviderImageStatus) bool {
		return len(r.Zones) == 1 && r.Zones[0].Reason == banlieuev1.ReasonImportFailed
	})
	var failed batchv1.Job
	if err := s.env.Client.Get(ctx, client.ObjectKey{Namespace: buildNamespace, Name: jobName}, &failed); err != nil {
		t.Fatal(err)
	}
	if want := "import Job " + jobName + " failed" + note + byHandNote(&failed); row.Ready || row.Zones[0].Message != want {
		t.Fatalf("zone %+v, want ImportFailed %q", row.Zones[0], want)
	}
	var pods corev1.PodList
	if err := s.env.Client.List(ctx, &pods, client.InNamespace(buildNamespace), client.MatchingLabels{"job-name": jobName}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 2 {
		t.Errorf("%d pods of %s, want 2 (backoffLimit 1)", len(pods.Items), jobName)
	}
	for _, p := range pods.Items {
		if p.Spec.ServiceAccountName != fallbackAccount || p.Status.Phase != corev1.PodFailed {
			t.Errorf("pod %s ran as %q, phase %s: want %s, Failed", p.Name, p.Spec.ServiceAccountName, p.Status.Phase, fallbackAccount)
		}
	}
	var published banlieuev1.VMImage
	if err := s.env.Client.Get(ctx, client.ObjectKeyFromObject(img), &published); err != nil {
		t.Fatal(err)
	}
	s.assertNoVolume(ctx, t, pool, artifactVolume(&published))

	// The guide's fix: give default the import grant; deleting the failed Job retries.
	s.env.Create(ctx, t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "default-import", Namespace: providerNamespace},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: importSA},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: buildNamespace, Name: fallbackAccount}}})
	if err := s.env.Client.Delete(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: jobName, Namespace: buildNamespace}},
		client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	row = s.waitRow(ctx, t, img.Name, "lab", func(r banlieuev1.ProviderImageStatus) bool { return r.Ready })
	s.assertImported(ctx, t, pool, row.ResolvedRef, src)
	var job batchv1.Job
	if err := s.env.Client.Get(ctx, client.ObjectKey{Namespace: buildNamespace, Name: jobName}, &job); err != nil {
		t.Fatal(err)
	}
	if sa := job.Spec.Template.Spec.ServiceAccountName; sa != fallbackAccount || row.Zones[0].ResolvedRef != pool.Name+"/"+jobName {
		t.Errorf("the retried Job runs as %q, zone %+v", sa, row.Zones[0])
	}
}
