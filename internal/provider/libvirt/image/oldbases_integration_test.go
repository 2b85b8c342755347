//go:build node

package image

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/imagebuilder/checksum"
	providerlibvirt "banlieue.io/banlieue/internal/provider/libvirt"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/pkg/libvirt"
)

// labOldBaseGrace is the controllers' OldBaseGrace in these tests.
const labOldBaseGrace = time.Second

// TestOldBasesCollectedOnTheRealNode runs the controllers against the real node and the lab host (node_suite_test.go): an
// old base stays while a LibvirtMachine boots from it or an overlay backs onto it, and goes
// (volume and marker) once neither does; the current base and strangers' volumes named like
// old bases are never touched.
func TestOldBasesCollectedOnTheRealNode(t *testing.T) {
	s := newNodeSuite(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	artifacts := s.startControllers(ctx, t)
	pool := s.createPool(ctx, t, "gc")
	s.createProvider(ctx, t, "lab", pool.Name)
	const image = "gc"
	s.createImage(ctx, t, image, banlieuev1.ImageSource{ProviderClass: "libvirt", Kind: banlieuev1.SourceURL,
		ImportFrom: "https://images.example/gc.img"})
	src := filepath.Join(artifacts, "gc.raw")

	// Strangers named as old bases of this VMImage: without a marker; with a .sha256 volume
	// that is not banlieue's; with a complete banlieue marker of another digest than the
	// name's (a by-hand import under such a --volume-name).
	strangers := map[string]string{}
	noMarker := providerlibvirt.ArtifactVolumeName(image, randomHex(32), false)
	s.writeVolume(ctx, t, pool, noMarker, []byte("another tool's disk"))
	foreignMarker := providerlibvirt.ArtifactVolumeName(image, randomHex(32), false)
	s.writeVolume(ctx, t, pool, foreignMarker, []byte("another tool's disk"))
	s.writeVolume(ctx, t, pool, markerName(foreignMarker), []byte("not a digest\n"))
	otherDigest := providerlibvirt.ArtifactVolumeName(image, randomHex(32), false)
	s.writeVolume(ctx, t, pool, otherDigest, []byte("imported by hand"))
	s.writeVolume(ctx, t, pool, markerName(otherDigest), markerContent(complete, checksum.Digest{Alg: "sha256", Hex: randomHex(32)}))
	for _, name := range []string{noMarker, foreignMarker, markerName(foreignMarker), otherDigest, markerName(otherDigest)} {
		strangers[name] = s.volumeState(ctx, t, pool, name)
	}

	// importVersion publishes a new artifact and waits until the row names its volume.
	importVersion := func(t *testing.T, offset int64) (volume, sum string) {
		t.Helper()
		writeFile(t, src, 8<<20, []int64{offset}, 1<<20)
		sum = testenv.FileSHA256(t, src)
		volume = providerlibvirt.ArtifactVolumeName(image, sum, false)
		s.publishArtifact(ctx, t, image, "gc.raw", src)
		s.waitRow(ctx, t, image, "lab", func(r banlieuev1.ProviderImageStatus) bool { return r.Ready && r.ResolvedRef == volume })
		s.assertImported(ctx, t, pool, volume, src)
		return volume, sum
	}

	v1, sum1 := importVersion(t, 0)
	overlay1 := s.createOverlay(ctx, t, pool, "gc-vm-os.qcow2", v1)
	machine := &infrav1.LibvirtMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "gc-vm", Namespace: providerNamespace},
		Spec: infrav1.LibvirtMachineSpec{
			ProviderRef: &infrav1.ProviderReference{Name: "lab"},
			Pool:        pool.Name,
			DomainName:  providerNamespace + "-gc-vm",
			BootSource:  infrav1.BootSource{Kind: infrav1.BootBackingVolume, Volume: v1},
			VCPUs:       1,
			MemoryMiB:   128,
			Firmware:    banlieuev1.FirmwareBIOS,
			Disks:       []infrav1.LibvirtDisk{{Name: "os", SizeGiB: 1}},
		},
	}
	if err := s.env.Client.Create(ctx, machine); err != nil {
		t.Fatal(err)
	}

	v2, sum2 := importVersion(t, 1<<20)

	t.Run("kept while a machine boots from it and its overlay backs onto it", func(t *testing.T) {
		s.settle(ctx, t, image)
		s.assertBase(ctx, t, pool, v1, sum1)
	})

	t.Run("kept while only the machine names it", func(t *testing.T) {
		s.deleteVolume(ctx, t, pool, overlay1)
		s.settle(ctx, t, image)
		s.assertBase(ctx, t, pool, v1, sum1)
	})

	t.Run("deleted, with its marker, once the machine is gone", func(t *testing.T) {
		start := time.Now()
		// No poke: the LibvirtMachine's deletion brings the pass.
		if err := s.env.Client.Delete(ctx, machine); err != nil {
			t.Fatal(err)
		}
		s.waitGone(ctx, t, pool, v1, 30*time.Second)
		t.Logf("old base %s and its marker deleted %s after the LibvirtMachine", v1, time.Since(start).Round(10*time.Millisecond))
		s.assertBase(ctx, t, pool, v2, sum2)
	})

	// The overlay goes on v2 while v2 is still the current base: made after v3's import, it
	// raced the collector, which may delete v2 (unreferenced by then) once its grace is over.
	overlay2 := s.createOverlay(ctx, t, pool, "by-hand.qcow2", v2)
	v3, sum3 := importVersion(t, 2<<20)

	t.Run("kept while an overlay alone backs onto it", func(t *testing.T) {
		s.settle(ctx, t, image)
		s.assertBase(ctx, t, pool, v2, sum2)
	})

	t.Run("deleted once the overlay is gone", func(t *testing.T) {
		s.deleteVolume(ctx, t, pool, overlay2)
		start := time.Now()
		// Nothing in the API changes when an overlay goes: poke, as the next periodic pass would.
		s.poke(ctx, t, image)
		s.waitGone(ctx, t, pool, v2, 30*time.Second)
		t.Logf("old base %s and its marker deleted %s after the pass that followed the overlay's removal", v2, time.Since(start).Round(10*time.Millisecond))
		s.assertBase(ctx, t, pool, v3, sum3)
	})

	t.Run("strangers named like old bases are never touched", func(t *testing.T) {
		s.settle(ctx, t, image)
		for name, before := range strangers {
			if after := s.volumeState(ctx, t, pool, name); after != before {
				t.Errorf("%s changed: %s, then %s", name, before, after)
			}
		}
	})
}

