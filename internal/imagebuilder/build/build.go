// Package build is `banlieue imagebuilder build`, the build Job's command: it fetches an image
// source, verifies it, turns it into a raw disk (or keeps an ISO as is) and publishes it
// atomically on the artifacts PVC with a `<file>.sha256` beside it.
package build

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/imagebuilder/checksum"
	"banlieue.io/banlieue/internal/imagebuilder/qcow2"
	"banlieue.io/banlieue/pkg/extentdigest"
)

// FromEnv is where the build Job's container finds its source when --from is not given: the
// imagebuilder sets it from the build Secret, so the URL is in no argv (docs/guides/image-sources.md,
// "Credentials in source URLs").
const FromEnv = "BANLIEUE_BUILD_FROM"

// Options are the flags of `banlieue imagebuilder build`.
type Options struct {
	VMImage  string
	From     string
	Output   string
	Checksum string
	Format   string // auto, raw, qcow2 or iso
	// AllowUnverifiedTag lets an OCI reference name a tag without a digest or a checksum:
	// the VMImage's allowUnverifiedTag.
	AllowUnverifiedTag bool
	Limits             Limits
}

// Result is what a build reports to its controller through the pod's termination message.
type Result struct {
	Kind         banlieuev1.ArtifactKind `json:"kind"`
	File         string                  `json:"file"`
	Checksum     string                  `json:"checksum"`
	SizeBytes    int64                   `json:"sizeBytes"`
	SourceDigest string                  `json:"sourceDigest,omitempty"`
	// ExtentDigest is the artifact's extent digest (ADR-0134), from the same read as Checksum.
	ExtentDigest string `json:"extentDigest,omitempty"`
}

// Build runs the pipeline. Intermediate files sit next to the output, on the same filesystem,
// so the final rename is atomic and a restarted pod resumes the download it left. log gets
// progress lines for the pod's log; they are advisory, so a failed write to it is ignored.
func Build(ctx context.Context, o Options, log io.Writer) (res Result, err error) {
	// Every path below redacts the URL it prints; this catches one that forgot.
	defer func() { err = redactSource(err, o.From) }()
	var want checksum.Digest
	if o.Checksum != "" {
		if want, err = checksum.Parse(o.Checksum); err != nil {
			return Result{}, fmt.Errorf("invalid --checksum: %w", err)
		}
	}
	switch o.Format {
	case "", "auto", "raw", "qcow2", "iso":
	default:
		return Result{}, fmt.Errorf("invalid --format: %q (auto, raw, qcow2 or iso)", o.Format)
	}
	download := o.Output + ".download"
	sourceDigest := o.Checksum
	switch {
	case strings.HasPrefix(o.From, "https://"):
	case strings.HasPrefix(o.From, "http://"):
		if want.IsZero() {
			return Result{}, errors.New("invalid --from: a plain http:// source needs --checksum")
		}
	case strings.Contains(o.From, "://"):
		return Result{}, fmt.Errorf("invalid --from: %q is neither an https:// URL nor an OCI reference", RedactURL(o.From))
	}
	if strings.Contains(o.From, "://") {
		_, _ = fmt.Fprintf(log, "downloading %s\n", RedactURL(o.From))
		d := &downloader{hc: newHTTPClient(o.Limits), limits: o.Limits, window: rateWindow, log: log}
		if err := d.download(ctx, o.From, o.Checksum, download); err != nil {
			return Result{}, err
		}
	} else {
		ref, err := parseReference(o.From, o.Limits.InsecureRegistries)
		if err != nil {
			return Result{}, err
		}
		if !pinned(ref) && want.IsZero() && !o.AllowUnverifiedTag {
			// A tag is whatever the registry serves today; nothing would tie the disk to
			// what the VMImage's author meant.
			return Result{}, &RefusedError{Rule: "--checksum, a digest or --" + FlagAllowUnverifiedTag,
				Seen: fmt.Sprintf("%s names a tag, not a digest, and has no checksum", o.From)}
		}
		_, _ = fmt.Fprintf(log, "pulling %s\n", o.From)
		digest, err := pullDisk(ctx, ref, download, o.Limits)
		if err != nil {
			return Result{}, err
		}
		sourceDigest = digest
	}
	if !want.IsZero() {
		if err := checksum.Verify(download, want); err != nil {
			if errors.Is(err, checksum.ErrMismatch) {
				// A corrupt or tampered download must not be resumed either.
				removePartial(download)
				return Result{}, fmt.Errorf("invalid --checksum: checksum mismatch for %s: expected %s, computed %s",
					RedactURL(o.From), want, err.(*checksum.MismatchError).Computed)
			}
			return Result{}, err
		}
		_, _ = fmt.Fprintf(log, "verified %s\n", want)
	}
	staged, kind, err := convert(ctx, download, o.Output, o.Format, o.Limits, log)
	if err != nil {
		return Result{}, err
	}
	res, err = publish(staged, o.Output, kind)
	if err != nil {
		return Result{}, err
	}
	for _, p := range []string{download, partialPath(download), o.Output + ".decompressed"} {
		_ = os.Remove(p)
	}
	res.SourceDigest = sourceDigest
	_, _ = fmt.Fprintf(log, "published %s (%s, %d bytes, %s)\n", o.Output, res.Kind, res.SizeBytes, res.Checksum)
	return res, nil
}

