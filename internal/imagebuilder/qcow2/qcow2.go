// Package qcow2 converts a standalone qcow2 image (version 2 or 3) to a raw disk, keeping
// unallocated and zero clusters as holes. No Go qcow2 reader is served to this project, so this
// is a small one: L1/L2 lookups, zero clusters, compressed clusters (deflate, and zstd for
// compression_type 1). Backing files, external data files, extended L2 entries and encryption
// are refused: a cloud image published for download has none of them.
package qcow2

import (
	"bytes"
	"compress/flate"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/klauspost/compress/zstd"
)

// Magic opens every qcow2 file: "QFI\xfb".
var Magic = []byte{'Q', 'F', 'I', 0xfb}

const (
	l1OffsetMask   = 0x00fffffffffffe00
	l2OffsetMask   = 0x00fffffffffffe00
	l2Compressed   = 1 << 62
	l2Zero         = 1 << 0
	sectorSize     = 512
	minClusterBits = 9
	maxClusterBits = 21

	incompatDirty        = 1 << 0
	incompatCompression  = 1 << 3
	supportedIncompatMax = incompatDirty | incompatCompression

	compressionDeflate = 0
	compressionZstd    = 1
)

// Image is an opened qcow2 file.
type Image struct {
	r           io.ReaderAt
	fileSize    int64
	clusterBits uint32
	size        int64
	l1          []uint64
	compression byte
}

// Open reads the header and L1 table of a qcow2 file of fileSize bytes.
func Open(r io.ReaderAt, fileSize int64) (*Image, error) {
	var h [105]byte
	n, err := r.ReadAt(h[:], 0)
	if n < 72 {
		return nil, fmt.Errorf("qcow2: reading header: %w", cmpErr(err, io.ErrUnexpectedEOF))
	}
	be := binary.BigEndian
	if !bytes.Equal(h[:4], Magic) {
		return nil, errors.New("qcow2: not a qcow2 file")
	}
	version := be.Uint32(h[4:])
	if version != 2 && version != 3 {
		return nil, fmt.Errorf("qcow2: unsupported version %d", version)
	}
	if be.Uint64(h[8:]) != 0 {
		return nil, errors.New("qcow2: images with a backing file are not supported; flatten it with qemu-img convert first")
	}
	img := &Image{r: r, fileSize: fileSize, clusterBits: be.Uint32(h[20:]), size: int64(be.Uint64(h[24:]))}
	if img.clusterBits < minClusterBits || img.clusterBits > maxClusterBits {
		return nil, fmt.Errorf("qcow2: invalid cluster_bits %d", img.clusterBits)
	}
	if be.Uint32(h[32:]) != 0 {
		return nil, errors.New("qcow2: encrypted images are not supported")
	}
	if img.size < 0 {
		return nil, errors.New("qcow2: invalid virtual size")
	}
	if version == 3 {
		if n < 104 {
			return nil, errors.New("qcow2: truncated version 3 header")
		}
		if f := be.Uint64(h[72:]); f&^supportedIncompatMax != 0 {
			return nil, fmt.Errorf("qcow2: unsupported incompatible features %#x (external data file or extended L2 entries)", f&^supportedIncompatMax)
		} else if f&incompatCompression != 0 {
			if be.Uint32(h[100:]) <= 104 || n < 105 {
				return nil, errors.New("qcow2: compression type flag set without a compression_type field")
			}
			img.compression = h[104]
		}
		if img.compression != compressionDeflate && img.compression != compressionZstd {
			return nil, fmt.Errorf("qcow2: unsupported compression type %d", img.compression)
		}
	}
	l1Size := int64(be.Uint32(h[36:]))
	entriesPerL2 := img.clusterSize() / 8
	if need := (img.size + img.clusterSize()*entriesPerL2 - 1) / (img.clusterSize() * entriesPerL2); l1Size < need {
		return nil, fmt.Errorf("qcow2: L1 table of %d entries cannot map %d bytes", l1Size, img.size)
	}
	if l1Size*8 > fileSize {
		return nil, errors.New("qcow2: L1 table larger than the file")
	}
	raw := make([]byte, l1Size*8)
	if _, err := r.ReadAt(raw, int64(be.Uint64(h[40:]))); err != nil {
		return nil, fmt.Errorf("qcow2: reading L1 table: %w", err)
	}
	img.l1 = make([]uint64, l1Size)
	for i := range img.l1 {
		img.l1[i] = be.Uint64(raw[i*8:])
	}
	return img, nil
}

