//go:build node

package node

import (
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/imagebuilder"
	providerlibvirt "banlieue.io/banlieue/internal/provider/libvirt"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/internal/testenv/labhost"
	"banlieue.io/banlieue/pkg/libvirt"
)

const (
	importComponent = "libvirt-import"
	pipelineWait    = 3 * time.Minute
)

// TestImagePipelineOnTheRealNode runs the image pipeline's cases (docs/guides/image-sources.md)
// as the release runs them: the chart's imagebuilder and the operator's provider pod on the real
// node, every build and import Job a pod of the real kubelet, the artifacts on a real
// PersistentVolume, one Provider with two pools on the lab host. The roles' build and import
// series are read from the pods' /metrics by a scraper bound to banlieue-metrics-reader.
func TestImagePipelineOnTheRealNode(t *testing.T) {
	n := requireNode(t)
	lab := testenv.RequirePodLibvirtLab(t)
	for _, tool := range []string{"qemu-img", "qemu-io"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.MissingPrerequisite(t, tool+" not installed (qemu-utils)")
		}
	}
	served := t.TempDir()
	_, rawA := qcow2Image(t, served, "cirros-a", "16M", 0xab, "0")
	_, rawB := qcow2Image(t, served, "cirros-b", "16M", 0xcd, "3M")
	ociDisk, rawOCI := qcow2Image(t, t.TempDir(), "tiny", "8M", 0x5a, "1M")
	caPEM, baseURL, ociRef := httpsSource(t, served, ociDisk)

	c := installForSources(t, n, caPEM)
	ctx := t.Context()

	host := labhost.Dial(t, lab)
	pools := []string{"pipe-a-" + testenv.RunID(), "pipe-b-" + testenv.RunID()}
	for _, pool := range pools {
		labhost.CreatePool(ctx, t, host, lab, pool)
	}
	var classes []banlieuev1.StorageClassMapping
	for i, pool := range pools {
		classes = append(classes, banlieuev1.StorageClassMapping{Name: fmt.Sprintf("sc-%d", i), Target: map[string]string{"pool": pool}})
	}
	p := labProvider(t, c, lab, classes...)
	waitProviderReady(t, n, c, p)
	provider := p.Name
	s := pipeline{t: t, n: n, c: c, host: host, provider: provider, pools: pools,
		// As a cluster's monitoring reads them: bound to the release's banlieue-metrics-reader.
		scraper: testenv.Attach(t, filepath.Join(n.dir, "kubeconfig")).MetricsReader(t)}

	// importedEverywhere waits for the Provider's row to be ready with one zone per pool, then
	// checks each pool's volume holds want.
	importedEverywhere := func(t *testing.T, imageName, want string) *banlieuev1.VMImage {
		t.Helper()
		img := s.waitImage(t, imageName, "row ready", func(img *banlieuev1.VMImage) bool {
			r, ok := s.row(img)
			return ok && r.Ready
		})
		r, _ := s.row(img)
		// Imports are named by content, so a rebuilt artifact never replaces a base in use.
		volume := providerlibvirt.ArtifactVolumeName(imageName, want, false)
		if r.Reason != banlieuev1.ReasonReconciled || r.ResolvedRef != volume || len(r.Zones) != len(pools) {
			t.Fatalf("row = %+v, want resolvedRef %s", r, volume)
		}
		for i, pool := range pools {
			if z := r.Zones[i]; z.Name != pool || !z.Ready {
				t.Errorf("zone %d = %+v, want pool %s ready", i, z, pool)
			}
			if got := s.volumeSHA256(t, pool, volume); got != want {
				t.Errorf("volume %s/%s: sha256 %s, want %s (qemu-img convert of the source)", pool, volume, got, want)
			}
		}
		return img
	}

	t.Run("https qcow2 source: built, then imported into every pool", func(t *testing.T) {
		start := time.Now()
		series := s.jobSeries(t)
		s.createImage(t, "cirros", baseURL+"/cirros-a.qcow2", "")
		img := s.waitImage(t, "cirros", "buildArtifact Ready", func(img *banlieuev1.VMImage) bool {
			a := img.Status.BuildArtifact
			return a != nil && (a.Phase == banlieuev1.BuildReady || a.Phase == banlieuev1.BuildFailed)
		})
		a := img.Status.BuildArtifact
		want := testenv.FileSHA256(t, rawA)
		if a.Phase != banlieuev1.BuildReady || a.Reason != banlieuev1.ReasonReconciled || a.Kind != banlieuev1.ArtifactCloudImage ||
			a.File != "cirros.raw" || a.Checksum != "sha256:"+want || a.SizeBytes != 16<<20 ||
			a.PVCRef == nil || a.PVCRef.Name != "banlieue-artifacts" ||
			a.JobRef == nil || a.JobRef.Name != "build-cirros" || a.JobRef.Namespace != buildNS {
			t.Fatalf("buildArtifact = %+v", *a)
		}
		if got := testenv.FileSHA256(t, filepath.Join(n.dir, artifactsDir, "cirros.raw")); got != want {
			t.Errorf("artifact on the PersistentVolume differs from qemu-img convert: %s, want %s", got, want)
		}
		// The build publishes the extent digest beside the sha256 (ADR-0134), and every import
		// Job verifies with it.
		if wantExtent := testenv.FileExtentDigest(t, rawA); a.ExtentDigest != wantExtent {
			t.Errorf("buildArtifact.extentDigest = %q, want %s", a.ExtentDigest, wantExtent)
		}
		builds := s.jobs(t, "cirros", imagebuilder.ComponentBuild)
		if len(builds) != 1 {
			t.Fatalf("want one build Job, got %d", len(builds))
		}
		for _, j := range builds {
			if j.OwnerReferences[0].Name != "cirros" {
				t.Errorf("build Job %s: owners %+v", j.Name, j.OwnerReferences)
			}
		}
		importedEverywhere(t, "cirros", want)
		imports := s.jobs(t, "cirros", importComponent)
		if n := len(imports); n != len(pools) {
			t.Errorf("want one import Job per pool, got %d", n)
		}
		for _, j := range imports {
			if args := j.Spec.Template.Spec.Containers[0].Args; !slices.Equal(args[len(args)-2:], []string{"--extent-digest", a.ExtentDigest}) {
				t.Errorf("import Job %s: args %q end without --extent-digest %s", j.Name, args, a.ExtentDigest)
			}
			if p := jobPod(t, n, j.Name); p.Status.Phase != corev1.PodSucceeded || p.Spec.NodeName != n.name {
				t.Errorf("import pod %s: node %q, phase %s", p.Name, p.Spec.NodeName, p.Status.Phase)
			}
		}
		// The roles' pods recorded the finished build Job and each import Job once, with the
		// artifact's 16 MiB (docs/operations.md, "banlieue's series").
		series.expectGrowth(t, s, map[string]float64{
			"build succeeded": 1, "build bytes": 16 << 20,
			"import succeeded": float64(len(pools)), "import bytes": float64(len(pools) * 16 << 20),
			"build failed": 0, "import failed": 0,
		})
		t.Logf("https source Ready on %d pools in %s", len(pools), time.Since(start).Round(time.Millisecond))
	})

	t.Run("OCI reference by tag alone: refused before any Job", func(t *testing.T) {
		repo, _, _ := strings.Cut(ociRef, "@")
		s.createImage(t, "tagonly", repo+":1", "")
		img := s.waitImage(t, "tagonly", "buildArtifact Failed", func(img *banlieuev1.VMImage) bool {
			a := img.Status.BuildArtifact
			return a != nil && a.Phase == banlieuev1.BuildFailed
		})
		if a := img.Status.BuildArtifact; !strings.Contains(a.Message, "set spec.sources[0].checksum") {
			t.Errorf("buildArtifact = %+v", *a)
		}
		if n := len(s.jobs(t, "tagonly", imagebuilder.ComponentBuild)); n != 0 {
			t.Errorf("%d build Jobs for a refused source", n)
		}
	})

	t.Run("OCI containerDisk source by digest", func(t *testing.T) {
		start := time.Now()
		// By digest: the pull verifies the manifest and every layer against it.
		s.createImage(t, "tiny", ociRef, "")
		img := importedEverywhere(t, "tiny", testenv.FileSHA256(t, rawOCI))
		_, digest, _ := strings.Cut(ociRef, "@")
		if a := img.Status.BuildArtifact; a.SourceDigest != digest || a.SizeBytes != 8<<20 || a.File != "tiny.raw" {
			t.Errorf("buildArtifact = %+v, want sourceDigest %s", *a, digest)
		}
		t.Logf("OCI source Ready in %s", time.Since(start).Round(time.Millisecond))
	})

	t.Run("wrong checksum behind a credentialed URL: BuildFailed, no import Job, no credential shown", func(t *testing.T) {
		bad := "sha256:" + strings.Repeat("0", 64)
		// The file server ignores both; the build must never print either.
		const secret = "node-s3cr3t"
		from := strings.Replace(baseURL, "https://", "https://robot:"+secret+"@", 1) + "/cirros-a.qcow2?X-Amz-Signature=" + secret
		s.createImage(t, "badsum", from, bad)
		img := s.waitImage(t, "badsum", "buildArtifact Failed", func(img *banlieuev1.VMImage) bool {
			a := img.Status.BuildArtifact
			return a != nil && a.Phase == banlieuev1.BuildFailed
		})
		a := img.Status.BuildArtifact
		if a.Reason != banlieuev1.ReasonBuildFailed || !strings.Contains(a.Message, "checksum mismatch") || !strings.Contains(a.Message, bad) {
			t.Errorf("buildArtifact = %+v", *a)
		}
		img = s.waitImage(t, "badsum", "row BuildFailed", func(img *banlieuev1.VMImage) bool {
			r, ok := s.row(img)
			return ok && r.Reason == banlieuev1.ReasonBuildFailed
		})
		if r, _ := s.row(img); r.Ready || !strings.Contains(r.Message, "checksum mismatch") {
			t.Errorf("row = %+v", r)
		}
		if n := len(s.jobs(t, "badsum", importComponent)); n != 0 {
			t.Errorf("%d import Jobs for a failed build", n)
		}
		if _, err := os.Stat(filepath.Join(n.dir, artifactsDir, "badsum.raw")); !os.IsNotExist(err) {
			t.Errorf("an artifact was published for a failed build: %v", err)
		}
		// Neither the status, the build Job nor its pod's log shows the credential.
		shown := fmt.Sprintf("%+v %+v", *img.Status.BuildArtifact, img.Status.PerProvider)
		for _, j := range s.jobs(t, "badsum", imagebuilder.ComponentBuild) {
			shown += fmt.Sprintf("%v %+v", j.Annotations, j.Spec)
			shown += kubectl(t, n, "-n", buildNS, "logs", "job/"+j.Name)
		}
		if strings.Contains(shown, secret) {
			t.Errorf("the source's credential is in the status, the build Job or its log: %s", shown)
		}
		if !strings.Contains(a.Message, "https://REDACTED@") {
			t.Errorf("buildArtifact.message %q does not name the redacted source", a.Message)
		}
	})

	t.Run("an ISO behind a URL without .iso is rebuilt under the .iso name", func(t *testing.T) {
		start := time.Now()
		iso := isoImage(t, filepath.Join(served, "installer"))
		s.createImage(t, "installer", baseURL+"/installer", "")
		img := s.waitImage(t, "installer", "row ready", func(img *banlieuev1.VMImage) bool {
			r, ok := s.row(img)
			return ok && r.Ready
		})
		a := img.Status.BuildArtifact
		if a.Kind != banlieuev1.ArtifactISO || a.File != "installer.iso" {
			t.Fatalf("buildArtifact = %+v", *a)
		}
		builds := s.jobs(t, "installer", imagebuilder.ComponentBuild)
		for _, j := range builds {
			if len(builds) != 1 || j.Annotations[banlieuev1.AnnotationArtifactKind] != string(banlieuev1.ArtifactISO) {
				t.Errorf("build Jobs: %d, annotations %v", len(builds), j.Annotations)
			}
		}
		want := testenv.FileSHA256(t, iso)
		volume := providerlibvirt.ArtifactVolumeName("installer", want, true)
		if r, _ := s.row(img); r.ResolvedRef != volume {
			t.Errorf("row = %+v, want resolvedRef %s", r, volume)
		}
		for _, pool := range pools {
			if got := s.volumeSHA256(t, pool, volume); got != want {
				t.Errorf("volume %s/%s differs from the ISO", pool, volume)
			}
		}
		t.Logf("ISO found by content, rebuilt and imported in %s", time.Since(start).Round(time.Millisecond))
	})

	t.Run("changing importFrom rebuilds and replaces the import Jobs", func(t *testing.T) {
		start := time.Now()
		oldBuilds := s.jobs(t, "cirros", imagebuilder.ComponentBuild)
		oldImports := s.jobs(t, "cirros", importComponent)
		img := s.image(t, "cirros")
		oldChecksum := img.Status.BuildArtifact.Checksum
		img.Spec.Sources[0].ImportFrom = baseURL + "/cirros-b.qcow2"
		if err := c.Update(ctx, img); err != nil {
			t.Fatal(err)
		}
		want := testenv.FileSHA256(t, rawB)
		s.waitImage(t, "cirros", "rebuilt artifact Ready", func(img *banlieuev1.VMImage) bool {
			a := img.Status.BuildArtifact
			return a != nil && a.Phase == banlieuev1.BuildReady && a.Checksum != oldChecksum
		})
		if a := s.image(t, "cirros").Status.BuildArtifact; a.Checksum != "sha256:"+want {
			t.Fatalf("rebuilt buildArtifact = %+v, want checksum sha256:%s", *a, want)
		}
		builds := s.jobs(t, "cirros", imagebuilder.ComponentBuild)
		src := s.image(t, "cirros").Spec.Sources[0]
		for uid, j := range builds {
			if _, old := oldBuilds[uid]; old || len(builds) != 1 || j.Annotations[banlieuev1.AnnotationSourceHash] != imagebuilder.SourceHash(src) {
				t.Errorf("build Jobs after the change: %d, %s old=%v", len(builds), j.Annotations, old)
			}
			// The URL reached the build through the Secret alone.
			if spec := fmt.Sprintf("%v %v", j.Annotations, j.Spec); strings.Contains(spec, baseURL) {
				t.Errorf("build Job %s holds the source URL: %s", j.Name, spec)
			}
		}
		var secret corev1.Secret
		if err := c.Get(ctx, client.ObjectKey{Namespace: buildNS, Name: imagebuilder.SourceSecretName("cirros")}, &secret); err != nil ||
			string(secret.Data["from"]) != src.ImportFrom {
			t.Errorf("build Secret: %v, from=%q, want %q", err, secret.Data["from"], src.ImportFrom)
		}
		s.waitImage(t, "cirros", "new import Jobs ready", func(img *banlieuev1.VMImage) bool {
			r, ok := s.row(img)
			if !ok || !r.Ready {
				return false
			}
			imports := s.jobs(t, "cirros", importComponent)
			for uid := range imports {
				if _, old := oldImports[uid]; old {
					return false
				}
			}
			return len(imports) == len(pools)
		})
		importedEverywhere(t, "cirros", want)
		t.Logf("rebuild and re-import in %s", time.Since(start).Round(time.Millisecond))
	})

	// Last: it changes the Provider's pools. An artifact that changes on the volume after its
	// build published it is refused by the import's verification, for the pool the Provider
	// gains afterwards, and the upload leaves nothing behind.
	t.Run("an artifact changed after publication: ImportFailed, nothing left in the pool", func(t *testing.T) {
		late := "pipe-c-" + testenv.RunID()
		labhost.CreatePool(ctx, t, host, lab, late)
		s.createImage(t, "broken", baseURL+"/cirros-a.qcow2", "")
		importedEverywhere(t, "broken", testenv.FileSHA256(t, rawA))
		volume := providerlibvirt.ArtifactVolumeName("broken", testenv.FileSHA256(t, rawA), false)
		artifact := filepath.Join(n.dir, artifactsDir, "broken.raw")
		f, err := os.OpenFile(artifact, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte("not what the build published"), 5<<20); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		// Retried on conflict: the provider and the controller write the Provider's status.
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var p banlieuev1.Provider
			if err := c.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: provider}, &p); err != nil {
				return err
			}
			p.Spec.Capabilities.StorageClasses = append(p.Spec.Capabilities.StorageClasses,
				banlieuev1.StorageClassMapping{Name: "sc-late", Target: map[string]string{"pool": late}})
			return c.Update(ctx, &p)
		}); err != nil {
			t.Fatal(err)
		}
		img := s.waitImage(t, "broken", "row ImportFailed on the late pool", func(img *banlieuev1.VMImage) bool {
			r, ok := s.row(img)
			if !ok || r.Reason != banlieuev1.ReasonImportFailed {
				return false
			}
			for _, z := range r.Zones {
				if z.Name == late && !z.Ready && strings.Contains(z.Message, "failed") {
					return true
				}
			}
			return false
		})
		r, _ := s.row(img)
		for _, z := range r.Zones {
			if z.Name != late && !z.Ready {
				t.Errorf("zone %+v lost its imported volume's readiness", z)
			}
		}
		if names := labhost.VolumeNames(ctx, t, host, late); slices.Contains(names, volume) {
			t.Errorf("pool %s holds %s after the refused upload: %v", late, volume, names)
		}
		t.Logf("row %s: %s", r.Reason, r.Message)
	})
}

