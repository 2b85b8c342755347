// Package vmexport takes a stopped VM's disk off its host and publishes it (ADR-0157): the host
// flattens the disk's qcow2 chain into a temporary standalone copy in the VM's pool, the copy is
// downloaded sparse and bounded by its size, hashed as it arrives and checked again on the
// destination, then written to a directory (a PersistentVolumeClaim) or pushed to an OCI
// registry as a containerDisk, which a VMImage's OCI source imports back.
package vmexport

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"time"

	"banlieue.io/banlieue/internal/vmexport/exportjob"
	"banlieue.io/banlieue/pkg/libvirt"
)

// Host is the part of a libvirt client an export calls.
type Host interface {
	StorageVolGetInfo(ctx context.Context, v libvirt.StorageVol) (libvirt.StorageVolInfo, error)
	StorageVolLookupByName(ctx context.Context, p libvirt.StoragePool, name string) (libvirt.StorageVol, error)
	StorageVolCreateXMLFrom(ctx context.Context, p libvirt.StoragePool, xml string, src libvirt.StorageVol, flags uint32) (libvirt.StorageVol, error)
	StorageVolDelete(ctx context.Context, v libvirt.StorageVol) error
	StorageVolDownloadObserved(ctx context.Context, v libvirt.StorageVol, w io.Writer, o libvirt.DownloadOptions) (int64, error)
}

// Steps of an export; a StepError names the one that failed, and the VirtualMachineExport's
// condition reason is derived from it (docs/guides/export.md).
const (
	StepFlatten  = exportjob.StepFlatten
	StepDownload = exportjob.StepDownload
	StepVerify   = exportjob.StepVerify
	StepPublish  = exportjob.StepPublish
	StepCleanup  = exportjob.StepCleanup
)

// StepError is an export's failure at one step.
type StepError struct {
	Step string
	Err  error
}

func (e *StepError) Error() string { return fmt.Sprintf("export %s: %v", e.Step, e.Err) }
func (e *StepError) Unwrap() error { return e.Err }

// StepOf returns the step err failed at, or "" for an error of no step.
func StepOf(err error) string {
	var se *StepError
	if errors.As(err, &se) {
		return se.Step
	}
	return ""
}

// MaxFileSize bounds the file of a standalone qcow2 image of capacity bytes: the data, at most
// capacity, plus its metadata, with 64 KiB clusters 8 bytes of L2 table and 2 of refcount per
// cluster (capacity/6554) and a header and tables of a few clusters. A quarter of a percent plus
// 32 MiB leaves room for other cluster sizes; a host that sends more is refused.
func MaxFileSize(capacity uint64) int64 {
	const maxCapacity = 1 << 56 // 64 PiB: no disk a host serves is larger; keeps the sum in range
	c := min(capacity, maxCapacity)
	return int64(c + c/400 + 32<<20)
}

// CopyName is the name of the temporary standalone copy of volume vol for the export whose UID
// is uid: one per export, so a retry finds its own copy and two exports never share one.
func CopyName(vol, uid string) string {
	const keep = 12
	if len(uid) > keep {
		uid = uid[:keep]
	}
	return vol + ".export-" + uid
}

// Result is a disk taken off its host.
type Result = exportjob.Result

// Options bound the host's steps (zero values take the defaults) and check the disk's owner.
type Options struct {
	// Flatten bounds the host's copy (STORAGE_VOL_CREATE_XML_FROM), which reads the whole disk.
	Flatten time.Duration
	// AfterFlatten, if set, runs once the copy exists and before it is read: the place to
	// check that the disk did not change during the copy (its VM still stopped). An error
	// fails the Flatten step; the copy is deleted.
	AfterFlatten func(context.Context) error
}

// DefaultFlattenTimeout lets a host copy a 1 TiB disk at about 100 MiB/s.
const DefaultFlattenTimeout = 3 * time.Hour

