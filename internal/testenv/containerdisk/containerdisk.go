// Package containerdisk makes the OCI images the tests and the lab serve as VMImage sources: a
// KubeVirt containerDisk, one layer holding the disk as /disk/disk.img owned by uid/gid 107 (qemu),
// as the builder expects (docs/guides/image-sources.md).
package containerdisk

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Image is the containerDisk image of the disk file at path, for linux/amd64.
func Image(path string) (v1.Image, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	for _, h := range []*tar.Header{
		{Name: "disk/", Typeflag: tar.TypeDir, Mode: 0o555},
		{Name: "disk/disk.img", Typeflag: tar.TypeReg, Mode: 0o444, Size: int64(len(data)), Uid: 107, Gid: 107},
	} {
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layer.Bytes())), nil })
	if err != nil {
		return nil, fmt.Errorf("containerDisk layer of %s: %w", path, err)
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf.OS, cf.Architecture = "linux", "amd64"
	return mutate.ConfigFile(img, cf)
}