// pipeline is the state the pipeline's cases share.
type pipeline struct {
	t        *testing.T
	n        node
	c        client.Client
	host     *libvirt.Client
	provider string
	pools    []string
	scraper  *testenv.Scraper
}

// createImage creates the image for the whole test, not the case: later cases change it.
func (s pipeline) createImage(t *testing.T, imageName, importFrom, sum string) {
	t.Helper()
	img := &banlieuev1.VMImage{
		ObjectMeta: metav1.ObjectMeta{Name: imageName},
		Spec: banlieuev1.VMImageSpec{OSFamily: "linux", OSDistribution: "cirros", OSVersion: "0.6", Architecture: "amd64",
			Sources: []banlieuev1.ImageSource{{ProviderClass: "libvirt", Kind: banlieuev1.SourceURL, ImportFrom: importFrom, Checksum: sum}}},
	}
	if err := s.c.Create(t.Context(), img); err != nil {
		t.Fatalf("creating VMImage %s: %v", imageName, err)
	}
	deleteWhenDone(s.t, s.c, img)
}

func (s pipeline) image(t *testing.T, imageName string) *banlieuev1.VMImage {
	t.Helper()
	var img banlieuev1.VMImage
	if err := s.c.Get(t.Context(), client.ObjectKey{Name: imageName}, &img); err != nil {
		t.Fatal(err)
	}
	return &img
}

