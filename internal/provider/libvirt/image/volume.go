package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"banlieue.io/banlieue/internal/imagebuilder/checksum"
	"banlieue.io/banlieue/pkg/libvirt"
)

// maxMarker bounds what is read back from a marker volume: a real one holds one digest line, so
// anything longer is not a marker and must not be buffered.
const maxMarker = 1024

// markerName is the marker of volume (docs/guides/libvirt-provider.md, "The two halves of a
// `Url` import"). It is a volume of its own so that it lives and dies with the pool, needs no
// host file access, and is visible to an operator running virsh vol-list. It is the proof that banlieue created the
// volume, and records which artifact it holds and whether its upload finished.
func markerName(volume string) string { return volume + ".sha256" }

// markerState is what a marker records about its volume's upload.
type markerState int

const (
	// importing is written before the volume is created: whatever the volume holds is partial.
	importing markerState = iota
	// complete is written once the upload finished.
	complete
)

// importingPrefix starts an in-progress marker's line. A complete marker's line is the digest
// alone, the format markers had before in-progress markers existed, which thus still read as
// complete.
const importingPrefix = "importing "

// markerSize is the size of every marker written: an in-progress sha256 line and its newline.
// The complete line is padded with spaces to the same size, so the marker is rewritten in place
// and is never, not even for an instant, absent while its volume exists.
const markerSize = len(importingPrefix) + len("sha256:") + 2*sha256.Size + 1

func markerContent(state markerState, d checksum.Digest) []byte {
	line := d.String()
	if state == importing {
		line = importingPrefix + line
	}
	return fmt.Appendf(nil, "%-*s\n", markerSize-1, line)
}

// parseMarker reads a marker's content. ok is false for anything banlieue does not write.
func parseMarker(content string) (state markerState, d checksum.Digest, ok bool) {
	line := strings.TrimSpace(content)
	state = complete
	if rest, found := strings.CutPrefix(line, importingPrefix); found {
		state, line = importing, rest
	}
	d, err := checksum.Parse(line)
	if err != nil || d.String() != line {
		return 0, checksum.Digest{}, false
	}
	return state, d, true
}

// target is one volume of one pool on a connected host and the artifact it must hold: digest
// is its sha256, given the --checksum it is verified against, if any, extent the
// --extent-digest that replaces it in the verification, if any, and source the path it is
// read from (--source).
type target struct {
	host           *libvirt.Client
	pool           libvirt.StoragePool
	volume, marker string
	digest, given  checksum.Digest
	extent         string
	source         string
}

// holds reports whether a marker's digest is this artifact's.
func (t *target) holds(d checksum.Digest) bool {
	return d == t.digest || !t.given.IsZero() && d == t.given
}

// volumeXML is a raw volume of exactly capacity bytes with nothing allocated: the sparse upload
// allocates only what it writes, so holes in the artifact stay holes on the host.
func volumeXML(name string, capacity int64) string {
	var b strings.Builder
	b.WriteString("<volume type='file'><name>")
	_ = xml.EscapeText(&b, []byte(name)) // a strings.Builder never fails; names are user-chosen
	fmt.Fprintf(&b, "</name><capacity unit='bytes'>%d</capacity><allocation unit='bytes'>0</allocation>", capacity)
	b.WriteString("<target><format type='raw'/></target></volume>")
	return b.String()
}

// lookup returns the volumes of the pool among the volume and its marker, by name. A file put
// into a dir pool behind libvirt's back is not listed until a refresh, which libvirtd refuses
// while any upload into the pool runs; creating a volume over such a file fails instead, as
// libvirt creates volume files exclusively.
func (t *target) lookup(ctx context.Context) (map[string]libvirt.StorageVol, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	vols, err := t.host.StoragePoolListAllVolumes(ctx, t.pool)
	if err != nil {
		return nil, fmt.Errorf("listing volumes of pool %s: %w", t.pool.Name, err)
	}
	found := map[string]libvirt.StorageVol{}
	for _, v := range vols {
		if v.Name == t.volume || v.Name == t.marker {
			found[v.Name] = v
		}
	}
	return found, nil
}