// Disk flattens vol (in pool) into a copy named copyName, downloads the copy into dst from its
// current position, deletes the copy and returns what was downloaded. A copy left by an earlier
// attempt (a Job killed mid-way) is deleted first: its content cannot be trusted. The copy is
// deleted on failure too, with a fresh deadline, so nothing is left on the host.
func Disk(ctx context.Context, h Host, pool libvirt.StoragePool, vol libvirt.StorageVol, copyName string, dst *os.File, t Options) (res Result, err error) {
	if t.Flatten <= 0 {
		t.Flatten = DefaultFlattenTimeout
	}
	info, err := h.StorageVolGetInfo(ctx, vol)
	if err != nil {
		return Result{}, &StepError{StepFlatten, fmt.Errorf("reading volume %s: %w", vol.Name, err)}
	}
	if err := deleteCopy(ctx, h, pool, copyName); err != nil {
		return Result{}, &StepError{StepCleanup, err}
	}
	xml := fmt.Sprintf(`<volume type='file'><name>%s</name><capacity unit='bytes'>%d</capacity>`+
		`<target><format type='qcow2'/></target></volume>`, xmlEscape(copyName), info.Capacity)
	cp, err := h.StorageVolCreateXMLFrom(libvirt.WithCallTimeout(ctx, t.Flatten), pool, xml, vol, 0)
	if err != nil {
		return Result{}, &StepError{StepFlatten, fmt.Errorf("copying volume %s into %s: %w", vol.Name, copyName, err)}
	}
	defer func() {
		// The copy goes whatever happened, on a deadline of its own: ctx may be what ended.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if derr := h.StorageVolDelete(cctx, cp); derr != nil && err == nil {
			err = &StepError{StepCleanup, fmt.Errorf("deleting copy %s: %w", copyName, derr)}
		}
	}()

	if t.AfterFlatten != nil {
		if err := t.AfterFlatten(ctx); err != nil {
			return Result{}, &StepError{StepFlatten, err}
		}
	}
	start, err := dst.Seek(0, io.SeekCurrent)
	if err != nil {
		return Result{}, &StepError{StepDownload, err}
	}
	obs := newDigester()
	n, err := h.StorageVolDownloadObserved(ctx, cp, dst, libvirt.DownloadOptions{Limit: MaxFileSize(info.Capacity), Observer: obs})
	if err != nil {
		return Result{}, &StepError{StepDownload, fmt.Errorf("downloading copy %s: %w", copyName, err)}
	}
	digest := obs.digest()
	if err := dst.Sync(); err != nil {
		return Result{}, &StepError{StepVerify, err}
	}
	got, err := FileDigest(io.NewSectionReader(dst, start, n))
	if err != nil {
		return Result{}, &StepError{StepVerify, err}
	}
	if got != digest {
		return Result{}, &StepError{StepVerify, fmt.Errorf("the written file reads back as %s, the host sent %s", got, digest)}
	}
	return Result{Size: n, Digest: digest, Capacity: info.Capacity}, nil
}

func deleteCopy(ctx context.Context, h Host, pool libvirt.StoragePool, name string) error {
	old, err := h.StorageVolLookupByName(ctx, pool, name)
	if libvirt.IsNotFound(err) {
		return nil
	}
	if err == nil {
		err = h.StorageVolDelete(ctx, old)
	}
	if err != nil {
		return fmt.Errorf("deleting the copy %s an earlier attempt left: %w", name, err)
	}
	return nil
}

// FileDigest is the sha256 of r's content: sha256:<hex>.
func FileDigest(r io.Reader) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// digester hashes a download as it arrives, holes as the zeros they stand for.
type digester struct {
	h    hash.Hash
	zero []byte
}

func newDigester() *digester { return &digester{h: sha256.New(), zero: make([]byte, 64<<10)} }

func (d *digester) Data(p []byte) { d.h.Write(p) }

func (d *digester) Hole(n int64) {
	for n > 0 {
		k := min(n, int64(len(d.zero)))
		d.h.Write(d.zero[:k])
		n -= k
	}
}

func (d *digester) digest() string { return "sha256:" + hex.EncodeToString(d.h.Sum(nil)) }

func xmlEscape(s string) string {
	var b []byte
	for _, r := range []byte(s) {
		switch r {
		case '<':
			b = append(b, "&lt;"...)
		case '>':
			b = append(b, "&gt;"...)
		case '&':
			b = append(b, "&amp;"...)
		case '\'':
			b = append(b, "&apos;"...)
		case '"':
			b = append(b, "&quot;"...)
		default:
			b = append(b, r)
		}
	}
	return string(b)
}