// waitImage polls the image until ok accepts it, and returns it.
func (s pipeline) waitImage(t *testing.T, imageName, what string, ok func(*banlieuev1.VMImage) bool) *banlieuev1.VMImage {
	t.Helper()
	var img banlieuev1.VMImage
	testenv.Eventually(t, pipelineWait, "VMImage "+imageName+": "+what, func() error {
		img = banlieuev1.VMImage{}
		err := s.c.Get(t.Context(), client.ObjectKey{Name: imageName}, &img)
		return testenv.Unmet(err == nil && ok(&img), fmt.Sprintf("status %s (%v); pods: %s", dump(img.Status), err, podStates(t.Context(), s.n, buildNS)))
	})
	return &img
}

func dump(status banlieuev1.VMImageStatus) string {
	var b strings.Builder
	if a := status.BuildArtifact; a != nil {
		fmt.Fprintf(&b, "buildArtifact %+v; ", *a)
	}
	for _, r := range status.PerProvider {
		fmt.Fprintf(&b, "row %s/%s ready=%v %s %q zones %+v; ", r.ProviderNamespace, r.ProviderName, r.Ready, r.Reason, r.Message, r.Zones)
	}
	return b.String()
}

// row is the image's row for the suite's Provider, if any.
func (s pipeline) row(img *banlieuev1.VMImage) (banlieuev1.ProviderImageStatus, bool) {
	for _, r := range img.Status.PerProvider {
		if r.ProviderName == s.provider && r.ProviderNamespace == systemNS {
			return r, true
		}
	}
	return banlieuev1.ProviderImageStatus{}, false
}