// prepare decides, from the volume and its marker, what the import may do, and leaves the pool
// ready for the upload: no volume, and a marker recording this artifact as importing, which it
// returns. done reports that the volume already holds the artifact. It deletes a volume only
// when its marker records an interrupted import of this very artifact; anything else it cannot
// prove it created, and any complete volume of another artifact, is refused and left untouched.
// out is Importer.Out: what it is told is advisory, so a failed write to it is ignored.
func (t *target) prepare(ctx context.Context, out io.Writer) (marker libvirt.StorageVol, done bool, err error) {
	found, err := t.lookup(ctx)
	if err != nil {
		return marker, false, err
	}
	vol, hasVol := found[t.volume]
	marker, hasMarker := found[t.marker]
	if !hasMarker {
		if hasVol {
			return marker, false, fmt.Errorf("volume %s in pool %s was not created by a banlieue import (there is no marker volume %s); "+
				"it is left untouched: remove it by hand if nothing uses it, or import under another --volume-name", t.volume, t.pool.Name, t.marker)
		}
		marker, err = t.createMarker(ctx)
		return marker, false, err
	}
	state, recorded, err := t.readMarker(ctx, marker)
	if err != nil {
		return marker, false, err
	}
	switch {
	case state == complete && t.holds(recorded) && hasVol:
		return marker, true, nil
	case state == complete && t.holds(recorded):
		// Deleted by hand, its marker left behind: the same bytes again are the base any
		// overlay built on it expects.
		_, _ = fmt.Fprintf(out, "volume %s is gone but its marker %s records %s; importing it again\n", t.volume, t.marker, recorded)
		if err := t.delete(ctx, marker); err != nil {
			return marker, false, fmt.Errorf("deleting marker volume %s of the missing volume %s from pool %s: %w", t.marker, t.volume, t.pool.Name, err)
		}
		marker, err = t.createMarker(ctx)
		return marker, false, err
	case state == complete:
		gone := ""
		if !hasVol {
			gone = fmt.Sprintf(" (the volume itself is gone: if nothing was built on it, delete %s by hand)", t.marker)
		}
		return marker, false, fmt.Errorf("volume %s in pool %s was imported with %s (its marker %s says so)%s; an imported base image is "+
			"never replaced, since the overlays of machines built on it back onto it: import %s under another --volume-name",
			t.volume, t.pool.Name, recorded, t.marker, gone, t.digest)
	case recorded != t.digest:
		return marker, false, fmt.Errorf("volume %s in pool %s is being imported with %s (its marker %s says so): another import runs, "+
			"or one was interrupted; it is left untouched: if no import runs, delete %s and %s by hand", t.volume, t.pool.Name,
			recorded, t.marker, t.volume, t.marker)
	}
	// An import of this artifact was interrupted: what it left of the volume is partial, and
	// no machine can have been built on it, as nothing names a volume before it is complete.
	if hasVol {
		if err := t.delete(ctx, vol); err != nil {
			return marker, false, fmt.Errorf("deleting partial volume %s from pool %s: %w", t.volume, t.pool.Name, err)
		}
		_, _ = fmt.Fprintf(out, "deleted %s: no completion marker for %s (left by an interrupted import)\n", t.volume, t.digest)
	}
	return marker, false, nil
}

// readMarker reads and parses a marker volume. Content banlieue does not write means the
// volume is not a marker, so the import cannot prove it owns the name.
func (t *target) readMarker(ctx context.Context, marker libvirt.StorageVol) (markerState, checksum.Digest, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	var buf limitedBuffer
	_, err := t.host.StorageVolDownload(ctx, marker, &buf, nil)
	if err != nil && !errors.Is(err, errMarkerTooLong) {
		return 0, checksum.Digest{}, fmt.Errorf("reading marker volume %s of pool %s: %w", t.marker, t.pool.Name, err)
	}
	state, d, ok := parseMarker(buf.String())
	if err != nil || !ok {
		return 0, checksum.Digest{}, fmt.Errorf("volume %s in pool %s is not a banlieue import marker (it does not hold a digest), "+
			"so banlieue cannot tell who created %s; both are left untouched: remove them by hand if nothing uses them, "+
			"or import under another --volume-name", t.marker, t.pool.Name, t.volume)
	}
	return state, d, nil
}

