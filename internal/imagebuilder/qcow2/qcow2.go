// Package qcow2 converts a standalone qcow2 image (version 2 or 3) to a raw disk, keeping
// unallocated and zero clusters as holes. No Go qcow2 reader is served to this project, so this
// is a small one: L1/L2 lookups, zero clusters, compressed clusters (deflate, and zstd for
// compression_type 1). Backing files, external data files, extended L2 entries and encryption
// are refused: a cloud image published for download has none of them.
//
// The file is untrusted input (docs/guides/image-sources.md): Limits bound the virtual size and
// the zstd window, nothing is allocated from a size the file merely claims, and every table and
// cluster must lie in the file and be referenced once, so a small file cannot expand into more
// non-zero output than it holds data for. Such refusals are a *RefusedError.
package qcow2

import (
	"bytes"
	"compress/flate"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
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

// Limits bound what an image may make the reader allocate or write.
type Limits struct {
	// MaxVirtualSize is the largest virtual size accepted: the length of the raw output.
	MaxVirtualSize int64
	// MaxZstdWindow is the largest window a zstd-compressed cluster may declare.
	MaxZstdWindow int64
}

// Image is an opened qcow2 file.
type Image struct {
	r           io.ReaderAt
	fileSize    int64
	clusterBits uint32
	size        int64
	l1Offset    int64
	l1Size      int64 // the entries the header declares
	l1Entries   int64 // the entries the virtual size needs, the only ones read
	compression byte
	limits      Limits
}

// Open reads and checks the header of a qcow2 file of fileSize bytes. The L1 table is read
// during ConvertTo, a cluster's worth at a time.
func Open(r io.ReaderAt, fileSize int64, limits Limits) (*Image, error) {
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
	img := &Image{r: r, fileSize: fileSize, clusterBits: be.Uint32(h[20:]), size: int64(be.Uint64(h[24:])), limits: limits}
	if img.clusterBits < minClusterBits || img.clusterBits > maxClusterBits {
		return nil, fmt.Errorf("qcow2: invalid cluster_bits %d", img.clusterBits)
	}
	if be.Uint32(h[32:]) != 0 {
		return nil, errors.New("qcow2: encrypted images are not supported")
	}
	if img.size < 0 {
		return nil, errors.New("qcow2: invalid virtual size")
	}
	if img.size > limits.MaxVirtualSize {
		return nil, &RefusedError{Rule: RuleVirtualSize, Seen: img.size, Limit: limits.MaxVirtualSize}
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
	img.l1Size = l1Size
	img.l1Offset = int64(be.Uint64(h[40:]))
	cs := img.clusterSize()
	if perL2 := cs * (cs / 8); img.size > 0 {
		img.l1Entries = (img.size-1)/perL2 + 1
	}
	if l1Size < img.l1Entries {
		return nil, fmt.Errorf("qcow2: L1 table of %d entries cannot map %d bytes", l1Size, img.size)
	}
	if l1Size > maxL1Entries(img.l1Entries, cs) {
		return nil, structural("L1 table of %d entries, but virtual size %d needs %d", l1Size, img.size, img.l1Entries)
	}
	if img.l1Offset%cs != 0 || img.l1Offset <= 0 {
		return nil, structural("L1 table at %d is not a cluster of its own", img.l1Offset)
	}
	if img.l1Offset > fileSize || l1Size*8 > fileSize-img.l1Offset {
		return nil, structural("L1 table at %d (%d bytes) extends beyond the %d-byte file", img.l1Offset, l1Size*8, fileSize)
	}
	return img, nil
}

// Size is the virtual disk size, the length of the raw output.
func (img *Image) Size() int64 { return img.size }

func (img *Image) clusterSize() int64 { return 1 << img.clusterBits }

// maxL1Entries is the largest L1 table accepted for an image whose virtual size needs needed
// entries: twice that plus one cluster of entries. Shrinking an image leaves its table as it
// was (qemu-img resize --shrink of 64 GiB to 32 MiB keeps 128 entries where 1 is needed), so a
// real image's table may be larger than needed; one sized by some other number, such as the
// file's size, is not an image's. Only the needed entries are ever read.
func maxL1Entries(needed, clusterSize int64) int64 { return 2*needed + clusterSize/8 }

// ConvertTo writes the raw disk into dst from offset 0. Unallocated and zero clusters, and
// data clusters that hold only zeros, are not written: dst is truncated to the virtual size,
// so they read back as zeros and take no space. Memory is a cluster of L1 entries, one L2
// table, two clusters and two bits per cluster of the file (hostClusters).
func (img *Image) ConvertTo(ctx context.Context, dst *os.File) error {
	cs := img.clusterSize()
	entriesPerL2 := cs / 8
	l1 := make([]byte, min(img.l1Entries*8, cs))
	l2 := make([]byte, cs)
	cluster := make([]byte, cs)
	compressed := make([]byte, cs+2*sectorSize)
	dec := decompressor{kind: img.compression, maxWindow: img.limits.MaxZstdWindow}
	defer dec.close()
	refs := newHostClusters(img.fileSize, img.clusterBits)
	refs.claimMetadata(0, sectorSize) // the header
	refs.claimMetadata(img.l1Offset, img.l1Size*8)
	w := walk{img: img, refs: refs, buf: cluster, compressed: compressed, dec: &dec}
	for i := range img.l1Entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		perChunk := int64(len(l1)) / 8
		if i%perChunk == 0 {
			n := min(perChunk, img.l1Entries-i) * 8
			if _, err := img.r.ReadAt(l1[:n], img.l1Offset+i*8); err != nil {
				return fmt.Errorf("qcow2: reading L1 table: %w", err)
			}
		}
		l2Off := int64(binary.BigEndian.Uint64(l1[i%perChunk*8:]) & l1OffsetMask)
		if l2Off == 0 {
			continue
		}
		if problem := refs.claim(l2Off, cs); problem != "" {
			return structural("L2 table at %d (L1 entry %d) %s", l2Off, i, problem)
		}
		if _, err := img.r.ReadAt(l2, l2Off); err != nil {
			return fmt.Errorf("qcow2: reading L2 table at %d: %w", l2Off, err)
		}
		base := i * entriesPerL2 * cs
		for j := range entriesPerL2 {
			guest := base + j*cs
			if guest >= img.size {
				break
			}
			n := min(cs, img.size-guest)
			data, err := w.cluster(binary.BigEndian.Uint64(l2[j*8:]), guest)
			if err != nil {
				return err
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

// walk is the state of one ConvertTo: its buffers and which host clusters are referenced.
type walk struct {
	img            *Image
	refs           *hostClusters
	buf            []byte // one cluster
	compressed     []byte
	dec            *decompressor
	lastCompressed int64 // host offset of the previous compressed cluster, in guest order
	anyCompressed  bool
}

// cluster returns the cluster an L2 entry maps at guest, or nil for one that reads as zeros.
func (w *walk) cluster(entry uint64, guest int64) ([]byte, error) {
	if entry&l2Compressed != 0 {
		return w.compressedCluster(entry, guest)
	}
	off := int64(entry & l2OffsetMask)
	if entry&l2Zero != 0 || off == 0 {
		return nil, nil
	}
	// The last cluster of a file may be short: only its start must lie in the file.
	if problem := w.refs.claim(off, 1); problem != "" {
		return nil, structural("data cluster at %d (guest offset %d) %s", off, guest, problem)
	}
	n, err := w.img.r.ReadAt(w.buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("qcow2: reading cluster at guest offset %d: %w", guest, err)
	}
	clear(w.buf[n:]) // past the end of the file, not what the buffer held before
	return w.buf, nil
}

// compressedCluster decodes a compressed descriptor: x = 62 - (cluster_bits - 8) low bits of
// host offset, then the count of 512-byte sectors beyond the first that the data may span.
// Compressed clusters share host clusters (qemu packs them byte by byte), so they are not
// claimed like data clusters; instead each must start after the one before it in guest order,
// which is how qemu-img convert -c writes them, and so no compressed data is read twice.
func (w *walk) compressedCluster(entry uint64, guest int64) ([]byte, error) {
	img := w.img
	x := 62 - (img.clusterBits - 8)
	off := int64(entry & (1<<x - 1))
	sectors := int64((entry>>x)&(1<<(62-x)-1)) + 1
	switch {
	case off >= img.fileSize:
		return nil, structural("compressed cluster at %d (guest offset %d) lies beyond the %d-byte file", off, guest, img.fileSize)
	case w.anyCompressed && off <= w.lastCompressed:
		return nil, structural("compressed cluster at %d (guest offset %d) does not follow the previous one at %d; compressed clusters must be stored in guest order, as qemu-img convert -c writes them",
			off, guest, w.lastCompressed)
	}
	if problem := w.refs.claimPacked(off); problem != "" {
		return nil, structural("compressed cluster at %d (guest offset %d) %s", off, guest, problem)
	}
	w.anyCompressed, w.lastCompressed = true, off
	// off lies in the file and the data spans at least one sector, so length is positive.
	length := min(sectors*sectorSize-off%sectorSize, int64(len(w.compressed)), img.fileSize-off)
	n, err := img.r.ReadAt(w.compressed[:length], off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("qcow2: reading compressed cluster at guest offset %d: %w", guest, err)
	}
	if err := w.dec.decode(w.compressed[:n], w.buf); err != nil {
		var refused *RefusedError
		if errors.As(err, &refused) {
			return nil, err
		}
		return nil, fmt.Errorf("qcow2: compressed cluster at guest offset %d: %w", guest, err)
	}
	return w.buf, nil
}

// decompressor inflates one cluster at a time, reusing its state across clusters.
type decompressor struct {
	kind      byte
	maxWindow int64
	zstd      *zstd.Decoder
}

func (d *decompressor) decode(src, dst []byte) error {
	var r io.Reader
	if d.kind == compressionZstd {
		if d.zstd == nil {
			var err error
			// A frame can declare a window far beyond its cluster; the decoder would allocate
			// it. The smallest window a frame may declare is 1 KiB.
			window := uint64(max(d.maxWindow, zstd.MinWindowSize))
			if d.zstd, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
				zstd.WithDecoderMaxWindow(window), zstd.WithDecoderMaxMemory(window)); err != nil {
				return err
			}
		}
		if err := d.zstd.Reset(bytes.NewReader(src)); err != nil {
			return d.zstdError(src, err)
		}
		r = d.zstd
	} else {
		r = flate.NewReader(bytes.NewReader(src))
	}
	// The stored length is rounded up to sectors, so trailing bytes after the stream are
	// expected; only a stream shorter than a cluster is an error.
	if _, err := io.ReadFull(r, dst); err != nil {
		if d.kind == compressionZstd {
			return d.zstdError(src, err)
		}
		return fmt.Errorf("decompressing: %w", err)
	}
	return nil
}

// zstdError is err of the zstd decoder, a RefusedError when the frame's window is over the
// limit.
func (d *decompressor) zstdError(src []byte, err error) error {
	if !errors.Is(err, zstd.ErrWindowSizeExceeded) && !errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		return fmt.Errorf("decompressing: %w", err)
	}
	var h zstd.Header
	seen := int64(-1)
	if h.Decode(src) == nil {
		seen = int64(min(h.WindowSize, math.MaxInt64))
		if h.SingleSegment {
			seen = int64(min(h.FrameContentSize, math.MaxInt64))
		}
	}
	return &RefusedError{Rule: RuleZstdWindow, Seen: seen, Limit: d.maxWindow}
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
