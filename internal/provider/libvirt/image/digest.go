package image

import (
	"crypto/sha256"
	"fmt"
	"hash"
	"io"

	"banlieue.io/banlieue/internal/imagebuilder/checksum"
)

// zeros is what a hole is hashed from: a hole of n bytes is n zero bytes of the artifact, and
// feeding them from one shared, never written buffer costs no read and no allocation.
var zeros [checksum.ChunkSize]byte

// digestQueue is how many data chunks may wait for the hasher: enough to keep the upload going
// while the hasher works through a long hole, with memory bounded to a few packets.
const digestQueue = 8

// uploadDigest hashes exactly the bytes the upload sends (a libvirt.UploadObserver), holes as
// zeros, on a goroutine of its own so the hashing runs beside the upload instead of after it:
// the upload waits only when digestQueue chunks are queued. It computes the sha256 that the
// marker records and, when --checksum is of another algorithm, that one too.
type uploadDigest struct {
	sha, other hash.Hash // other is nil unless --checksum is not a sha256
	otherAlg   string
	work       chan digestChunk
	free       chan []byte
	done       chan struct{}
}

// digestChunk is a chunk of data or, when data is nil, a hole of hole bytes.
type digestChunk struct {
	data []byte
	hole int64
}

// newUploadDigest starts the hasher; sums stops it.
func newUploadDigest(given checksum.Digest) *uploadDigest {
	d := &uploadDigest{
		sha:  sha256.New(),
		work: make(chan digestChunk, digestQueue),
		free: make(chan []byte, digestQueue),
		done: make(chan struct{}),
	}
	if given.Alg != "" && given.Alg != "sha256" {
		d.other, d.otherAlg = given.New(), given.Alg
	}
	for range digestQueue {
		d.free <- nil // buffers grow to the packet size on first use
	}
	go d.run()
	return d
}

func (d *uploadDigest) run() {
	defer close(d.done)
	w := io.Writer(d.sha)
	if d.other != nil {
		w = io.MultiWriter(d.sha, d.other)
	}
	for c := range d.work {
		if c.data != nil {
			_, _ = w.Write(c.data) // a hash never fails
			d.free <- c.data[:0]
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

// sums waits for the hasher to finish what was queued and returns the sha256 of everything
// observed and, when --checksum is of another algorithm, that digest (else the zero Digest).
// Call it exactly once, after the upload returned, whether or not it succeeded.
func (d *uploadDigest) sums() (sha, other checksum.Digest) {
	close(d.work)
	<-d.done
	sha = checksum.Of("sha256", d.sha)
	if d.other != nil {
		other = checksum.Of(d.otherAlg, d.other)
	}
	return sha, other
}

// uploadMismatch compares the digests of the bytes the upload sent (sentSHA, and sentOther of
// --checksum's algorithm when that is not sha256) with what the import expected: given
// (--checksum), when set, and the sha256 the marker records (digest). It is nil when both hold.
// Without --checksum, digest was read from the source before the upload, so a difference means
// the file changed in between.
func uploadMismatch(path string, digest, given, sentSHA, sentOther checksum.Digest) error {
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
