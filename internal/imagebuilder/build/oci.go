package build

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// diskDir is where a containerDisk image keeps its one disk file.
const diskDir = "disk/"

// Architecture selects the platform of a multi-arch index; set by the command from the
// VMImage's spec.architecture (amd64 or arm64).
var Architecture = "amd64"

// FlagAllowUnverifiedTag is the build's flag for a VMImage source's allowUnverifiedTag.
const FlagAllowUnverifiedTag = "allow-unverified-tag"

// pinned says ref names its image by digest, which the pull verifies: the manifest's digest
// must be the one named, and each layer's the one the manifest names.
func pinned(ref name.Reference) bool {
	_, ok := ref.(name.Digest)
	return ok
}

// parseReference parses an OCI reference, plain HTTP allowed only for a registry listed in
// insecure. go-containerregistry would otherwise also try plain HTTP for localhost, `.localhost`
// and RFC 1918 hosts (name.Registry.Scheme); registryTransport refuses that.
func parseReference(ref string, insecure []string) (name.Reference, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("invalid --from: %w", err)
	}
	if slices.Contains(insecure, r.Context().RegistryStr()) {
		return name.ParseReference(ref, name.Insecure)
	}
	return r, nil
}

// pullDisk streams the disk file of a containerDisk image into path and returns the manifest
// digest. Layers are read one at a time, from the top, so memory stays at one tar header.
func pullDisk(ctx context.Context, r name.Reference, dst string, l Limits) (string, error) {
	rt := &registryTransport{next: newTransport(l), insecure: l.InsecureRegistries, left: l.MaxDownloadBytes, max: l.MaxDownloadBytes}
	img, err := remote.Image(r, remote.WithContext(ctx), remote.WithTransport(rt),
		remote.WithPlatform(v1.Platform{OS: "linux", Architecture: Architecture}))
	if err != nil {
		return "", fmt.Errorf("pulling %s: %w", r, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return "", fmt.Errorf("pulling %s: %w", r, err)
	}
	layers, err := img.Layers()
	if err != nil {
		return "", fmt.Errorf("pulling %s: %w", r, err)
	}
	// The top-most layer that holds a disk file wins, as it would in the image's filesystem.
	for i := len(layers) - 1; i >= 0; i-- {
		// The manifest's size for the layer refuses it before a byte is read; the transport's
		// count catches a registry that sends more than it declared.
		if size, err := layers[i].Size(); err == nil && size > rt.remaining() {
			return "", fmt.Errorf("pulling %s: %w", r, refusedBy(FlagMaxDownloadSize, l.MaxDownloadBytes,
				fmt.Sprintf("layer %d declares %d bytes", i, size)))
		}
		found, err := extractDisk(layers[i], dst, l.MaxDiskBytes)
		if err != nil {
			return "", fmt.Errorf("reading layer %d of %s: %w", i, r, err)
		}
		if found {
			return digest.String(), nil
		}
	}
	return "", fmt.Errorf("invalid --from: %s has no disk file under /%s", r, diskDir)
}

func extractDisk(layer v1.Layer, dst string, maxDisk int64) (bool, error) {
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
		if h.Size > maxDisk {
			return false, refusedBy(FlagMaxDiskSize, maxDisk, fmt.Sprintf("disk file %s of %d bytes", p, h.Size))
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

// registryTransport carries a pull's requests (the registry's, its token service's and its
// blob storage's): HTTPS only, except to a registry listed insecure, and at most max bytes of
// response bodies in all.
type registryTransport struct {
	next     http.RoundTripper
	insecure []string
	max      int64

	mu   sync.Mutex
	left int64
}

func (t *registryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" && !slices.Contains(t.insecure, req.URL.Host) {
		return nil, &RefusedError{Rule: "--" + FlagInsecureRegistry,
			Seen: fmt.Sprintf("%s over plain %s", req.URL.Host, req.URL.Scheme)}
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if left := t.remaining(); resp.ContentLength > left {
		_ = resp.Body.Close() // refused unread
		return nil, refusedBy(FlagMaxDownloadSize, t.max, fmt.Sprintf("%s announces %d bytes with %d left", req.URL.Host, resp.ContentLength, left))
	}
	resp.Body = &countedBody{ReadCloser: resp.Body, t: t}
	return resp, nil
}

func (t *registryTransport) remaining() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.left
}

// countedBody takes what it reads from the pull's budget and fails once it is spent.
type countedBody struct {
	io.ReadCloser
	t *registryTransport
}

func (b *countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.t.mu.Lock()
	defer b.t.mu.Unlock()
	b.t.left -= int64(n)
	if b.t.left < 0 {
		return n, refusedBy(FlagMaxDownloadSize, b.t.max, "the registry sent more")
	}
	return n, err
}