// Magic numbers of the formats a source may be in.
var (
	magicGzip = []byte{0x1f, 0x8b}
	magicXZ   = []byte{0xfd, '7', 'z', 'X', 'Z', 0}
	magicZstd = []byte{0x28, 0xb5, 0x2f, 0xfd}
	magicISO  = []byte("CD001") // at 0x8001, the first volume descriptor
)

const isoMagicOffset = 0x8001

// convert decompresses and converts the download into a staged raw disk or ISO and returns
// its path and kind. Compression is recognised by content, not by name: URLs often lie.
// limits bound what the source may make the build allocate or write.
func convert(ctx context.Context, src, output, format string, limits Limits, log io.Writer) (_ string, _ banlieuev1.ArtifactKind, err error) {
	head, err := readHead(src, isoMagicOffset+len(magicISO))
	if err != nil {
		return "", "", err
	}
	if r, name := decompressor(head, limits); r != nil {
		_, _ = fmt.Fprintf(log, "decompressing (%s)\n", name) // advisory, as in Build
		dst := output + ".decompressed"
		if err := decompress(src, dst, r, limits.MaxDiskBytes); err != nil {
			return "", "", fmt.Errorf("decompressing %s: %w", name, err)
		}
		defer func() {
			if err != nil {
				_ = os.Remove(dst) // of no use once the source is refused, and up to --max-disk-size
			}
		}()
		src = dst
		if head, err = readHead(src, isoMagicOffset+len(magicISO)); err != nil {
			return "", "", err
		}
	}
	detected := "raw"
	switch {
	case bytes.HasPrefix(head, qcow2.Magic):
		detected = "qcow2"
	case len(head) >= isoMagicOffset+len(magicISO) && bytes.Equal(head[isoMagicOffset:], magicISO):
		detected = "iso"
	}
	if format != "" && format != "auto" && format != detected {
		return "", "", fmt.Errorf("invalid --format: %s given, but the source is %s", format, detected)
	}
	switch detected {
	case "qcow2":
		_, _ = fmt.Fprintln(log, "converting qcow2 to raw")
		staged := output + ".tmp"
		return staged, banlieuev1.ArtifactCloudImage, convertQCOW2(ctx, src, staged, limits)
	case "iso":
		return src, banlieuev1.ArtifactISO, nil
	default:
		return src, banlieuev1.ArtifactCloudImage, nil
	}
}

func readHead(path string, n int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read only: closing it loses nothing
	buf := make([]byte, n)
	m, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if m == 0 {
		return nil, errors.New("the source is empty")
	}
	return buf[:m], nil
}

// openDecompressor opens a decoder over f, having checked what the decoder would allocate.
type openDecompressor func(f *os.File) (io.ReadCloser, error)

