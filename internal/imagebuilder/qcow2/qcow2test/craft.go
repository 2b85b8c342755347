// Package qcow2test writes qcow2 files by hand, byte by byte, for tests of the reader against
// crafted images: the hostile ones of docs/guides/image-sources.md that no tool would write.
package qcow2test

import (
	"encoding/binary"
	"os"
)

// Image describes a file. Offsets are host offsets; entries are raw table entries, flags
// included, so a test can write any bit pattern.
type Image struct {
	Version     uint32 // 2 or 3; 0 means 2
	ClusterBits uint32 // 0 means 16
	Size        int64  // the virtual size
	L1Size      int64  // 0 means what Size needs
	L1Offset    int64  // 0 means the second cluster
	Compression byte   // version 3: 0 deflate, 1 zstd
	// L1 maps an L1 index to its raw entry.
	L1 map[int64]uint64
	// L2 maps an L2 table's host offset to its entries, index to raw entry.
	L2 map[int64]map[int64]uint64
	// Data maps a host offset to the bytes there.
	Data map[int64][]byte
	// FileSize, when set, is the file's size: larger than the rest needs, it ends in a hole;
	// smaller, it cuts the rest short.
	FileSize int64
}

// L2Entry is the L2 entry of an uncompressed data cluster at off (the COPIED flag set, as
// qemu writes it).
func L2Entry(off int64) uint64 { return uint64(off) | 1<<63 }

// CompressedEntry is the L2 entry of compressed data at off spanning sectors 512-byte
// sectors, for clusterBits.
func CompressedEntry(off int64, sectors int64, clusterBits uint32) uint64 {
	x := 62 - (clusterBits - 8)
	return 1<<62 | uint64(sectors-1)<<x | uint64(off)
}

func (img Image) clusterBits() uint32 {
	if img.ClusterBits == 0 {
		return 16
	}
	return img.ClusterBits
}

// Bytes is the file's content.
func (img Image) Bytes() []byte {
	var b buffer
	end := img.write(&b)
	if end < int64(len(b.data)) {
		return b.data[:end]
	}
	return append(b.data, make([]byte, end-int64(len(b.data)))...)
}

// WriteFile writes the file at path, its unwritten parts holes.
func (img Image) WriteFile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	end := img.write(f)
	if err := f.Truncate(end); err != nil {
		_ = f.Close() // the truncate's error is the one to report
		return err
	}
	return f.Close()
}

func (img Image) write(w interface {
	WriteAt([]byte, int64) (int, error)
}) int64 {
	cb := img.clusterBits()
	cs := int64(1) << cb
	version := img.Version
	if version == 0 {
		version = 2
	}
	l1Size := img.L1Size
	if l1Size == 0 {
		per := cs * (cs / 8)
		l1Size = (img.Size + per - 1) / per
	}
	l1Off := img.L1Offset
	if l1Off == 0 {
		l1Off = cs
	}
	be := binary.BigEndian
	h := make([]byte, 112)
	copy(h, "QFI\xfb")
	be.PutUint32(h[4:], version)
	be.PutUint32(h[20:], cb)
	be.PutUint64(h[24:], uint64(img.Size))
	be.PutUint32(h[36:], uint32(l1Size))
	be.PutUint64(h[40:], uint64(l1Off))
	if version == 3 {
		be.PutUint32(h[96:], 4)    // refcount_order
		be.PutUint32(h[100:], 112) // header_length
		if img.Compression != 0 {
			be.PutUint64(h[72:], 1<<3) // incompatible: compression type
			h[104] = img.Compression
		}
	}
	end := int64(0)
	put := func(p []byte, off int64) {
		_, _ = w.WriteAt(p, off) // buffer or test file: a failed write shows as a wrong read
		end = max(end, off+int64(len(p)))
	}
	put(h, 0)
	for i, e := range img.L1 {
		put(be.AppendUint64(nil, e), l1Off+8*i)
	}
	end = max(end, l1Off+8*l1Size)
	for off, entries := range img.L2 {
		put(make([]byte, cs), off)
		for i, e := range entries {
			put(be.AppendUint64(nil, e), off+8*i)
		}
	}
	for off, d := range img.Data {
		put(d, off)
	}
	if img.FileSize > 0 {
		return img.FileSize
	}
	return end
}

// buffer is a growing in-memory WriterAt.
type buffer struct{ data []byte }

func (b *buffer) WriteAt(p []byte, off int64) (int, error) {
	if need := off + int64(len(p)); need > int64(len(b.data)) {
		b.data = append(b.data, make([]byte, need-int64(len(b.data)))...)
	}
	return copy(b.data[off:], p), nil
}