// createOverlay creates a qcow2 overlay backing onto base, as a machine's OS disk is.
func (s *labSuite) createOverlay(ctx context.Context, t *testing.T, pool libvirt.StoragePool, name, base string) string {
	t.Helper()
	b, ok := s.volumes(ctx, t, pool)[base]
	if !ok {
		t.Fatalf("base %s not in pool %s", base, pool.Name)
	}
	if _, err := s.host.StorageVolCreateXML(ctx, pool, fmt.Sprintf(`<volume type='file'><name>%s</name>`+
		`<capacity unit='bytes'>%d</capacity><target><format type='qcow2'/></target>`+
		`<backingStore><path>%s</path><format type='raw'/></backingStore></volume>`, name, 16<<20, b.Key), 0); err != nil {
		t.Fatal(err)
	}
	return name
}

// poke changes an annotation of the VMImage, which brings a pass of its controller.
func (s *labSuite) poke(ctx context.Context, t *testing.T, image string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"test.banlieue.io/poke":"%d"}}}`, time.Now().UnixNano())
	if err := s.env.Client.Patch(ctx, &banlieuev1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: image}},
		client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// settle lets the grace pass and brings a few passes of the image's controller, after which
// whatever a pass would delete is gone.
func (s *labSuite) settle(ctx context.Context, t *testing.T, image string) {
	t.Helper()
	time.Sleep(labOldBaseGrace)
	for range 3 {
		s.poke(ctx, t, image)
		time.Sleep(time.Second)
	}
}

// assertBase checks that the base and its marker are in the pool and the base holds sum.
func (s *labSuite) assertBase(ctx context.Context, t *testing.T, pool libvirt.StoragePool, volume, sum string) {
	t.Helper()
	vols := s.volumes(ctx, t, pool)
	v, ok := vols[volume]
	if !ok {
		t.Fatalf("base %s is gone from pool %s", volume, pool.Name)
	}
	if _, ok := vols[markerName(volume)]; !ok {
		t.Errorf("the marker of base %s is gone", volume)
	}
	if got := testenv.FileSHA256(t, v.Key); got != sum {
		t.Errorf("base %s holds sha256 %s, want %s", volume, got, sum)
	}
}

// waitGone waits until neither the volume nor its marker is in the pool.
func (s *labSuite) waitGone(ctx context.Context, t *testing.T, pool libvirt.StoragePool, volume string, timeout time.Duration) {
	t.Helper()
	testenv.Eventually(t, timeout, fmt.Sprintf("%s and its marker gone from pool %s", volume, pool.Name), func() error {
		vols := s.volumes(ctx, t, pool)
		_, hasVol := vols[volume]
		_, hasMarker := vols[markerName(volume)]
		return testenv.Unmet(!hasVol && !hasMarker, fmt.Sprintf("volume present: %v, marker present: %v", hasVol, hasMarker))
	})
}
