//go:build node

package image

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	providerlibvirt "banlieue.io/banlieue/internal/provider/libvirt"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/pkg/libvirt"
)

// TestReimportKeepsBasesOnTheRealNode runs the controllers against the real node and the lab host (node_suite_test.go):
// an imported base is never replaced, deleted or shared, and never written over a stranger's.
func TestReimportKeepsBasesOnTheRealNode(t *testing.T) {
	s := newNodeSuite(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	artifacts := s.startControllers(ctx, t)
	pool := s.createPool(ctx, t, "own")
	s.createProvider(ctx, t, "lab", pool.Name)
	urlSource := func(name string) banlieuev1.ImageSource {
		return banlieuev1.ImageSource{ProviderClass: "libvirt", Kind: banlieuev1.SourceURL, ImportFrom: "https://images.example/" + name + ".img"}
	}

	t.Run("a changed artifact becomes a new volume; the base under an overlay is untouched", func(t *testing.T) {
		img := s.createImage(ctx, t, "reimg", urlSource("reimg"))
		src := filepath.Join(artifacts, "reimg.raw")
		writeFile(t, src, 8<<20, []int64{0}, 1<<20)
		oldSum := testenv.FileSHA256(t, src)
		s.publishArtifact(ctx, t, img.Name, "reimg.raw", src)
		row := s.waitRow(ctx, t, img.Name, "lab", func(r banlieuev1.ProviderImageStatus) bool { return r.Ready })
		oldBase := row.ResolvedRef
		if oldBase != providerlibvirt.ArtifactVolumeName("reimg", oldSum, false) {
			t.Fatalf("row names %s", oldBase)
		}
		// A machine built on it: its OS disk is a qcow2 overlay whose backing file is the base.
		base := s.volumes(ctx, t, pool)[oldBase]
		overlay, err := s.host.StorageVolCreateXML(ctx, pool, fmt.Sprintf(`<volume type='file'><name>vm-os.qcow2</name>`+
			`<capacity unit='bytes'>%d</capacity><target><format type='qcow2'/></target>`+
			`<backingStore><path>%s</path><format type='raw'/></backingStore></volume>`, 16<<20, base.Key), 0)
		if err != nil {
			t.Fatal(err)
		}
		markerBefore := s.volumeState(ctx, t, pool, oldBase+".sha256")

		// The artifact is rebuilt from a new importFrom: same file, other bytes.
		writeFile(t, src, 8<<20, []int64{1 << 20}, 1<<20)
		newSum := testenv.FileSHA256(t, src)
		s.publishArtifact(ctx, t, img.Name, "reimg.raw", src)
		row = s.waitRow(ctx, t, img.Name, "lab", func(r banlieuev1.ProviderImageStatus) bool {
			return r.Ready && r.ResolvedRef != oldBase
		})
		if want := providerlibvirt.ArtifactVolumeName("reimg", newSum, false); row.ResolvedRef != want {
			t.Fatalf("row names %s, want %s", row.ResolvedRef, want)
		}
		s.assertImported(ctx, t, pool, row.ResolvedRef, src)
		if got := testenv.FileSHA256(t, base.Key); got != oldSum {
			t.Errorf("the base %s under the overlay changed: sha256 %s, was %s", oldBase, got, oldSum)
		}
		if got := s.volumeState(ctx, t, pool, oldBase+".sha256"); got != markerBefore {
			t.Errorf("the old base's marker changed: %s, was %s", got, markerBefore)
		}
		if _, ok := s.volumes(ctx, t, pool)[overlay.Name]; !ok {
			t.Error("the overlay is gone")
		}
	})

	t.Run("VMImages foo and foo.raw get distinct volumes", func(t *testing.T) {
		srcs := map[string]string{}
		for i, name := range []string{"foo", "foo.raw"} {
			img := s.createImage(ctx, t, name, urlSource(name))
			file := fmt.Sprintf("foo-%d.raw", i)
			srcs[name] = writeFile(t, filepath.Join(artifacts, file), 4<<20, []int64{int64(i) << 20}, 1<<20)
			s.publishArtifact(ctx, t, img.Name, file, srcs[name])
		}
		refs := map[string]string{}
		for name, src := range srcs {
			row := s.waitRow(ctx, t, name, "lab", func(r banlieuev1.ProviderImageStatus) bool { return r.Ready })
			refs[name] = row.ResolvedRef
			if want := providerlibvirt.ArtifactVolumeName(name, testenv.FileSHA256(t, src), false); row.ResolvedRef != want {
				t.Errorf("VMImage %s: row names %s, want %s", name, row.ResolvedRef, want)
			}
		}
		if refs["foo"] == refs["foo.raw"] {
			t.Fatalf("both VMImages name volume %s", refs["foo"])
		}
		for name, src := range srcs {
			s.assertImported(ctx, t, pool, refs[name], src)
		}
	})

	t.Run("a stranger's volume at the computed name is refused and untouched", func(t *testing.T) {
		img := s.createImage(ctx, t, "squat", urlSource("squat"))
		src := writeFile(t, filepath.Join(artifacts, "squat.raw"), 1<<20, []int64{0}, 1<<20)
		name := providerlibvirt.ArtifactVolumeName("squat", testenv.FileSHA256(t, src), false)
		s.writeVolume(ctx, t, pool, name, []byte("another tool's disk"))
		before := s.volumeState(ctx, t, pool, name)
		s.publishArtifact(ctx, t, img.Name, "squat.raw", src)
		row := s.waitRow(ctx, t, img.Name, "lab", func(r banlieuev1.ProviderImageStatus) bool { return r.Reason == banlieuev1.ReasonImportFailed })
		if row.Ready || row.ResolvedRef != "" {
			t.Errorf("row = %+v", row)
		}
		if after := s.volumeState(ctx, t, pool, name); after != before {
			t.Errorf("the stranger's volume changed: %s, then %s", before, after)
		}
		if _, ok := s.volumes(ctx, t, pool)[name+".sha256"]; ok {
			t.Error("the refused import left a marker")
		}
	})
}

// TestImportJobsOnTheRealNode: import Jobs are one per VMImage, Provider and pool whatever the
// names, and a Job banlieue did not create is neither adopted nor deleted.
func TestImportJobsOnTheRealNode(t *testing.T) {
	s := newNodeSuite(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	artifacts := s.startControllers(ctx, t)
	// Three pools whose names sanitise alike; the last is no valid label value either.
	suffix := randomHex(3)
	var pools []libvirt.StoragePool
	var names []string
	for _, sep := range []string{"_", "-", " "} {
		p := s.createPoolNamed(ctx, t, "job"+sep+suffix)
		pools, names = append(pools, p), append(names, p.Name)
	}
	s.createProvider(ctx, t, "lab", names...)
	urlSource := func(name string) banlieuev1.ImageSource {
		return banlieuev1.ImageSource{ProviderClass: "libvirt", Kind: banlieuev1.SourceURL, ImportFrom: "https://images.example/" + name + ".img"}
	}

	t.Run("pools whose names sanitise alike get distinct Jobs", func(t *testing.T) {
		img := s.createImage(ctx, t, "alike", urlSource("alike"))
		src := writeFile(t, filepath.Join(artifacts, "alike.raw"), 1<<20, []int64{0}, 1<<20)
		s.publishArtifact(ctx, t, img.Name, "alike.raw", src)
		row := s.waitRow(ctx, t, img.Name, "lab", func(r banlieuev1.ProviderImageStatus) bool { return r.Ready })
		if len(row.Zones) != len(pools) {
			t.Fatalf("row = %+v", row)
		}
		jobs := map[string]bool{}
		for i, z := range row.Zones {
			if z.Name != names[i] || z.ResolvedRef != names[i]+"/"+ImportJobName("alike", providerNamespace, "lab", names[i]) {
				t.Errorf("zone %d = %+v", i, z)
			}
			jobs[z.ResolvedRef[len(z.Name)+1:]] = true
			s.assertImported(ctx, t, pools[i], row.ResolvedRef, src)
		}
		if len(jobs) != len(pools) || len(s.jobUIDs(ctx, t, "alike")) != len(pools) {
			t.Errorf("want %d Jobs, zones name %v", len(pools), jobs)
		}
	})

	t.Run("a 70-character VMImage name is imported", func(t *testing.T) {
		name := strings.Repeat("a", 60) + "-long-name"
		img := s.createImage(ctx, t, name, urlSource("long"))
		src := writeFile(t, filepath.Join(artifacts, "long.raw"), 1<<20, []int64{0}, 1<<20)
		s.publishArtifact(ctx, t, img.Name, "long.raw", src)
		row := s.waitRow(ctx, t, name, "lab", func(r banlieuev1.ProviderImageStatus) bool { return r.Ready })
		s.assertImported(ctx, t, pools[0], row.ResolvedRef, src)
		if n := len(s.jobUIDs(ctx, t, labelValue(name))); n != len(pools) {
			t.Errorf("want %d Jobs labelled %s, got %d", len(pools), labelValue(name), n)
		}
	})

	t.Run("a Job of the expected name that banlieue did not create is not adopted", func(t *testing.T) {
		img := s.createImage(ctx, t, "squatted", urlSource("squatted"))
		src := writeFile(t, filepath.Join(artifacts, "squatted.raw"), 1<<20, []int64{0}, 1<<20)
		// Someone else's Job at the name, copying the labels and annotations banlieue's would
		// carry, suspended so that the node's Job controller starts no pod of it.
		foreign := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{
				Name: ImportJobName("squatted", providerNamespace, "lab", names[1]), Namespace: buildNamespace,
				Labels: map[string]string{banlieuev1.LabelComponent: importComponent, banlieuev1.LabelVMImage: "squatted", banlieuev1.LabelStoragePool: labelValue(names[1])},
				Annotations: map[string]string{banlieuev1.AnnotationProvider: providerNamespace + "/lab",
					banlieuev1.AnnotationArtifactChecksum: "sha256:" + testenv.FileSHA256(t, src)},
			},
			Spec: batchv1.JobSpec{
				Suspend: ptr.To(true),
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "x", Image: "example.org/someone-else:1"}},
				}},
			},
		}
		if err := s.env.Client.Create(ctx, foreign); err != nil {
			t.Fatal(err)
		}
		s.publishArtifact(ctx, t, img.Name, "squatted.raw", src)
		row := s.waitRow(ctx, t, img.Name, "lab", func(r banlieuev1.ProviderImageStatus) bool {
			return len(r.Zones) == len(pools) && r.Zones[0].Ready && r.Zones[2].Ready && r.Zones[1].Reason == banlieuev1.ReasonImportFailed
		})
		want := "import Job " + buildNamespace + "/" + foreign.Name + " was not created by banlieue for VMImage squatted, Provider " +
			providerNamespace + "/lab and pool \"" + names[1] + "\": it has no controller reference; it is left alone (delete it and banlieue creates its own)"
		if row.Ready || row.Zones[1].Message != want {
			t.Errorf("zone = %+v\nwant message %s", row.Zones[1], want)
		}
		// Passes later, it is still there, unchanged.
		time.Sleep(2 * time.Second)
		var got batchv1.Job
		if err := s.env.Client.Get(ctx, client.ObjectKeyFromObject(foreign), &got); err != nil {
			t.Fatal(err)
		}
		// Its metadata and spec, that is: the node's Job controller writes the suspended Job's
		// status (condition Suspended), which moves resourceVersion but not generation.
		if got.UID != foreign.UID || got.Generation != foreign.Generation || !maps.Equal(got.Labels, foreign.Labels) ||
			!maps.Equal(got.Annotations, foreign.Annotations) || len(got.OwnerReferences) != 0 || len(got.Finalizers) != 0 {
			t.Errorf("the foreign Job was replaced or changed: uid %s, generation %d → %d, labels %v, annotations %v, owners %v, finalizers %v",
				got.UID, foreign.Generation, got.Generation, got.Labels, got.Annotations, got.OwnerReferences, got.Finalizers)
		}
		if _, ok := s.volumes(ctx, t, pools[1])[providerlibvirt.ArtifactVolumeName("squatted", testenv.FileSHA256(t, src), false)]; ok {
			t.Errorf("pool %s holds the image though only the foreign Job has its name", names[1])
		}
	})
}
