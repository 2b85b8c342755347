// Package image is the libvirt half of the VMImage pipeline: the VMImage controller that
// publishes the libvirt perProvider rows and runs one import Job per pool, and the import those
// Jobs run (`banlieue provider libvirt import`), which streams a built artifact into a volume.
package image

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/imagebuilder/checksum"
	providerlibvirt "banlieue.io/banlieue/internal/provider/libvirt"
	"banlieue.io/banlieue/internal/provider/libvirt/hostconn"
	"banlieue.io/banlieue/pkg/extentdigest"
	"banlieue.io/banlieue/pkg/libvirt"
)

// callTimeout bounds every libvirt and API call of the import but the upload itself, whose
// length scales with the image; the upload is bounded per packet by the libvirt client instead.
const callTimeout = 30 * time.Second

// ImportOptions are the flags of `banlieue provider libvirt import`.
type ImportOptions struct {
	VMImage           string
	Provider          string
	ProviderNamespace string
	Pool              string
	Source            string
	VolumeName        string
	Checksum          string
	// ExtentDigest is --extent-digest, the artifact's extent digest (ADR-0134): verified
	// instead of the sha256 over the bytes uploaded, which then costs only their data.
	ExtentDigest string
}

// volumeName is the volume an import writes: --volume-name (an import Job passes
// ArtifactVolumeName), else defaultVolumeName, `.iso` for an ISO source
// (docs/guides/libvirt-provider.md, "Running an import by hand"). The name is checked here, before anything touches the host.
func (o ImportOptions) volumeName() (string, error) {
	flag, name := "--volume-name", o.VolumeName
	if name == "" {
		flag, name = "--vmimage", defaultVolumeName(o.VMImage, strings.EqualFold(filepath.Ext(o.Source), ".iso"))
	}
	switch {
	case len(name) > providerlibvirt.MaxVolumeName:
		return "", fmt.Errorf("invalid %s: volume name %q is %d characters, more than the %d a machine's boot volume may have",
			flag, name, len(name), providerlibvirt.MaxVolumeName)
	case strings.ContainsAny(name, "/\x00") || name == "." || name == "..":
		return "", fmt.Errorf("invalid %s: %q is not a volume name", flag, name)
	}
	return name, nil
}

// Importer runs one import. Kube reads the Provider and its credentials; Out receives progress,
// which is advisory: a failed write to Out is ignored and never fails the import.
type Importer struct {
	Kube client.Reader
	Out  io.Writer
	// Progress reports upload progress; nil selects NewProgress(Out).
	Progress func(total int64) libvirt.Progress
}

// Import performs docs/guides/libvirt-provider.md, "6. Get an image onto the host". The flags
// and what needs no read of the source (a non-empty regular file) are checked before anything
// touches the API server or the host. The checksum is verified over the very bytes uploaded,
// hashed as they are sent (uploadDigest; with --extent-digest, that digest instead, which
// hashes only the data: ADR-0134), and the marker says complete only when it matches:
// verifying a second read of the path would let a file rewritten in between be imported
// unverified. A mismatch deletes the volume and its marker, so a bad artifact leaves no trace.
// An imported volume is immutable: machines' overlays back onto it, so the import never
// deletes or rewrites a volume that its marker does not prove to be this artifact's interrupted
// import (prepare).
func (im Importer) Import(ctx context.Context, o ImportOptions) error {
	volume, err := o.volumeName()
	if err != nil {
		return err
	}
	var given checksum.Digest
	if o.Checksum != "" {
		if given, err = checksum.Parse(o.Checksum); err != nil {
			return fmt.Errorf("invalid --checksum: %w", err)
		}
	}
	var extent string
	if o.ExtentDigest != "" {
		if extent, err = extentdigest.Parse(o.ExtentDigest); err != nil {
			return fmt.Errorf("invalid --extent-digest: %w", err)
		}
		if given.Alg != "sha256" {
			// The marker records a sha256; only --checksum gives it without a read of its own.
			return errors.New("invalid --extent-digest: it needs --checksum sha256:<hex>, the artifact's sha256 that the volume's marker records")
		}
	}
	src, size, err := openSource(o.Source)
	if err != nil {
		return err
	}
	defer func() { _ = src.Close() }() // read only: closing it loses nothing
	digest, err := markerDigest(o.Source, given)
	if err != nil {
		return err
	}

	provider, err := im.provider(ctx, o)
	if err != nil {
		return err
	}
	dialCtx, cancel := context.WithTimeout(ctx, callTimeout)
	host, err := hostconn.Dial(dialCtx, im.Kube, provider)
	cancel()
	if err != nil {
		return fmt.Errorf("connecting to Provider %s/%s: %w", o.ProviderNamespace, o.Provider, err)
	}
	defer host.Close()

	pool, err := findPool(ctx, host, o.Pool)
	if err != nil {
		return err
	}
	t := target{host: host, pool: pool, volume: volume, marker: markerName(volume), digest: digest, given: given, extent: extent, source: o.Source}
	marker, done, err := t.prepare(ctx, im.Out)
	if err != nil {
		return err
	}
	if done {
		_, _ = fmt.Fprintf(im.Out, "volume %s in pool %s already holds %s; nothing to do\n", volume, pool.Name, digest)
		return nil
	}
	_, _ = fmt.Fprintf(im.Out, "importing %s (%s) into pool %s as volume %s\n", o.Source, formatBytes(size), pool.Name, volume)
	progress := im.Progress
	if progress == nil {
		progress = func(total int64) libvirt.Progress { return NewProgress(im.Out, total) }
	}
	start := time.Now()
	if err := t.upload(ctx, marker, src, size, progress(size)); err != nil {
		return err
	}
	if err := t.writeMarker(ctx, marker, complete); err != nil {
		return err
	}
	elapsed := time.Since(start)
	_, _ = fmt.Fprintf(im.Out, "imported %s into %s/%s in %s (%s)\n", formatBytes(size), pool.Name, volume,
		elapsed.Round(time.Millisecond), formatRate(size, elapsed))
	return nil
}