// Size is the virtual disk size, the length of the raw output.
func (img *Image) Size() int64 { return img.size }

func (img *Image) clusterSize() int64 { return 1 << img.clusterBits }

// ConvertTo writes the raw disk into dst from offset 0. Unallocated and zero clusters, and
// data clusters that hold only zeros, are not written: dst is truncated to the virtual size,
// so they read back as zeros and take no space. Memory is one L2 table and two clusters.
func (img *Image) ConvertTo(ctx context.Context, dst *os.File) error {
	cs := img.clusterSize()
	entriesPerL2 := cs / 8
	l2 := make([]byte, cs)
	cluster := make([]byte, cs)
	compressed := make([]byte, cs+2*sectorSize)
	dec := decompressor{kind: img.compression}
	defer dec.close()
	for i, l1e := range img.l1 {
		if err := ctx.Err(); err != nil {
			return err
		}
		base := int64(i) * entriesPerL2 * cs
		if base >= img.size {
			break
		}
		l2Off := int64(l1e & l1OffsetMask)
		if l2Off == 0 {
			continue
		}
		if _, err := img.r.ReadAt(l2, l2Off); err != nil {
			return fmt.Errorf("qcow2: reading L2 table at %d: %w", l2Off, err)
		}
		for j := range entriesPerL2 {
			guest := base + j*cs
			if guest >= img.size {
				break
			}
			n := min(cs, img.size-guest)
			entry := binary.BigEndian.Uint64(l2[j*8:])
			data, err := img.cluster(entry, cluster, compressed, &dec)
			if err != nil {
				return fmt.Errorf("qcow2: cluster at guest offset %d: %w", guest, err)
			}
			if data == nil || allZero(data[:n]) {
				continue
			}
			if _, err := dst.WriteAt(data[:n], guest); err != nil {
				return err
			}
		}
	}
	return dst.Truncate(img.size)
}

// cluster returns the cluster an L2 entry maps, or nil for one that reads as zeros.
func (img *Image) cluster(entry uint64, buf, compressed []byte, dec *decompressor) ([]byte, error) {
	if entry&l2Compressed != 0 {
		return img.compressedCluster(entry, buf, compressed, dec)
	}
	off := int64(entry & l2OffsetMask)
	if entry&l2Zero != 0 || off == 0 {
		return nil, nil
	}
	if _, err := img.r.ReadAt(buf, off); err != nil && !(errors.Is(err, io.EOF) && off < img.fileSize) {
		return nil, err
	}
	return buf, nil
}

// compressedCluster decodes a compressed descriptor: x = 62 - (cluster_bits - 8) low bits of
// host offset, then the count of 512-byte sectors beyond the first that the data may span.
func (img *Image) compressedCluster(entry uint64, buf, compressed []byte, dec *decompressor) ([]byte, error) {
	x := 62 - (img.clusterBits - 8)
	off := int64(entry & (1<<x - 1))
	sectors := int64((entry>>x)&(1<<(62-x)-1)) + 1
	length := min(sectors*sectorSize-off%sectorSize, int64(len(compressed)), img.fileSize-off)
	if off <= 0 || length <= 0 {
		return nil, fmt.Errorf("invalid compressed cluster descriptor %#x", entry)
	}
	n, err := img.r.ReadAt(compressed[:length], off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if err := dec.decode(compressed[:n], buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// decompressor inflates one cluster at a time, reusing its state across clusters.
type decompressor struct {
	kind byte
	zstd *zstd.Decoder
}

func (d *decompressor) decode(src, dst []byte) error {
	var r io.Reader
	if d.kind == compressionZstd {
		if d.zstd == nil {
			var err error
			if d.zstd, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1)); err != nil {
				return err
			}
		}
		if err := d.zstd.Reset(bytes.NewReader(src)); err != nil {
			return err
		}
		r = d.zstd
	} else {
		r = flate.NewReader(bytes.NewReader(src))
	}
	// The stored length is rounded up to sectors, so trailing bytes after the stream are
	// expected; only a stream shorter than a cluster is an error.
	if _, err := io.ReadFull(r, dst); err != nil {
		return fmt.Errorf("decompressing: %w", err)
	}
	return nil
}

func (d *decompressor) close() {
	if d.zstd != nil {
		d.zstd.Close()
	}
}

func allZero(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func cmpErr(err, fallback error) error {
	if err != nil {
		return err
	}
	return fallback
}
