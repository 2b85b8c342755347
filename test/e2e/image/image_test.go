// Package image runs the whole VMImage pipeline end to end: the imagebuilder's build Jobs, the
// libvirt provider's Provider and VMImage controllers and their import Jobs, against envtest and
// the lab libvirtd, with the Job runner running the real banlieue binary in place of pods.
// Sources are a local HTTPS server and an in-process OCI registry.
package image

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/imagebuilder"
	"banlieue.io/banlieue/internal/imagebuilder/build"
	providerlibvirt "banlieue.io/banlieue/internal/provider/libvirt"
	libvirtrole "banlieue.io/banlieue/internal/provider/libvirt/role"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/pkg/extentdigest"
	"banlieue.io/banlieue/test/jobrunner"
)

const importComponent = "libvirt-import"

func TestImagePipeline(t *testing.T) {
	s := newLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	served := t.TempDir()
	baseURL, certFile := tlsServer(t, served)
	_, rawA := qcow2Image(t, served, "cirros-a", "16M", 0xab, "0")
	_, rawB := qcow2Image(t, served, "cirros-b", "16M", 0xcd, "3M")
	ociDisk, rawOCI := qcow2Image(t, t.TempDir(), "tiny", "8M", 0x5a, "1M")
	ociRef, ociDigest := pushContainerDisk(t, ociDisk)
	// Pools before the runner: cleanups run in reverse, so the pools outlive the last import.
	poolA, poolB := s.createPool(ctx, t, "e2e-a"), s.createPool(ctx, t, "e2e-b")

	bin := testenv.Banlieue(t)
	artifacts := t.TempDir()
	(&jobrunner.Runner{
		Client: s.env.Client, Binary: bin, Kubeconfig: s.env.Kubeconfig(t),
		Volumes: map[string]string{artifactsPVC: artifacts},
		// What a cluster's CA bundle would do for a real mirror.
		Env:  []string{"SSL_CERT_FILE=" + certFile},
		Logf: t.Logf,
	}).Start(t)

	testenv.SetLogger(t)
	mgr := s.env.NewManager(t)
	// As in the roles' managers: the build and import series are recorded from the election on.
	if err := mgr.Add(app.LeaderGauge(mgr, "e2e-image")); err != nil {
		t.Fatal(err)
	}
	if err := libvirtrole.Setup(mgr, libvirtrole.Options{BuildNamespace: buildNamespace, ImportImage: "banlieue:test",
		ImportServiceAccount: importSA, Resync: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	// The sources listen on loopback, the registry over plain HTTP: what an on-premises mirror
	// needs allowed (docs/guides/image-sources.md, "Transport").
	limits := build.DefaultLimits()
	limits.AllowNetworks = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	limits.InsecureRegistries = []string{strings.SplitN(ociRef, "/", 2)[0]}
	if err := imagebuilder.Setup(mgr, imagebuilder.Options{BuildNamespace: buildNamespace, BuildImage: "banlieue:test",
		ArtifactsPVC: artifactsPVC, NodeSelector: map[string]string{"banlieue.io/build": "true"}, Limits: limits}); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)

	s.createProvider(ctx, t, "lab", poolA, poolB)
	pools := []string{poolA, poolB}

	// importedEverywhere waits for the Provider's row to be ready with one zone per pool, then
	// checks each pool's volume holds want.
	importedEverywhere := func(t *testing.T, imageName, want string) *banlieuev1.VMImage {
		t.Helper()
		img := s.waitImage(ctx, t, imageName, "row ready", func(img *banlieuev1.VMImage) bool {
			r, ok := row(img, "lab")
			return ok && r.Ready
		})
		r, _ := row(img, "lab")
		// Imports are named by content, so a rebuilt artifact never replaces a base in use.
		volume := providerlibvirt.ArtifactVolumeName(imageName, want, false)
		if r.Reason != banlieuev1.ReasonReconciled || r.ResolvedRef != volume || len(r.Zones) != len(pools) {
			t.Fatalf("row = %+v, want resolvedRef %s", r, volume)
		}
		for i, pool := range pools {
			if z := r.Zones[i]; z.Name != pool || !z.Ready {
				t.Errorf("zone %d = %+v, want pool %s ready", i, z, pool)
			}
			if got := s.volumeSHA256(ctx, t, pool, volume); got != want {
				t.Errorf("volume %s/%s: sha256 %s, want %s (qemu-img convert of the source)", pool, volume, got, want)
			}
		}
		return img
	}

	t.Run("https qcow2 source: built, then imported into every pool", func(t *testing.T) {
		start := time.Now()
		series := jobSeries(t)
		s.createImage(ctx, t, "cirros", baseURL+"/cirros-a.qcow2", "")
		img := s.waitImage(ctx, t, "cirros", "buildArtifact Ready", func(img *banlieuev1.VMImage) bool {
			a := img.Status.BuildArtifact
			return a != nil && (a.Phase == banlieuev1.BuildReady || a.Phase == banlieuev1.BuildFailed)
		})
		a := img.Status.BuildArtifact
		want := testenv.FileSHA256(t, rawA)
		if a.Phase != banlieuev1.BuildReady || a.Reason != banlieuev1.ReasonReconciled || a.Kind != banlieuev1.ArtifactCloudImage ||
			a.File != "cirros.raw" || a.Checksum != "sha256:"+want || a.SizeBytes != 16<<20 ||
			a.PVCRef == nil || a.PVCRef.Name != artifactsPVC ||
			a.JobRef == nil || a.JobRef.Name != "build-cirros" || a.JobRef.Namespace != buildNamespace {
			t.Fatalf("buildArtifact = %+v", *a)
		}
		if got := testenv.FileSHA256(t, filepath.Join(artifacts, "cirros.raw")); got != want {
			t.Errorf("artifact on the PVC differs from qemu-img convert: %s, want %s", got, want)
		}
		// The build publishes the extent digest beside the sha256 (ADR-0134), and every import
		// Job verifies with it.
		if wantExtent := extentDigestOf(t, rawA); a.ExtentDigest != wantExtent {
			t.Errorf("buildArtifact.extentDigest = %q, want %s", a.ExtentDigest, wantExtent)
		}
		builds := s.jobs(ctx, t, "cirros", imagebuilder.ComponentBuild)
		if len(builds) != 1 {
			t.Fatalf("want one build Job, got %d", len(builds))
		}
		for _, j := range builds {
			if j.Spec.Template.Spec.NodeSelector["banlieue.io/build"] != "true" || j.OwnerReferences[0].Name != "cirros" {
				t.Errorf("build Job %s: nodeSelector %v owners %+v", j.Name, j.Spec.Template.Spec.NodeSelector, j.OwnerReferences)
			}
		}
		importedEverywhere(t, "cirros", want)
		imports := s.jobs(ctx, t, "cirros", importComponent)
		if n := len(imports); n != len(pools) {
			t.Errorf("want one import Job per pool, got %d", n)
		}
		for _, j := range imports {
			if args := j.Spec.Template.Spec.Containers[0].Args; !slices.Equal(args[len(args)-2:], []string{"--extent-digest", a.ExtentDigest}) {
				t.Errorf("import Job %s: args %q end without --extent-digest %s", j.Name, args, a.ExtentDigest)
			}
		}
		// The roles recorded the finished build Job and each import Job once, with the
		// artifact's 16 MiB (docs/operations.md, "banlieue's series").
		series.expectGrowth(t, map[string]float64{
			"build succeeded": 1, "build bytes": 16 << 20,
			"import succeeded": float64(len(pools)), "import bytes": float64(len(pools) * 16 << 20),
			"build failed": 0, "import failed": 0,
		})
		t.Logf("https source Ready on %d pools in %s", len(pools), time.Since(start).Round(time.Millisecond))
	})

	t.Run("OCI reference by tag alone: refused before any Job", func(t *testing.T) {
		s.createImage(ctx, t, "tagonly", ociRef, "")
		img := s.waitImage(ctx, t, "tagonly", "buildArtifact Failed", func(img *banlieuev1.VMImage) bool {
			a := img.Status.BuildArtifact
			return a != nil && a.Phase == banlieuev1.BuildFailed
		})
		if a := img.Status.BuildArtifact; !strings.Contains(a.Message, "set spec.sources[0].checksum") {
			t.Errorf("buildArtifact = %+v", *a)
		}
		if n := len(s.jobs(ctx, t, "tagonly", imagebuilder.ComponentBuild)); n != 0 {
			t.Errorf("%d build Jobs for a refused source", n)
		}
	})

	t.Run("OCI containerDisk source", func(t *testing.T) {
		start := time.Now()
		// By digest: the pull verifies the manifest and every layer against it.
		s.createImage(ctx, t, "tiny", strings.TrimSuffix(ociRef, ":1")+"@"+ociDigest, "")
		img := importedEverywhere(t, "tiny", testenv.FileSHA256(t, rawOCI))
		a := img.Status.BuildArtifact
		if a.SourceDigest != ociDigest || a.SizeBytes != 8<<20 || a.File != "tiny.raw" {
			t.Errorf("buildArtifact = %+v, want sourceDigest %s", *a, ociDigest)
		}
		t.Logf("OCI source Ready in %s", time.Since(start).Round(time.Millisecond))
	})

	t.Run("wrong checksum behind a credentialed URL: BuildFailed, no import Job, no credential shown", func(t *testing.T) {
		bad := "sha256:" + strings.Repeat("0", 64)
		// The file server ignores both; the build must never print either.
		const secret = "e2e-s3cr3t"
		from := strings.Replace(baseURL, "https://", "https://robot:"+secret+"@", 1) + "/cirros-a.qcow2?X-Amz-Signature=" + secret
		s.createImage(ctx, t, "badsum", from, bad)
		defer func() {
			img := s.image(ctx, t, "badsum")
			if img.Status.BuildArtifact == nil {
				t.Fatal("no buildArtifact")
			}
			shown := fmt.Sprintf("%+v %+v", *img.Status.BuildArtifact, img.Status.PerProvider)
			for _, j := range s.jobs(ctx, t, "badsum", imagebuilder.ComponentBuild) {
				shown += fmt.Sprintf("%v %+v", j.Annotations, j.Spec)
			}
			if strings.Contains(shown, secret) {
				t.Errorf("the source's credential is in the status or the build Job: %s", shown)
			}
			if !strings.Contains(img.Status.BuildArtifact.Message, "https://REDACTED@") {
				t.Errorf("buildArtifact.message %q does not name the redacted source", img.Status.BuildArtifact.Message)
			}
		}()
		img := s.waitImage(ctx, t, "badsum", "buildArtifact Failed", func(img *banlieuev1.VMImage) bool {
			a := img.Status.BuildArtifact
			return a != nil && a.Phase == banlieuev1.BuildFailed
		})
		a := img.Status.BuildArtifact
		if a.Reason != banlieuev1.ReasonBuildFailed || !strings.Contains(a.Message, "checksum mismatch") || !strings.Contains(a.Message, bad) {
			t.Errorf("buildArtifact = %+v", *a)
		}
		img = s.waitImage(ctx, t, "badsum", "row BuildFailed", func(img *banlieuev1.VMImage) bool {
			r, ok := row(img, "lab")
			return ok && r.Reason == banlieuev1.ReasonBuildFailed
		})
		if r, _ := row(img, "lab"); r.Ready || !strings.Contains(r.Message, "checksum mismatch") {
			t.Errorf("row = %+v", r)
		}
		if n := len(s.jobs(ctx, t, "badsum", importComponent)); n != 0 {
			t.Errorf("%d import Jobs for a failed build", n)
		}
		if _, err := os.Stat(filepath.Join(artifacts, "badsum.raw")); !os.IsNotExist(err) {
			t.Errorf("an artifact was published for a failed build: %v", err)
		}
	})

	t.Run("an ISO behind a URL without .iso is rebuilt under the .iso name", func(t *testing.T) {
		start := time.Now()
		iso := isoImage(t, filepath.Join(served, "installer"))
		s.createImage(ctx, t, "installer", baseURL+"/installer", "")
		img := s.waitImage(ctx, t, "installer", "row ready", func(img *banlieuev1.VMImage) bool {
			r, ok := row(img, "lab")
			return ok && r.Ready
		})
		a := img.Status.BuildArtifact
		if a.Kind != banlieuev1.ArtifactISO || a.File != "installer.iso" {
			t.Fatalf("buildArtifact = %+v", *a)
		}
		builds := s.jobs(ctx, t, "installer", imagebuilder.ComponentBuild)
		for _, j := range builds {
			if len(builds) != 1 || j.Annotations[banlieuev1.AnnotationArtifactKind] != string(banlieuev1.ArtifactISO) {
				t.Errorf("build Jobs: %d, annotations %v", len(builds), j.Annotations)
			}
		}
		want := testenv.FileSHA256(t, iso)
		volume := providerlibvirt.ArtifactVolumeName("installer", want, true)
		if r, _ := row(img, "lab"); r.ResolvedRef != volume {
			t.Errorf("row = %+v, want resolvedRef %s", r, volume)
		}
		for _, pool := range pools {
			if got := s.volumeSHA256(ctx, t, pool, volume); got != want {
				t.Errorf("volume %s/%s differs from the ISO", pool, volume)
			}
		}
		t.Logf("ISO found by content, rebuilt and imported in %s", time.Since(start).Round(time.Millisecond))
	})

	t.Run("changing importFrom rebuilds and replaces the import Jobs", func(t *testing.T) {
		start := time.Now()
		oldBuilds := s.jobs(ctx, t, "cirros", imagebuilder.ComponentBuild)
		oldImports := s.jobs(ctx, t, "cirros", importComponent)
		oldChecksum := s.image(ctx, t, "cirros").Status.BuildArtifact.Checksum
		img := s.image(ctx, t, "cirros")
		img.Spec.Sources[0].ImportFrom = baseURL + "/cirros-b.qcow2"
		if err := s.env.Client.Update(ctx, img); err != nil {
			t.Fatal(err)
		}
		want := testenv.FileSHA256(t, rawB)
		s.waitImage(ctx, t, "cirros", "rebuilt artifact Ready", func(img *banlieuev1.VMImage) bool {
			a := img.Status.BuildArtifact
			return a != nil && a.Phase == banlieuev1.BuildReady && a.Checksum != oldChecksum
		})
		if a := s.image(ctx, t, "cirros").Status.BuildArtifact; a.Checksum != "sha256:"+want {
			t.Fatalf("rebuilt buildArtifact = %+v, want checksum sha256:%s", *a, want)
		}
		builds := s.jobs(ctx, t, "cirros", imagebuilder.ComponentBuild)
		src := s.image(ctx, t, "cirros").Spec.Sources[0]
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
		if err := s.env.Client.Get(ctx, client.ObjectKey{Namespace: buildNamespace, Name: imagebuilder.SourceSecretName("cirros")}, &secret); err != nil ||
			string(secret.Data["from"]) != src.ImportFrom {
			t.Errorf("build Secret: %v, from=%q, want %q", err, secret.Data["from"], src.ImportFrom)
		}
		s.waitImage(ctx, t, "cirros", "new import Jobs ready", func(img *banlieuev1.VMImage) bool {
			r, ok := row(img, "lab")
			if !ok || !r.Ready {
				return false
			}
			imports := s.jobs(ctx, t, "cirros", importComponent)
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
}

// jobSeriesSample is where the build and import series stood at a point of the test.
type jobSeriesSample map[string]float64

var jobSeriesNames = map[string]struct {
	name   string
	labels map[string]string
}{
	"build succeeded":  {"banlieue_image_build_duration_seconds", map[string]string{"result": "succeeded"}},
	"build failed":     {"banlieue_image_build_duration_seconds", map[string]string{"result": "failed"}},
	"build bytes":      {"banlieue_image_build_bytes_total", map[string]string{}},
	"import succeeded": {"banlieue_image_import_duration_seconds", map[string]string{"result": "succeeded"}},
	"import failed":    {"banlieue_image_import_duration_seconds", map[string]string{"result": "failed"}},
	"import bytes":     {"banlieue_image_import_bytes_total", map[string]string{}},
}

// jobSeries reads the build and import series of this process's registry, where the roles of
// the test's manager record.
func jobSeries(t *testing.T) jobSeriesSample {
	t.Helper()
	out := jobSeriesSample{}
	for key, s := range jobSeriesNames {
		v, ok := testenv.RegistrySample(t, s.name, s.labels)
		if !ok {
			t.Fatalf("%s%v is not exported", s.name, s.labels)
		}
		out[key] = v
	}
	return out
}

// expectGrowth waits up to 10 s for each series to have grown from before by exactly want: the
// imagebuilder records a build just after it writes the status the test waited for.
func (before jobSeriesSample) expectGrowth(t *testing.T, want map[string]float64) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, "build and import series recorded", func() error {
		now := jobSeries(t)
		var off []string
		for key, w := range want {
			if d := now[key] - before[key]; d != w {
				off = append(off, fmt.Sprintf("%s grew by %v, want %v", key, d, w))
			}
		}
		return testenv.Unmet(len(off) == 0, strings.Join(off, "; "))
	})
}

// extentDigestOf is the extent digest of the whole file at path.
func extentDigestOf(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	x := extentdigest.New(int64(len(b)))
	_, _ = x.Write(b)
	d, err := x.Sum()
	if err != nil {
		t.Fatal(err)
	}
	return d
}
