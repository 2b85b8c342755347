package build

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func TestBuildFromOCIContainerDisk(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
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
	ref, err := name.ParseReference(strings.TrimPrefix(srv.URL, "http://") + "/disks/cirros:0.6")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	digest, _ := img.Digest()

	output := filepath.Join(t.TempDir(), "cirros.raw")
	res, err := Build(context.Background(), Options{VMImage: "cirros", From: ref.String(), Output: output, Limits: DefaultLimits()}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(output)
	if !bytes.Equal(got, disk) || res.SourceDigest != digest.String() {
		t.Errorf("disk mismatch (%d bytes) or digest %s != %s", len(got), res.SourceDigest, digest)
	}
}
