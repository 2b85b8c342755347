package build

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// diskDir is where a containerDisk image keeps its one disk file.
const diskDir = "disk/"

// Architecture selects the platform of a multi-arch index; set by the command from the
// VMImage's spec.architecture (amd64 or arm64).
var Architecture = "amd64"

// pullDisk streams the disk file of a containerDisk image into path and returns the manifest
// digest. Layers are read one at a time, from the top, so memory stays at one tar header.
func pullDisk(ctx context.Context, ref, dst string) (string, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return "", fmt.Errorf("invalid --from: %w", err)
	}
	img, err := remote.Image(r, remote.WithContext(ctx),
		remote.WithPlatform(v1.Platform{OS: "linux", Architecture: Architecture}))
	if err != nil {
		return "", fmt.Errorf("pulling %s: %w", ref, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return "", err
	}
	layers, err := img.Layers()
	if err != nil {
		return "", err
	}
	// The top-most layer that holds a disk file wins, as it would in the image's filesystem.
	for i := len(layers) - 1; i >= 0; i-- {
		found, err := extractDisk(layers[i], dst)
		if err != nil {
			return "", fmt.Errorf("reading layer %d of %s: %w", i, ref, err)
		}
		if found {
			return digest.String(), nil
		}
	}
	return "", fmt.Errorf("invalid --from: %s has no disk file under /%s", ref, diskDir)
}

func extractDisk(layer v1.Layer, dst string) (bool, error) {
	rc, err := layer.Uncompressed()
	if err != nil {
		return false, err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		p := strings.TrimPrefix(path.Clean("/"+h.Name), "/")
		if h.Typeflag != tar.TypeReg || !strings.HasPrefix(p, diskDir) || strings.Contains(strings.TrimPrefix(p, diskDir), "/") {
			continue
		}
		f, err := os.Create(dst)
		if err != nil {
			return false, err
		}
		_, err = copySparse(f, tr)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return true, err
	}
}