func decompressor(head []byte, limits Limits) (openDecompressor, string) {
	switch {
	case bytes.HasPrefix(head, magicGzip):
		return func(f *os.File) (io.ReadCloser, error) { return gzip.NewReader(f) }, "gzip"
	case bytes.HasPrefix(head, magicXZ):
		return func(f *os.File) (io.ReadCloser, error) {
			if err := checkXZ(f, limits.MaxXZDictBytes); err != nil {
				return nil, err
			}
			x, err := xz.NewReader(f)
			return io.NopCloser(x), err
		}, "xz"
	case bytes.HasPrefix(head, magicZstd):
		return func(f *os.File) (io.ReadCloser, error) {
			if err := checkZstd(f, limits.MaxZstdWindowBytes); err != nil {
				return nil, err
			}
			// The decoder's own limits are what bound its memory: the window it keeps, and the
			// buffer of a single-segment frame (WithDecoderMaxMemory).
			window := uint64(max(limits.MaxZstdWindowBytes, zstd.MinWindowSize))
			z, err := zstd.NewReader(f, zstd.WithDecoderLowmem(true), zstd.WithDecoderConcurrency(1),
				zstd.WithDecoderMaxWindow(window), zstd.WithDecoderMaxMemory(window))
			if err != nil {
				return nil, err
			}
			return zstdReader{z, limits.MaxZstdWindowBytes}, nil
		}, "zstd"
	}
	return nil, ""
}

// zstdReader reports the decoder's refusal of a frame's window as the source's refusal.
// checkZstd has refused such a frame already, naming its window; this covers one the walk
// and the decoder would read differently.
type zstdReader struct {
	d     *zstd.Decoder
	limit int64
}

func (z zstdReader) Read(p []byte) (int, error) {
	n, err := z.d.Read(p)
	if errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		err = refusedBy(FlagMaxZstdWindow, z.limit, "a zstd frame declares a larger window")
	}
	return n, err
}

func (z zstdReader) Close() error {
	z.d.Close()
	return nil
}

// decompress writes the decompressed src to dst, stopping at maxDisk bytes: past that the
// source is refused (a few kilobytes of gzip or xz can expand without end) and dst removed.
func decompress(src, dst string, open openDecompressor, maxDisk int64) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }() // read only: closing it loses nothing
	r, err := open(in)
	if err != nil {
		return err
	}
	defer func() { _ = r.Close() }() // a decoder's close only releases it
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(dst) // a partial disk is of no use, and may be most of the volume
		}
	}()
	defer closeWritten(out, &err)
	n, err := copySparse(out, io.LimitReader(r, min(maxDisk, math.MaxInt64-1)+1))
	if err == nil && n > maxDisk {
		err = refusedBy(FlagMaxDiskSize, maxDisk, "decompressed stream exceeds "+quantityString(maxDisk))
	}
	return err
}

func convertQCOW2(ctx context.Context, src, dst string, limits Limits) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }() // read only: closing it loses nothing
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	img, err := qcow2.Open(in, fi.Size(), qcow2.Limits{MaxVirtualSize: limits.MaxDiskBytes, MaxZstdWindow: limits.MaxZstdWindowBytes})
	if err != nil {
		return qcow2Refusal(err, limits)
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(dst) // a partial disk is of no use
		}
	}()
	defer closeWritten(out, &err)
	if err := out.Truncate(0); err != nil {
		return err
	}
	return qcow2Refusal(img.ConvertTo(ctx, out), limits)
}

// qcow2Refusal is err, with the qcow2 reader's refusal turned into the source's: named by the
// flag that set the limit, or by the structure rules (docs/guides/image-sources.md).
func qcow2Refusal(err error, limits Limits) error {
	var r *qcow2.RefusedError
	if !errors.As(err, &r) {
		return err
	}
	switch r.Rule {
	case qcow2.RuleVirtualSize:
		return refusedBy(FlagMaxDiskSize, limits.MaxDiskBytes, "qcow2 virtual size "+quantityString(r.Seen))
	case qcow2.RuleZstdWindow:
		if r.Seen < 0 {
			return refusedBy(FlagMaxZstdWindow, limits.MaxZstdWindowBytes, "qcow2 compressed cluster declares a larger zstd window")
		}
		return refusedBy(FlagMaxZstdWindow, limits.MaxZstdWindowBytes, "qcow2 compressed cluster declares a zstd window of "+quantityString(r.Seen))
	default:
		return &RefusedError{Rule: qcow2StructureRule, Seen: r.Detail}
	}
}