func (t *target) delete(ctx context.Context, v libvirt.StorageVol) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if err := t.host.StorageVolDelete(ctx, v); err != nil && !libvirt.IsNotFound(err) {
		return err
	}
	return nil
}

// cleanup deletes vols, best effort, even when ctx is done: the import is failing already, and
// whatever the host does not delete now the marker lets the next run handle. It stops at the
// first failure, so a marker is never deleted while its volume stays, and returns it.
func (t *target) cleanup(ctx context.Context, vols ...libvirt.StorageVol) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
	defer cancel()
	for _, v := range vols {
		if err := t.delete(ctx, v); err != nil {
			return fmt.Errorf("deleting volume %s from pool %s: %w", v.Name, t.pool.Name, err)
		}
	}
	return nil
}

func (t *target) create(ctx context.Context, name string, capacity int64) (libvirt.StorageVol, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	v, err := t.host.StorageVolCreateXML(ctx, t.pool, volumeXML(name, capacity), 0)
	if err != nil {
		return libvirt.StorageVol{}, fmt.Errorf("creating volume %s in pool %s: %w", name, t.pool.Name, err)
	}
	return v, nil
}

// createMarker creates the marker recording this artifact as importing, before the volume
// exists: from then on every state a crash can leave is one the next run recognises as its own.
func (t *target) createMarker(ctx context.Context) (libvirt.StorageVol, error) {
	v, err := t.create(ctx, t.marker, int64(markerSize))
	if err != nil {
		return v, err
	}
	if err := t.writeMarker(ctx, v, importing); err != nil {
		_ = t.cleanup(ctx, v) // best effort: the failed write is what matters
		return v, err
	}
	return v, nil
}

// writeMarker (re)writes the marker's content in place.
func (t *target) writeMarker(ctx context.Context, marker libvirt.StorageVol, state markerState) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	content := markerContent(state, t.digest)
	if err := t.host.StorageVolUpload(ctx, marker, bytes.NewReader(content), int64(len(content)), nil); err != nil {
		return fmt.Errorf("writing marker volume %s of pool %s: %w", t.marker, t.pool.Name, err)
	}
	return nil
}

// upload creates the volume and streams src into it, holes as holes, hashing what it sends in
// the same pass. On failure, or when the bytes sent are not the artifact (uploadMismatch), the
// volume and then its marker are removed when the host still answers; when it does not, the
// marker, still recording an import of this artifact, lets the next run remove the volume.
func (t *target) upload(ctx context.Context, marker libvirt.StorageVol, src *os.File, size int64, progress libvirt.Progress) error {
	v, err := t.create(ctx, t.volume, size)
	if err != nil {
		_ = t.cleanup(ctx, marker) // best effort: the failed create is what matters
		return err
	}
	d := newUploadDigest(t.given, t.extent, size)
	err = t.host.StorageVolUploadSparseObserved(ctx, v, src, progress, d)
	sent := d.sums()
	if err != nil {
		_ = t.cleanup(ctx, v, marker) // best effort: the failed upload is what matters
		return fmt.Errorf("uploading into volume %s of pool %s: %w", t.volume, t.pool.Name, err)
	}
	if err := uploadMismatch(t.source, t.digest, t.given, t.extent, sent); err != nil {
		if cerr := t.cleanup(ctx, v, marker); cerr != nil {
			return fmt.Errorf("%w; nothing was imported, but %w: the next import of this artifact into volume %s removes what is left",
				err, cerr, t.volume)
		}
		return fmt.Errorf("%w; nothing was imported: volume %s and its marker %s were deleted from pool %s", err, t.volume, t.marker, t.pool.Name)
	}
	return nil
}

var errMarkerTooLong = errors.New("marker volume is larger than a digest")

// limitedBuffer refuses to grow past maxMarker.
type limitedBuffer struct{ bytes.Buffer }

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > maxMarker {
		return 0, errMarkerTooLong
	}
	return b.Buffer.Write(p)
}