// jobs lists the build namespace's Jobs of one component for the image, by UID.
func (s pipeline) jobs(t *testing.T, imageName, component string) map[string]batchv1.Job {
	t.Helper()
	var list batchv1.JobList
	if err := s.c.List(t.Context(), &list, client.InNamespace(buildNS),
		client.MatchingLabels{banlieuev1.LabelVMImage: imageName, banlieuev1.LabelComponent: component}); err != nil {
		t.Fatal(err)
	}
	out := map[string]batchv1.Job{}
	for _, j := range list.Items {
		out[string(j.UID)] = j
	}
	return out
}

// volumeSHA256 hashes a volume's file, found through libvirt (a dir pool's volume key is its
// path, visible here because the lab's pools live under the lab directory).
func (s pipeline) volumeSHA256(t *testing.T, poolName, volume string) string {
	t.Helper()
	ctx := t.Context()
	pool, err := s.host.StoragePoolLookupByName(ctx, poolName)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.host.StoragePoolRefresh(ctx, pool); err != nil {
		t.Fatal(err)
	}
	vol, err := s.host.StorageVolLookupByName(ctx, pool, volume)
	if err != nil {
		t.Fatalf("volume %s in pool %s: %v", volume, poolName, err)
	}
	return testenv.FileSHA256(t, vol.Key)
}

