package libvirt

import (
	"errors"
	"fmt"
)

// ErrDownloadOverLimit is returned when a download stream covers more bytes than the caller's
// DownloadOptions.Limit: the peer sent more than the volume holds, and nothing past the limit
// was written.
var ErrDownloadOverLimit = errors.New("download exceeds its limit")

// DownloadOptions bound and watch a download (StorageVolDownloadObserved).
type DownloadOptions struct {
	// Limit refuses a stream that covers more than Limit bytes, data and holes together, before
	// the message that would pass it is written: the volume's capacity, read before the
	// download, bounds what a peer can make the caller write. 0: no limit.
	Limit int64
	// Progress, if set, is told the bytes covered after each message.
	Progress Progress
	// Observer, if set, is told each chunk of data and each hole in stream order, after the
	// limit admitted it and before the next message is read: together its calls describe the
	// volume as received, so a digest needs no second read of the destination. Data's slice is
	// not kept by the client once Data returns. Holes are reported only for a sparse download
	// (an *os.File destination); other writers see holes as data.
	Observer UploadObserver
}

// admit checks that n more bytes after done stay within the limit.
func (o DownloadOptions) admit(done, n int64) error {
	if o.Limit > 0 && (n > o.Limit || done > o.Limit-n) {
		return fmt.Errorf("%w of %d bytes: %d bytes received, %d more offered", ErrDownloadOverLimit, o.Limit, done, n)
	}
	return nil
}
