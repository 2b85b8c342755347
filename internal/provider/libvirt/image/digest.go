package image

import (
	"crypto/sha256"
	"fmt"
	"hash"
	"io"

	"banlieue.io/banlieue/internal/imagebuilder/checksum"
	"banlieue.io/banlieue/pkg/extentdigest"
)

// zeros is what a hole is hashed from: a hole of n bytes is n zero bytes of the artifact, and
// feeding them from one shared, never written buffer costs no read and no allocation.
var zeros [checksum.ChunkSize]byte

// digestQueue is how many data chunks may wait for the hasher: enough to keep the upload going
// while the hasher works through a long hole, with memory bounded to a few packets.
const digestQueue = 8

// uploadDigest hashes exactly the bytes the upload sends (a libvirt.UploadObserver) on a
// goroutine of its own, so the hashing runs beside the upload instead of after it: the upload
// waits only when digestQueue chunks are queued. Given an --extent-digest it computes only the
// extent digest (ADR-0134), which hashes the data and skips the holes; otherwise it computes
// the sha256 that the marker records, holes as zeros, and, when --checksum is of another
// algorithm, that one too.
type uploadDigest struct {
	sha, other hash.Hash // nil with an extent digest; other is nil unless --checksum is not a sha256
	otherAlg   string
	extent     *extentdigest.Hasher // nil without --extent-digest
	work       chan digestChunk
	free       chan []byte
	done       chan struct{}
}

// sentDigests are the digests of the bytes an upload sent: the extent digest (or why it could
// not be computed) when one was expected, else the sha256 and, for a --checksum of another
// algorithm, that one.
type sentDigests struct {
	sha, other checksum.Digest
	extent     string
	extentErr  error
}

// digestChunk is a chunk of data or, when data is nil, a hole of hole bytes.
type digestChunk struct {
	data []byte
	hole int64
}

// newUploadDigest starts the hasher for an upload of size bytes: of the extent digest when
// extent (--extent-digest) is set, else of the sha256 and given's algorithm. sums stops it.
func newUploadDigest(given checksum.Digest, extent string, size int64) *uploadDigest {
	d := &uploadDigest{
		work: make(chan digestChunk, digestQueue),
		free: make(chan []byte, digestQueue),
		done: make(chan struct{}),
	}
	switch {
	case extent != "":
		d.extent = extentdigest.New(size)
	case given.Alg != "" && given.Alg != "sha256":
		d.sha, d.other, d.otherAlg = sha256.New(), given.New(), given.Alg
	default:
		d.sha = sha256.New()
	}
	for range digestQueue {
		d.free <- nil // buffers grow to the packet size on first use
	}
	go d.run()
	return d
}

func (d *uploadDigest) run() {
	defer close(d.done)
	var w io.Writer
	switch {
	case d.extent != nil:
		w = d.extent
	case d.other != nil:
		w = io.MultiWriter(d.sha, d.other)
	default:
		w = d.sha
	}
	for c := range d.work {
		if c.data != nil {
			_, _ = w.Write(c.data) // a hash never fails
			d.free <- c.data[:0]
			continue
		}
		if d.extent != nil {
			d.extent.Zeros(c.hole) // a hole costs nothing to the extent digest
			continue
		}
		for n := c.hole; n > 0; {
			k := min(n, int64(len(zeros)))
			_, _ = w.Write(zeros[:k])
			n -= k
		}
	}
}

// Data queues a copy of p, which the uploader reuses once Data returns.
func (d *uploadDigest) Data(p []byte) {
	if len(p) == 0 {
		return
	}
	d.work <- digestChunk{data: append(<-d.free, p...)}
}

// Hole queues n zero bytes.
func (d *uploadDigest) Hole(n int64) { d.work <- digestChunk{hole: n} }

// sums waits for the hasher to finish what was queued and returns the digests of everything
// observed. Call it exactly once, after the upload returned, whether or not it succeeded.
func (d *uploadDigest) sums() sentDigests {
	close(d.work)
	<-d.done
	var s sentDigests
	if d.extent != nil {
		s.extent, s.extentErr = d.extent.Sum()
		return s
	}
	s.sha = checksum.Of("sha256", d.sha)
	if d.other != nil {
		s.other = checksum.Of(d.otherAlg, d.other)
	}
	return s
}

// uploadMismatch compares the digests of the bytes the upload sent with what the import
// expected: the extent digest (--extent-digest) when set, which alone binds the content then
// (the marker records --checksum, a sha256 of the same content); else given (--checksum), when
// set, and the sha256 the marker records (digest). It is nil when they hold. Without
// --checksum, digest was read from the source before the upload, so a difference means the
// file changed in between.
func uploadMismatch(path string, digest, given checksum.Digest, extent string, sent sentDigests) error {
	if extent != "" {
		computed := sent.extent
		if sent.extentErr != nil {
			computed = "none (" + sent.extentErr.Error() + ")"
		}
		if computed != extent {
			return fmt.Errorf("invalid --extent-digest: extent digest mismatch for %s: expected %s, computed %s over the bytes uploaded",
				path, extent, computed)
		}
		return nil
	}
	sentSHA, sentOther := sent.sha, sent.other
	if !given.IsZero() {
		computed := sentSHA
		if given.Alg != "sha256" {
			computed = sentOther
		}
		if computed != given {
			return fmt.Errorf("invalid --checksum: %w over the bytes uploaded", &checksum.MismatchError{Path: path, Expected: given, Computed: computed})
		}
	}
	if sentSHA != digest {
		return fmt.Errorf("invalid --source: %s changed during the import: its sha256 was %s before the upload and %s over the bytes uploaded",
			path, digest, sentSHA)
	}
	return nil
}