// jobSeriesSample is where the build and import series stood at a point of the test.
type jobSeriesSample map[string]float64

// jobSeriesNames are the series of docs/operations.md ("banlieue's series"), by the role whose
// pod records them: the imagebuilder its build Jobs, the Provider's pod its import Jobs.
var jobSeriesNames = map[string]struct{ role, series string }{
	"build succeeded":  {"imagebuilder", `banlieue_image_build_duration_seconds_count{result="succeeded"}`},
	"build failed":     {"imagebuilder", `banlieue_image_build_duration_seconds_count{result="failed"}`},
	"build bytes":      {"imagebuilder", `banlieue_image_build_bytes_total`},
	"import succeeded": {"provider", `banlieue_image_import_duration_seconds_count{result="succeeded"}`},
	"import failed":    {"provider", `banlieue_image_import_duration_seconds_count{result="failed"}`},
	"import bytes":     {"provider", `banlieue_image_import_bytes_total`},
}

// jobSeries scrapes the imagebuilder's and the Provider's pods.
func (s pipeline) jobSeries(t *testing.T) jobSeriesSample {
	t.Helper()
	bodies := map[string]string{}
	for role, selector := range map[string]string{
		"imagebuilder": "app.kubernetes.io/component=imagebuilder",
		"provider":     banlieuev1.LabelProvider + "=" + s.provider,
	} {
		pods, err := s.n.cs.CoreV1().Pods(systemNS).List(t.Context(), metav1.ListOptions{LabelSelector: selector})
		if err != nil || len(pods.Items) != 1 {
			t.Fatalf("the %s pod (%s): %v (%d pods)", role, selector, err, len(pods.Items))
		}
		code, body := s.scraper.GetFrom(pods.Items[0].Status.PodIP, 8080)
		if code != 200 {
			t.Fatalf("GET /metrics of %s pod %s: %d %s", role, pods.Items[0].Name, code, body)
		}
		bodies[role] = body
	}
	out := jobSeriesSample{}
	for key, n := range jobSeriesNames {
		v, ok := sampleOf(bodies[n.role], n.series)
		if !ok {
			t.Fatalf("the %s pod exports no %s", n.role, n.series)
		}
		out[key] = v
	}
	return out
}

