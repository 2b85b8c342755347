package image

import (
	"context"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/internal/testenv/containerdisk"
	"banlieue.io/banlieue/internal/testenv/labhost"
	"banlieue.io/banlieue/pkg/libvirt"
)

const (
	providerNamespace = "banlieue-system"
	buildNamespace    = "banlieue-imagebuild"
	artifactsPVC      = "banlieue-artifacts"
	importSA          = "banlieue-import"
	waitTimeout       = 2 * time.Minute
)

// lab is the API server and the lab libvirtd of one test.
type lab struct {
	env    *testenv.Env
	lab    testenv.LibvirtLab
	dialer libvirt.Dialer
}

func newLab(t *testing.T) *lab {
	t.Helper()
	s := &lab{lab: testenv.RequireLibvirtLab(t)}
	requireTools(t, "qemu-img", "qemu-io")
	s.env = testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.dialer = labhost.Dialer(t, s.lab)
	s.env.CreateLabNamespace(ctx, t, s.lab, providerNamespace, "lab-creds", "lab-ca")
	s.env.Create(ctx, t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: buildNamespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: importSA, Namespace: buildNamespace}})
	return s
}

// dial connects to the lab host for one check. A connection per use, because the lab libvirtd
// is shared: another suite may restart it while this one waits for its controllers.
func (s *lab) dial(ctx context.Context, t *testing.T) *libvirt.Client {
	t.Helper()
	var err error
	for range 10 {
		var host *libvirt.Client
		if host, err = s.dialer.Dial(ctx); err == nil {
			t.Cleanup(func() { _ = host.Close() })
			return host
		}
		time.Sleep(time.Second)
	}
	t.Fatalf("dialling the lab host: %v", err)
	return nil
}

func requireTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.MissingPrerequisite(t, tool+" not installed (qemu-utils)")
		}
	}
}

// createPool starts a transient dir pool with a unique name; it and its volumes go when the
// test ends.
func (s *lab) createPool(ctx context.Context, t *testing.T, prefix string) string {
	t.Helper()
	poolName := prefix + "-" + testenv.RunID()
	labhost.CreatePool(ctx, t, s.dial(ctx, t), s.lab, poolName)
	return poolName
}

// createProvider creates a libvirt Provider for the lab whose storage class i maps to pools[i].
func (s *lab) createProvider(ctx context.Context, t *testing.T, providerName string, pools ...string) {
	t.Helper()
	var classes []banlieuev1.StorageClassMapping
	for i, pool := range pools {
		classes = append(classes, banlieuev1.StorageClassMapping{Name: fmt.Sprintf("sc-%d", i), Target: map[string]string{"pool": pool}})
	}
	s.env.Create(ctx, t, s.lab.Provider(providerNamespace, providerName, "lab-creds", "lab-ca",
		banlieuev1.ProviderCapabilities{StorageClasses: classes}))
}

func (s *lab) createImage(ctx context.Context, t *testing.T, imageName, importFrom, sum string) {
	t.Helper()
	img := &banlieuev1.VMImage{
		ObjectMeta: metav1.ObjectMeta{Name: imageName},
		Spec: banlieuev1.VMImageSpec{OSFamily: "linux", OSDistribution: "cirros", OSVersion: "0.6", Architecture: "amd64",
			Sources: []banlieuev1.ImageSource{{ProviderClass: "libvirt", Kind: banlieuev1.SourceURL, ImportFrom: importFrom, Checksum: sum}}},
	}
	if err := s.env.Client.Create(ctx, img); err != nil {
		t.Fatal(err)
	}
}

func (s *lab) image(ctx context.Context, t *testing.T, imageName string) *banlieuev1.VMImage {
	t.Helper()
	var img banlieuev1.VMImage
	if err := s.env.Client.Get(ctx, client.ObjectKey{Name: imageName}, &img); err != nil {
		t.Fatal(err)
	}
	return &img
}

// waitImage polls the image until ok accepts it, and returns it.
func (s *lab) waitImage(ctx context.Context, t *testing.T, imageName, what string, ok func(*banlieuev1.VMImage) bool) *banlieuev1.VMImage {
	t.Helper()
	var img banlieuev1.VMImage
	testenv.Eventually(t, waitTimeout, "VMImage "+imageName+": "+what, func() error {
		img = banlieuev1.VMImage{}
		err := s.env.Client.Get(ctx, client.ObjectKey{Name: imageName}, &img)
		return testenv.Unmet(err == nil && ok(&img), fmt.Sprintf("status %s (%v)", dump(img.Status), err))
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

// row is the image's row for the Provider, if any.
func row(img *banlieuev1.VMImage, providerName string) (banlieuev1.ProviderImageStatus, bool) {
	for _, r := range img.Status.PerProvider {
		if r.ProviderName == providerName && r.ProviderNamespace == providerNamespace {
			return r, true
		}
	}
	return banlieuev1.ProviderImageStatus{}, false
}

// jobs lists the build namespace's Jobs of one component for the image, by UID.
func (s *lab) jobs(ctx context.Context, t *testing.T, imageName, component string) map[string]batchv1.Job {
	t.Helper()
	var list batchv1.JobList
	if err := s.env.Client.List(ctx, &list, client.InNamespace(buildNamespace),
		client.MatchingLabels{"banlieue.io/vmimage": imageName, "app.kubernetes.io/component": component}); err != nil {
		t.Fatal(err)
	}
	out := map[string]batchv1.Job{}
	for _, j := range list.Items {
		out[string(j.UID)] = j
	}
	return out
}

// volumeSHA256 hashes a volume's file, found through libvirt (a dir pool's volume key is its
// path, visible here because the lab's pools live under the lab directory). Reading it with
// STORAGE_VOL_DOWNLOAD would be nicer, but pkg/libvirt currently rejects a download whose
// stream data arrives before the call's reply, which libvirtd does for volumes this size.
func (s *lab) volumeSHA256(ctx context.Context, t *testing.T, poolName, volume string) string {
	t.Helper()
	host := s.dial(ctx, t)
	pool, err := host.StoragePoolLookupByName(ctx, poolName)
	if err != nil {
		t.Fatal(err)
	}
	if err := host.StoragePoolRefresh(ctx, pool); err != nil {
		t.Fatal(err)
	}
	vol, err := host.StorageVolLookupByName(ctx, pool, volume)
	if err != nil {
		t.Fatalf("volume %s in pool %s: %v", volume, poolName, err)
	}
	return testenv.FileSHA256(t, vol.Key)
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

// tlsServer serves dir over HTTPS (Range requests included) and returns its base URL and a PEM
// file of its certificate, for the build's SSL_CERT_FILE.
func tlsServer(t *testing.T, dir string) (string, string) {
	t.Helper()
	srv := httptest.NewTLSServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	certFile := filepath.Join(t.TempDir(), "server.pem")
	data := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(certFile, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return srv.URL, certFile
}

// pushContainerDisk serves an in-process registry and pushes a containerDisk image holding disk
// as /disk/disk.img; it returns the reference and the manifest digest.
func pushContainerDisk(t *testing.T, disk string) (string, string) {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	img, err := containerdisk.Image(disk)
	if err != nil {
		t.Fatal(err)
	}
	refStr := strings.TrimPrefix(srv.URL, "http://") + "/containerdisks/tiny:1"
	ref, err := name.ParseReference(refStr)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	digest, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return refStr, digest.String()
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
