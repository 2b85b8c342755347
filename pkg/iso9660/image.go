package iso9660

import (
	"fmt"
	"io"
	"time"
)

// SectorSize is the logical block size of every image (ECMA-119 6.1.2).
const SectorSize = 2048

// MaxLabelLen is the length of the volume identifier field (ECMA-119 8.4.6).
const MaxLabelLen = 32

// epoch is the date recorded when Volume.Time is zero. A fixed date keeps
// the output a pure function of the input.
var epoch = time.Date(1970, time.January, 1, 0, 0, 0, 0, time.UTC)

// File is a regular file in the root directory.
type File struct {
	// Name is the Joliet name; the primary name is derived from it.
	Name string
	// Data is the content. Build keeps a reference, so it must not be
	// modified until the image has been written.
	Data []byte
}

// Volume describes an image to build.
type Volume struct {
	// Label is the volume identifier: at most MaxLabelLen characters from
	// [A-Z0-9_] (d-characters, ECMA-119 7.4.1). The Joliet descriptor holds
	// 16 UCS-2 characters, so a longer label is cut there in that
	// descriptor only.
	Label string
	// Files are the files of the root directory, in any order.
	Files []File
	// Time is recorded as every creation, modification and recording date.
	// Zero means 1970-01-01T00:00:00Z. It must fall in 1900-2155, the range of a
	// directory record date (ECMA-119 9.1.5).
	Time time.Time
}

// Image is a laid-out image, ready to be written any number of times.
type Image struct {
	// head holds every sector before the first file extent: the system
	// area, the descriptors, the path tables and the directories.
	head  []byte
	files []*file
	size  int64
}

// Build validates v and lays the image out. Errors name the offending file.
func Build(v Volume) (*Image, error) {
	if err := checkLabel(v.Label); err != nil {
		return nil, err
	}
	stamp := v.Time
	if stamp.IsZero() {
		stamp = epoch
	}
	stamp = stamp.UTC()
	if y := stamp.Year(); y < 1900 || y > 2155 {
		return nil, fmt.Errorf("iso9660: time %s is outside the recordable years 1900-2155", stamp.Format(time.RFC3339))
	}
	root, err := newRootDirectory(v.Files)
	if err != nil {
		return nil, err
	}
	l, err := plan(root)
	if err != nil {
		return nil, err
	}
	return &Image{
		head:  encodeHead(l, v.Label, stamp),
		files: l.files,
		size:  int64(l.sectors) * SectorSize,
	}, nil
}

// Size is the exact number of bytes WriteTo writes.
func (im *Image) Size() int64 { return im.size }

// WriteTo writes the whole image to w. It implements io.WriterTo.
func (im *Image) WriteTo(w io.Writer) (int64, error) {
	var written int64
	write := func(b []byte) error {
		n, err := w.Write(b)
		written += int64(n)
		return err
	}
	if err := write(im.head); err != nil {
		return written, fmt.Errorf("iso9660: write metadata: %w", err)
	}
	var zeros [SectorSize]byte
	for _, f := range im.files {
		if err := write(f.data); err != nil {
			return written, fmt.Errorf("iso9660: write %q: %w", f.name, err)
		}
		if err := write(zeros[:f.sectors()*SectorSize-int64(len(f.data))]); err != nil {
			return written, fmt.Errorf("iso9660: write %q: %w", f.name, err)
		}
	}
	return written, nil
}

func checkLabel(label string) error {
	if len(label) > MaxLabelLen {
		return fmt.Errorf("iso9660: volume label %q is longer than %d characters", label, MaxLabelLen)
	}
	for i := 0; i < len(label); i++ {
		if !isDChar(label[i]) {
			return fmt.Errorf("iso9660: volume label %q has %q; only A-Z, 0-9 and _ are allowed", label, label[i])
		}
	}
	return nil
}
