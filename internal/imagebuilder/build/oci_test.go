package build

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// containerDisk is a containerDisk image pushed to an in-process registry.
type containerDisk struct {
	tag      string // host:port/disks/cirros:0.6
	digest   string // host:port/disks/cirros@sha256:...
	disk     []byte
	sum      string // of disk
	requests *atomic.Int32
}

// pushContainerDisk starts a registry (over TLS unless plain) and pushes a one-layer
// containerDisk image to it.
func pushContainerDisk(t *testing.T, plain bool) containerDisk {
	var requests atomic.Int32
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { requests.Add(1); reg.ServeHTTP(w, r) })
	srv := httptest.NewUnstartedServer(h)
	if plain {
		srv.Start()
	} else {
		srv.StartTLS()
		trustTestServers(t, srv)
	}
	t.Cleanup(srv.Close)
	disk := make([]byte, 2<<20)
	_, _ = rand.Read(disk[:4096])
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	_ = tw.WriteHeader(&tar.Header{Name: "disk/", Typeflag: tar.TypeDir, Mode: 0o755})
	_ = tw.WriteHeader(&tar.Header{Name: "disk/cirros.img", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(disk))})
	_, _ = tw.Write(disk)
	_ = tw.Close()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layer.Bytes())), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(strings.TrimPrefix(srv.URL, "http://"), "https://")
	opts := []name.Option{}
	if plain {
		opts = append(opts, name.Insecure)
	}
	ref, err := name.ParseReference(host+"/disks/cirros:0.6", opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithTransport(srv.Client().Transport)); err != nil {
		t.Fatal(err)
	}
	digest, _ := img.Digest()
	sum := sha256Of(disk)
	requests.Store(0)
	return containerDisk{tag: ref.String(), digest: host + "/disks/cirros@" + digest.String(), disk: disk, sum: sum, requests: &requests}
}

// trustTestServers makes the build's transport (a clone of http.DefaultTransport) trust the
// certificate every httptest TLS server presents.
func trustTestServers(t *testing.T, srv *httptest.Server) {
	def := http.DefaultTransport.(*http.Transport)
	old := def.TLSClientConfig
	def.TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig
	t.Cleanup(func() { def.TLSClientConfig = old })
}

func sha256Of(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func buildOCI(t *testing.T, o Options) ([]byte, Result, error) {
	o.Output = filepath.Join(t.TempDir(), "cirros.raw")
	res, err := Build(context.Background(), o, io.Discard)
	got, _ := os.ReadFile(o.Output)
	return got, res, err
}

func TestBuildFromOCIContainerDisk(t *testing.T) {
	cd := pushContainerDisk(t, false)
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"by digest", Options{From: cd.digest}},
		{"by tag with a checksum", Options{From: cd.tag, Checksum: cd.sum}},
		{"by tag, explicitly unverified", Options{From: cd.tag, AllowUnverifiedTag: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Limits = testLimits()
			got, res, err := buildOCI(t, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, cd.disk) || !strings.HasSuffix(cd.digest, "@"+res.SourceDigest) {
				t.Errorf("disk mismatch (%d bytes) or source digest %s", len(got), res.SourceDigest)
			}
		})
	}
}

// refusal runs a build that must be refused by rule, and returns its message.
func refusal(t *testing.T, o Options, rule string) string {
	t.Helper()
	_, _, err := buildOCI(t, o)
	var refused *RefusedError
	if !errors.As(err, &refused) || !strings.HasPrefix(refused.Rule, rule) {
		t.Fatalf("err = %v, want a refusal by %s", err, rule)
	}
	return err.Error()
}

func TestOCIRefusals(t *testing.T) {
	cd := pushContainerDisk(t, false)
	t.Run("a tag without digest or checksum", func(t *testing.T) {
		msg := refusal(t, Options{From: cd.tag, Limits: testLimits()}, "--checksum, a digest or --allow-unverified-tag")
		if !strings.Contains(msg, cd.tag+" names a tag") || cd.requests.Load() != 0 {
			t.Errorf("%s; %d requests reached the registry", msg, cd.requests.Load())
		}
	})
	t.Run("a loopback registry not allow-listed", func(t *testing.T) {
		msg := refusal(t, Options{From: cd.digest, Limits: DefaultLimits()}, "--allow-network")
		if !strings.Contains(msg, "127.0.0.1 is a loopback address") || cd.requests.Load() != 0 {
			t.Errorf("%s; %d requests reached the registry", msg, cd.requests.Load())
		}
	})
	t.Run("a layer over --max-download-size", func(t *testing.T) {
		l := testLimits()
		// The layer's gzip holds 4 KiB of random bytes: more than 4 KiB, refused before it is read.
		l.MaxDownloadBytes = 4 << 10
		msg := refusal(t, Options{From: cd.digest, Limits: l}, "--max-download-size 4Ki")
		if !strings.Contains(msg, "layer 0 declares") {
			t.Error(msg)
		}
	})
	t.Run("a disk file over --max-disk-size", func(t *testing.T) {
		l := testLimits()
		l.MaxDiskBytes = 1 << 20
		msg := refusal(t, Options{From: cd.digest, Limits: l}, "--max-disk-size 1Mi")
		if !strings.Contains(msg, "disk file disk/cirros.img of 2097152 bytes") {
			t.Error(msg)
		}
	})
}

func TestOCIPlainHTTPRegistry(t *testing.T) {
	cd := pushContainerDisk(t, true)
	host := strings.SplitN(cd.digest, "/", 2)[0]
	// go-containerregistry would fall back to plain HTTP for a loopback host by itself.
	msg := refusal(t, Options{From: cd.digest, Limits: testLimits()}, "--insecure-registry")
	if !strings.Contains(msg, host+" over plain http") {
		t.Error(msg)
	}
	l := testLimits()
	l.InsecureRegistries = []string{host}
	got, _, err := buildOCI(t, Options{From: cd.digest, Limits: l})
	if err != nil || !bytes.Equal(got, cd.disk) {
		t.Fatalf("listed insecure: %v (%d bytes)", err, len(got))
	}
}

// A registry that serves more than the manifest declares is cut off by the transport's count,
// not trusted on its word.
func TestRegistryTransportCountsBytes(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write(make([]byte, 64<<10)) // chunked: no Content-Length to refuse up front
		w.(http.Flusher).Flush()
		_, _ = w.Write(make([]byte, 64<<10))
	}))
	defer srv.Close()
	trustTestServers(t, srv)
	l := testLimits()
	l.MaxDownloadBytes = 100 << 10
	rt := &registryTransport{next: newTransport(l), max: l.MaxDownloadBytes, left: l.MaxDownloadBytes}
	resp, err := (&http.Client{Transport: rt}).Get(srv.URL + "/v2/x/blobs/sha256:00")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if !isRefused(err) || n > 100<<10+32<<10 {
		t.Errorf("read %d bytes, err %v", n, err)
	}
}
