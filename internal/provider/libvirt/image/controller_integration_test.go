//go:build node

package image

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/imagebuilder/checksum"
	providerlibvirt "banlieue.io/banlieue/internal/provider/libvirt"
	"banlieue.io/banlieue/internal/ssa"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/pkg/libvirt"
)

// TestControllerOnTheRealNode runs the Provider and VMImage controllers against the real node
// and the lab host (node_suite_test.go): every import Job is a pod of the node's kubelet.
func TestControllerOnTheRealNode(t *testing.T) {
	s := newNodeSuite(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	artifacts := s.startControllers(ctx, t)

	poolA, poolB := s.createPool(ctx, t, "ctl-a"), s.createPool(ctx, t, "ctl-b")
	// "missing" is declared but absent from the host: the probe drops it, so it is no target.
	s.createProvider(ctx, t, "lab", poolA.Name, poolB.Name, poolA.Name, "missing")

	t.Run("Url source: BuildPending, then one import Job and one zone per pool", func(t *testing.T) {
		img := s.createImage(ctx, t, "cirros", banlieuev1.ImageSource{ProviderClass: "libvirt", Kind: banlieuev1.SourceURL,
			ImportFrom: "https://images.example/cirros.img"})
		row := s.waitRow(ctx, t, img.Name, "lab", func(r banlieuev1.ProviderImageStatus) bool { return r.Reason == banlieuev1.ReasonBuildPending })
		if row.Ready {
			t.Fatalf("row ready before the build: %+v", row)
		}
		src := writeFile(t, filepath.Join(artifacts, "cirros.raw"), 64<<20, []int64{0, 32 << 20}, 1<<20)
		s.publishArtifact(ctx, t, img.Name, "cirros.raw", src)
		row = s.waitRow(ctx, t, img.Name, "lab", func(r banlieuev1.ProviderImageStatus) bool { return r.Ready })
		volume := providerlibvirt.ArtifactVolumeName("cirros", testenv.FileSHA256(t, src), false)
		if row.ResolvedRef != volume || row.Reason != banlieuev1.ReasonReconciled || len(row.Zones) != 2 {
			t.Fatalf("row = %+v", row)
		}
		for i, pool := range []string{poolA.Name, poolB.Name} {
			z := row.Zones[i]
			job := ImportJobName("cirros", providerNamespace, "lab", pool)
			if z.Name != pool || !z.Ready || z.Reason != banlieuev1.ReasonReconciled || z.ResolvedRef != pool+"/"+job {
				t.Errorf("zone %d = %+v", i, z)
			}
			s.assertImported(ctx, t, s.pool(t, pool), volume, src)
		}
		var jobs batchv1.JobList
		if err := s.env.Client.List(ctx, &jobs, client.InNamespace(buildNamespace), client.MatchingLabels{banlieuev1.LabelVMImage: "cirros"}); err != nil {
			t.Fatal(err)
		}
		if len(jobs.Items) != 2 {
			t.Fatalf("want one Job per pool, got %d", len(jobs.Items))
		}
		j := jobs.Items[0]
		if j.Spec.Template.Spec.Tolerations[0].Key != "dedicated" || j.OwnerReferences[0].Name != "cirros" {
			t.Errorf("Job %s: tolerations %+v owners %+v", j.Name, j.Spec.Template.Spec.Tolerations, j.OwnerReferences)
		}
	})

	t.Run("a rebuilt artifact replaces the import Jobs", func(t *testing.T) {
		first := s.jobUIDs(ctx, t, "cirros")
		src := writeFile(t, filepath.Join(artifacts, "cirros.raw"), 64<<20, []int64{16 << 20}, 1<<20)
		s.publishArtifact(ctx, t, "cirros", "cirros.raw", src)
		want := providerlibvirt.ArtifactVolumeName("cirros", testenv.FileSHA256(t, src), false)
		// The old row stays Ready until the pass after the stale Jobs are gone: waiting for new
		// Job UIDs alone can catch it in between.
		row := s.waitRow(ctx, t, "cirros", "lab", func(r banlieuev1.ProviderImageStatus) bool {
			if !r.Ready || r.ResolvedRef != want {
				return false
			}
			for uid := range s.jobUIDs(ctx, t, "cirros") {
				if first[uid] {
					return false
				}
			}
			return true
		})
		s.assertImported(ctx, t, poolA, row.ResolvedRef, src)
	})

	t.Run("a failed import is ImportFailed", func(t *testing.T) {
		img := s.createImage(ctx, t, "broken", banlieuev1.ImageSource{ProviderClass: "libvirt", Kind: banlieuev1.SourceURL,
			ImportFrom: "https://images.example/broken.img"})
		src := writeFile(t, filepath.Join(artifacts, "broken.raw"), 1<<20, []int64{0}, 1<<20)
		s.publishArtifact(ctx, t, img.Name, "broken.raw", src)
		volume := providerlibvirt.ArtifactVolumeName("broken", testenv.FileSHA256(t, src), false)
		// The artifact changes after publication: the import's checksum check must refuse it.
		writeFile(t, src, 1<<20, []int64{0}, 1<<20)
		// The row is ImportFailed from the first failed zone on; wait for both, each Job's
		// import verifying the bytes it uploaded (and its one retry) in its own time.
		s.waitRow(ctx, t, img.Name, "lab", func(r banlieuev1.ProviderImageStatus) bool {
			failed := 0
			for _, z := range r.Zones {
				if strings.Contains(z.Message, "failed") {
					failed++
				}
			}
			return r.Reason == banlieuev1.ReasonImportFailed && failed == 2
		})
		// The uploads that did not match left nothing behind.
		s.assertNoVolume(ctx, t, poolA, volume)
		s.assertNoVolume(ctx, t, poolB, volume)
	})

	t.Run("BackingFile is ready only when the volume exists", func(t *testing.T) {
		img := s.createImage(ctx, t, "golden", banlieuev1.ImageSource{ProviderClass: "libvirt", Kind: banlieuev1.SourceBackingFile,
			Ref: "/var/lib/libvirt/images/golden.qcow2"})
		row := s.waitRow(ctx, t, img.Name, "lab", func(r banlieuev1.ProviderImageStatus) bool { return r.Reason == banlieuev1.ReasonVolumeNotFound })
		if row.Ready {
			t.Fatalf("row = %+v", row)
		}
		tg := target{host: s.host, pool: poolB}
		if _, err := tg.create(ctx, "golden.qcow2", 1<<20); err != nil {
			t.Fatal(err)
		}
		// Nothing about the image changes; the Provider's periodic probe brings the next pass.
		row = s.waitRow(ctx, t, img.Name, "lab", func(r banlieuev1.ProviderImageStatus) bool { return r.Ready })
		if row.ResolvedRef != "golden.qcow2" || row.Reason != banlieuev1.ReasonReconciled {
			t.Fatalf("row = %+v", row)
		}
	})

	t.Run("Template is UnsupportedSourceKind", func(t *testing.T) {
		img := s.createImage(ctx, t, "tmpl", banlieuev1.ImageSource{ProviderClass: "libvirt", Kind: banlieuev1.SourceTemplate, Ref: "x"})
		s.waitRow(ctx, t, img.Name, "lab", func(r banlieuev1.ProviderImageStatus) bool {
			return !r.Ready && r.Reason == banlieuev1.ReasonUnsupportedSourceKind
		})
	})
}

func (s *labSuite) pool(t *testing.T, name string) libvirt.StoragePool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := s.host.StoragePoolLookupByName(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (s *labSuite) createImage(ctx context.Context, t *testing.T, name string, src banlieuev1.ImageSource) *banlieuev1.VMImage {
	t.Helper()
	img := &banlieuev1.VMImage{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: banlieuev1.VMImageSpec{OSFamily: "linux", OSDistribution: "cirros", OSVersion: "0.6", Architecture: "amd64",
			Sources: []banlieuev1.ImageSource{src}},
	}
	if err := s.env.Client.Create(ctx, img); err != nil {
		t.Fatal(err)
	}
	return img
}

// publishArtifact plays the imagebuilder: it reports file as the Ready artifact.
func (s *labSuite) publishArtifact(ctx context.Context, t *testing.T, image, file, path string) {
	t.Helper()
	sum, err := checksum.File(path, "sha256")
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	status := struct {
		BuildArtifact banlieuev1.BuildArtifact `json:"buildArtifact"`
	}{banlieuev1.BuildArtifact{Kind: banlieuev1.ArtifactCloudImage, Phase: banlieuev1.BuildReady, Reason: "Reconciled",
		PVCRef: &banlieuev1.LocalObjectReference{Name: artifactsPVC}, File: file, Checksum: sum.String(), SizeBytes: fi.Size()}}
	if err := ssa.ApplyStatus(ctx, s.env.Client, &banlieuev1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: image}}, &status, imagebuilderFM); err != nil {
		t.Fatal(err)
	}
}