// qcow2StructureRule names the rules no flag sets: tables and clusters in the file, each
// referenced once, and an L1 table sized by the virtual size.
const qcow2StructureRule = "qcow2 structure rules"

// closeWritten closes a file the function wrote, for a defer: a failed close may have lost
// data, so its error becomes the function's unless that already failed.
func closeWritten(f *os.File, err *error) {
	if cerr := f.Close(); *err == nil {
		*err = cerr
	}
}

// publish fsyncs the staged file, writes `<output>.sha256` and renames both into place, then
// fsyncs the directory: a reader sees either the old artifact or the complete new one.
func publish(staged, output string, kind banlieuev1.ArtifactKind) (Result, error) {
	f, err := os.Open(staged)
	if err != nil {
		return Result{}, err
	}
	fi, err := f.Stat()
	if err == nil {
		err = f.Sync()
	}
	_ = f.Close() // opened read only for the fsync, whose error is the one that matters
	if err != nil {
		return Result{}, err
	}
	if fi.Size() == 0 {
		return Result{}, errors.New("the source is empty; refusing to publish an empty disk")
	}
	sum, extent, err := digests(staged, fi.Size())
	if err != nil {
		return Result{}, err
	}
	sidecar := output + ".sha256"
	line := fmt.Sprintf("%s  %s\n", sum.Hex, filepath.Base(output))
	if err := writeFileSync(sidecar+".tmp", []byte(line)); err != nil {
		return Result{}, err
	}
	if err := os.Rename(staged, output); err != nil {
		return Result{}, err
	}
	if err := os.Rename(sidecar+".tmp", sidecar); err != nil {
		return Result{}, err
	}
	if err := syncDir(filepath.Dir(output)); err != nil {
		return Result{}, err
	}
	return Result{Kind: kind, File: filepath.Base(output), Checksum: sum.String(), ExtentDigest: extent, SizeBytes: fi.Size()}, nil
}

// digests reads the staged artifact once for both digests the import may verify: its sha256
// and its extent digest.
func digests(path string, size int64) (checksum.Digest, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return checksum.Digest{}, "", err
	}
	defer func() { _ = f.Close() }() // read only: closing it loses nothing
	sha, extent := sha256.New(), extentdigest.New(size)
	if _, err := io.CopyBuffer(io.MultiWriter(sha, extent), f, make([]byte, checksum.ChunkSize)); err != nil {
		return checksum.Digest{}, "", fmt.Errorf("hashing %s: %w", path, err)
	}
	ext, err := extent.Sum() // fails only if the file changed size under the build
	if err != nil {
		return checksum.Digest{}, "", fmt.Errorf("hashing %s: %w", path, err)
	}
	return checksum.Of("sha256", sha), ext, nil
}

func writeFileSync(path string, data []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close() // the write's error is the one to report
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close() // the fsync's error is the one to report
		return err
	}
	return f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }() // read only: the fsync's error is the one that matters
	return d.Sync()
}

// Failure is what a failed build reports through its termination message: the reason the
// VMImage's row takes (SourceRefused for a RefusedError, BuildFailed otherwise) and the error.
type Failure struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// FailureOf is the Failure that err reports.
func FailureOf(err error) Failure {
	f := Failure{Reason: banlieuev1.ReasonBuildFailed, Message: err.Error()}
	var refused *RefusedError
	if errors.As(err, &refused) {
		f.Reason = banlieuev1.ReasonSourceRefused
	}
	return f
}

// WriteFailure records err as a Failure in the termination message file.
func WriteFailure(path string, err error) error {
	data, jerr := json.Marshal(FailureOf(err))
	if jerr != nil {
		return jerr
	}
	return os.WriteFile(path, data, 0o644)
}

// WriteResult records res as JSON in the termination message file, which is how the
// imagebuilder controller learns the artifact's checksum without mounting the PVC.
func WriteResult(path string, res Result) error {
	data, err := json.Marshal(res)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