// openSource opens --source and rejects an empty one: a zero-length artifact means the build
// produced no disk, and importing it would publish a volume no VM can boot.
func openSource(path string) (*os.File, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("invalid --source: cannot read %s: %w", path, unwrapPath(err))
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = errors.New("not a regular file")
	}
	if err != nil {
		_ = f.Close() // read only, and refused
		return nil, 0, fmt.Errorf("invalid --source: cannot read %s: %w", path, err)
	}
	if fi.Size() == 0 {
		_ = f.Close() // read only, and refused
		return nil, 0, fmt.Errorf("invalid --source: %s is empty; the build produced no disk", path)
	}
	return f, fi.Size(), nil
}

// unwrapPath drops the *PathError's own copy of the path, which the message already names.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// markerDigest is the sha256 the marker records, which prepare needs before anything is
// uploaded. It is --checksum itself when that is a sha256, as import Jobs pass it: then nothing
// reads the source but the upload. Otherwise (a run by hand, or a sha512 --checksum) the source
// is hashed once up front, the sha512 checked on the way, and the upload's own digest must then
// equal this one: the marker names the bytes uploaded either way.
func markerDigest(path string, given checksum.Digest) (checksum.Digest, error) {
	if given.Alg == "sha256" {
		return given, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return checksum.Digest{}, fmt.Errorf("invalid --source: cannot read %s: %w", path, unwrapPath(err))
	}
	defer func() { _ = f.Close() }() // read only: closing it loses nothing
	h := sha256.New()
	var other hash.Hash
	w := io.Writer(h)
	if !given.IsZero() {
		other = given.New()
		w = io.MultiWriter(h, other)
	}
	if _, err := io.CopyBuffer(w, f, make([]byte, checksum.ChunkSize)); err != nil {
		return checksum.Digest{}, fmt.Errorf("invalid --source: cannot read %s: %w", path, unwrapPath(err))
	}
	if other != nil {
		if computed := checksum.Of(given.Alg, other); computed != given {
			return checksum.Digest{}, fmt.Errorf("invalid --checksum: %w", &checksum.MismatchError{Path: path, Expected: given, Computed: computed})
		}
	}
	return checksum.Of("sha256", h), nil
}

func (im Importer) provider(ctx context.Context, o ImportOptions) (*banlieuev1.Provider, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	var p banlieuev1.Provider
	if err := im.Kube.Get(ctx, types.NamespacedName{Namespace: o.ProviderNamespace, Name: o.Provider}, &p); err != nil {
		return nil, fmt.Errorf("reading Provider %s/%s: %w", o.ProviderNamespace, o.Provider, err)
	}
	return &p, nil
}

// findPool lists the pools rather than looking one up so that a missing pool's error can name
// the ones that exist: the usual cause is a storage class mapped to a pool of another host.
func findPool(ctx context.Context, host *libvirt.Client, name string) (libvirt.StoragePool, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	pools, err := host.ListAllStoragePools(ctx)
	if err != nil {
		return libvirt.StoragePool{}, fmt.Errorf("listing storage pools: %w", err)
	}
	names := make([]string, 0, len(pools))
	for _, p := range pools {
		if p.Name == name {
			return p, nil
		}
		names = append(names, p.Name)
	}
	slices.Sort(names)
	return libvirt.StoragePool{}, fmt.Errorf("invalid --pool: pool %q does not exist on this host; available: [%s]",
		name, strings.Join(names, ", "))
}