func (s *labSuite) jobUIDs(ctx context.Context, t *testing.T, image string) map[string]bool {
	t.Helper()
	var jobs batchv1.JobList
	if err := s.env.Client.List(ctx, &jobs, client.InNamespace(buildNamespace), client.MatchingLabels{banlieuev1.LabelVMImage: image}); err != nil {
		t.Fatal(err)
	}
	uids := map[string]bool{}
	for _, j := range jobs.Items {
		uids[string(j.UID)] = true
	}
	return uids
}

// waitRow polls the image until the Provider's row satisfies ok.
func (s *labSuite) waitRow(ctx context.Context, t *testing.T, image, provider string, ok func(banlieuev1.ProviderImageStatus) bool) banlieuev1.ProviderImageStatus {
	t.Helper()
	var img banlieuev1.VMImage
	var row banlieuev1.ProviderImageStatus
	testenv.Eventually(t, 90*time.Second, "VMImage "+image+": row for "+provider+" matching", func() error {
		if err := s.env.Client.Get(ctx, client.ObjectKey{Name: image}, &img); err == nil {
			for _, r := range img.Status.PerProvider {
				if r.ProviderName == provider && r.ProviderNamespace == providerNamespace && ok(r) {
					row = r
					return nil
				}
			}
		}
		return fmt.Errorf("status %+v", img.Status)
	})
	return row
}
