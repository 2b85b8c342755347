// Package extentdigest computes the extent digest of a disk image: a sha256 over its virtual
// size and the blocks of it that are not all zeros, each with its offset
// (docs/adr/0134-extent-digest.md). It binds the image's whole logical content as tightly as a
// sha256 of the file does, since an image is exactly its size and its non-zero blocks, but it
// costs in proportion to the data: a hole, or a run of zero blocks, is not hashed at all. And it
// does not depend on how the file is laid out: zeros stored as data and zeros left as a hole
// give the same digest, so a filesystem that re-sparsifies a copy does not change it.
//
// The digest of a content of size bytes is
//
//	sha256( "banlieue extent digest v1\n" || be64(BlockSize) || be64(size) ||
//	        for each block, in order, whose bytes are not all zero:
//	            be64(offset of the block) || the block's bytes )
//
// where blocks are the BlockSize-byte ranges [k·BlockSize, (k+1)·BlockSize) of the content, the
// last one shorter when size is not a multiple of BlockSize. Every record's length follows from
// its offset and size, so the encoding is injective: two contents with the same digest are the
// same content (up to a sha256 collision). Its text form is "extents-sha256:<64 hex digits>".
//
// The package imports nothing of banlieue: a builder computes the digest as it writes an image,
// and an importer as it sends one, from the same code.
package extentdigest

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"strings"
)

// BlockSize is the granularity at which zeros are skipped: the block size of common
// filesystems, so a hole punched by any of them covers whole blocks.
const BlockSize = 4096

// Prefix names the algorithm in the text form.
const Prefix = "extents-sha256"

// domain starts every digest, so it can never equal a plain sha256 of some file, and names the
// format's version.
const domain = "banlieue extent digest v1\n"

var zeroBlock [BlockSize]byte

// Hasher computes the extent digest of a content of a known size, fed in order by Write (bytes
// of the content) and Zeros (a run of zero bytes, such as a hole), in any mix and any chunking.
// It holds at most one block. It is not safe for concurrent use.
type Hasher struct {
	h     hash.Hash
	size  int64
	off   int64 // offset of the block being assembled (or of the next one)
	fill  int   // bytes of it in block
	block [BlockSize]byte
	seen  int64 // bytes fed in all, to tell a short or long content in Sum
	rec   [8]byte
}

// New returns a Hasher for a content of size bytes.
func New(size int64) *Hasher {
	x := &Hasher{h: sha256.New(), size: size}
	x.h.Write([]byte(domain)) // a hash never fails
	binary.BigEndian.PutUint64(x.rec[:], BlockSize)
	x.h.Write(x.rec[:])
	binary.BigEndian.PutUint64(x.rec[:], uint64(size))
	x.h.Write(x.rec[:])
	return x
}

// blockLen is the length of the block at x.off: BlockSize, shorter for the last one, and 0 once
// the content's size is reached (whatever comes after is only counted, for Sum to refuse).
func (x *Hasher) blockLen() int {
	return int(max(0, min(BlockSize, x.size-x.off)))
}

// Write feeds the next len(p) bytes of the content. It never fails.
func (x *Hasher) Write(p []byte) (int, error) {
	n := len(p)
	x.seen += int64(n)
	for len(p) > 0 {
		bl := x.blockLen()
		if bl == 0 {
			break // past the size: counted, not hashed
		}
		if x.fill == 0 && len(p) >= bl {
			x.emit(p[:bl]) // a whole block in place: no copy
			p = p[bl:]
			continue
		}
		k := copy(x.block[x.fill:bl], p)
		x.fill += k
		p = p[k:]
		if x.fill == bl {
			x.emit(x.block[:bl])
			x.fill = 0
		}
	}
	return n, nil
}

// Zeros feeds the next n zero bytes of the content, hashing nothing for the whole blocks they
// cover.
func (x *Hasher) Zeros(n int64) {
	if n <= 0 {
		return
	}
	x.seen += n
	if x.fill > 0 { // complete the block in progress with zeros
		bl := x.blockLen()
		k := int(min(n, int64(bl-x.fill)))
		clear(x.block[x.fill : x.fill+k])
		x.fill += k
		n -= int64(k)
		if x.fill < bl {
			return
		}
		x.emit(x.block[:bl])
		x.fill = 0
	}
	// Whole zero blocks are skipped, the short last block included.
	whole := min(n/BlockSize*BlockSize, max(0, x.size-x.off))
	if rest := x.size - x.off; n >= rest && rest > 0 {
		whole = rest
	}
	x.off += whole
	n -= whole
	if bl := x.blockLen(); n > 0 && bl > 0 {
		// Fewer than a block's bytes left: the start of a block that data may complete.
		x.fill = int(n)
		clear(x.block[:x.fill])
	}
}

// emit hashes one whole block at x.off unless it is all zeros, and moves past it.
func (x *Hasher) emit(b []byte) {
	if !bytes.Equal(b, zeroBlock[:len(b)]) {
		binary.BigEndian.PutUint64(x.rec[:], uint64(x.off))
		x.h.Write(x.rec[:])
		x.h.Write(b)
	}
	x.off += int64(len(b))
}

// Sum returns the digest in its text form. It fails when the bytes fed are not exactly the
// size given to New: then the content is not the one the digest would describe.
func (x *Hasher) Sum() (string, error) {
	if x.seen != x.size {
		return "", fmt.Errorf("extent digest: %d bytes were fed for a content of %d bytes", x.seen, x.size)
	}
	return Prefix + ":" + hex.EncodeToString(x.h.Sum(nil)), nil
}

// Parse checks that s is an extent digest's text form and returns it canonical (lower-case hex).
func Parse(s string) (string, error) {
	alg, hx, ok := strings.Cut(s, ":")
	if !ok || !strings.EqualFold(alg, Prefix) {
		return "", fmt.Errorf("expected %s:<%d hex digits>, got %q", Prefix, 2*sha256.Size, s)
	}
	if _, err := hex.DecodeString(hx); err != nil || len(hx) != 2*sha256.Size {
		return "", fmt.Errorf("expected %s:<%d hex digits>, got %q", Prefix, 2*sha256.Size, s)
	}
	return Prefix + ":" + strings.ToLower(hx), nil
}