// sampleOf is the value of the exposition line of series (its name and whole label set as the
// text format prints them).
func sampleOf(body, series string) (float64, bool) {
	for line := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}

// expectGrowth waits up to 30 s for each series to have grown from before by exactly want: the
// roles record a Job just after they write the status the test waited for.
func (before jobSeriesSample) expectGrowth(t *testing.T, s pipeline, want map[string]float64) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "build and import series recorded", func() error {
		now := s.jobSeries(t)
		var off []string
		for key, w := range want {
			if d := now[key] - before[key]; d != w {
				off = append(off, fmt.Sprintf("%s grew by %v, want %v", key, d, w))
			}
		}
		return testenv.Unmet(len(off) == 0, strings.Join(off, "; "))
	})
}

// qcow2Image makes a qcow2 disk of size bytes with one 1 MiB block of pattern at offset, and the
// raw disk qemu-img converts it to: the reference the pipeline's output is compared with.
func qcow2Image(t *testing.T, dir, base string, size string, pattern byte, offset string) (qcow2, raw string) {
	t.Helper()
	qcow2, raw = filepath.Join(dir, base+".qcow2"), filepath.Join(t.TempDir(), base+".raw")
	for _, argv := range [][]string{
		{"qemu-img", "create", "-q", "-f", "qcow2", qcow2, size},
		{"qemu-io", "-c", fmt.Sprintf("write -P 0x%02x %s 1M", pattern, offset), qcow2},
		{"qemu-img", "convert", "-O", "raw", qcow2, raw},
	} {
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
		}
	}
	return qcow2, raw
}

// isoImage writes a minimal ISO 9660 look-alike: what the build recognises an ISO by is the
// first volume descriptor's "CD001" at 0x8001.
func isoImage(t *testing.T, path string) string {
	t.Helper()
	data := make([]byte, 1<<20)
	copy(data[0x8000:], append([]byte{1}, "CD001"...))
	_, _ = rand.Read(data[0x9000:0xa000])
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
