package image

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"strings"

	"banlieue.io/banlieue/internal/imagebuilder/checksum"
	"banlieue.io/banlieue/pkg/libvirt"
)

// maxMarker bounds what is read back from a marker volume: a real one holds one digest line, so
// anything longer is not a marker and must not be buffered.
const maxMarker = 1024

// markerName is the completion marker of volume (SPEC §6 "Imports never adopt a partial
// volume"). It is a volume of its own so that it lives and dies with the pool, needs no host
// file access, and is visible to an operator running virsh vol-list.
func markerName(volume string) string { return volume + ".sha256" }

// target is one volume of one pool on a connected host and the artifact it must hold.
type target struct {
	host           *libvirt.Client
	pool           libvirt.StoragePool
	volume, marker string
	digest         checksum.Digest
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

// lookup returns the volumes of the pool among names, by name.
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

// complete reports whether the volume exists and its marker proves it holds this artifact.
func (t *target) complete(ctx context.Context) (bool, error) {
	found, err := t.lookup(ctx)
	if err != nil {
		return false, err
	}
	_, hasVol := found[t.volume]
	marker, hasMarker := found[t.marker]
	if !hasVol || !hasMarker {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	var buf limitedBuffer
	if _, err := t.host.StorageVolDownload(ctx, marker, &buf, nil); err != nil {
		if errors.Is(err, errMarkerTooLong) {
			return false, nil
		}
		return false, fmt.Errorf("reading marker volume %s: %w", t.marker, err)
	}
	return strings.TrimSpace(buf.String()) == t.digest.String(), nil
}

// clear deletes the marker, then the volume, and returns the names it deleted. The marker goes
// first so that a crash in between leaves a volume without a marker, which the next run again
// treats as partial.
func (t *target) clear(ctx context.Context) ([]string, error) {
	found, err := t.lookup(ctx)
	if err != nil {
		return nil, err
	}
	var deleted []string
	for _, name := range []string{t.marker, t.volume} {
		v, ok := found[name]
		if !ok {
			continue
		}
		if err := t.delete(ctx, v); err != nil {
			return deleted, fmt.Errorf("deleting leftover volume %s from pool %s: %w", name, t.pool.Name, err)
		}
		deleted = append(deleted, name)
	}
	return deleted, nil
}

func (t *target) delete(ctx context.Context, v libvirt.StorageVol) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if err := t.host.StorageVolDelete(ctx, v); err != nil && !libvirt.IsNotFound(err) {
		return err
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

// upload creates the volume and streams src into it, holes as holes. On failure the partial
// volume is removed when the host still answers; when it does not, the missing marker makes
// the next run remove it.
func (t *target) upload(ctx context.Context, src *os.File, size int64, progress libvirt.Progress) error {
	v, err := t.create(ctx, t.volume, size)
	if err != nil {
		return err
	}
	if err := t.host.StorageVolUploadSparse(ctx, v, src, progress); err != nil {
		cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
		defer cancel()
		_ = t.delete(cleanup, v)
		return fmt.Errorf("uploading into volume %s of pool %s: %w", t.volume, t.pool.Name, err)
	}
	return nil
}

// writeMarker records, after a successful upload only, which artifact the volume holds.
func (t *target) writeMarker(ctx context.Context) error {
	content := []byte(t.digest.String() + "\n")
	v, err := t.create(ctx, t.marker, int64(len(content)))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if err := t.host.StorageVolUpload(ctx, v, bytes.NewReader(content), int64(len(content)), nil); err != nil {
		return fmt.Errorf("writing marker volume %s: %w", t.marker, err)
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
