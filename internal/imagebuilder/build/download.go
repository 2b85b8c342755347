package build

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"
)

const downloadAttempts = 6

// downloader fetches URL sources under a build's limits.
type downloader struct {
	hc     *http.Client
	limits Limits
	// window is what MinBytesPerSecond is averaged over: rateWindow, shorter in tests.
	window time.Duration
	log    io.Writer
}

// download fetches url into path, resuming with a Range request from what path already holds:
// after a dropped connection within this run, and after a pod restart, since path lives on the
// artifacts PVC. A resume continues only the same source (url and sum) and only while the
// server says the resource is unchanged (If-Range); otherwise it starts over. Zeros are
// written as holes.
func (d *downloader) download(ctx context.Context, url, sum, path string) error {
	var lastErr error
	for attempt := range downloadAttempts {
		if attempt > 0 {
			wait := time.Duration(1<<attempt) * time.Second / 2
			_, _ = fmt.Fprintf(d.log, "download interrupted (%v); resuming in %s\n", lastErr, wait) // advisory, as in Build
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait):
			}
		}
		done, err := d.once(ctx, url, sum, path)
		if done {
			return nil
		}
		var fatal *fatalError
		if errors.As(err, &fatal) || isRefused(err) || untrusted(err) || ctx.Err() != nil {
			return err
		}
		lastErr = err
	}
	return fmt.Errorf("downloading %s: giving up after %d attempts: %w", RedactURL(url), downloadAttempts, lastErr)
}

// untrusted reports a server certificate the build does not accept: a retry meets the same
// certificate, so retrying only delays the error by the backoff (about 30 s).
func untrusted(err error) bool {
	var unknown x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	var host x509.HostnameError
	var verify *tls.CertificateVerificationError
	return errors.As(err, &unknown) || errors.As(err, &invalid) || errors.As(err, &host) || errors.As(err, &verify)
}

// fatalError is a response retrying cannot fix (404, 403, ...).
type fatalError struct{ error }

func (d *downloader) once(ctx context.Context, url, sum, path string) (done bool, err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return false, &fatalError{err}
	}
	defer func() {
		// Written: a failed close may have lost data, so the attempt is not done; the next
		// one resumes from what the file holds.
		if cerr := f.Close(); cerr != nil && err == nil {
			done, err = false, cerr
		}
	}()
	fi, err := f.Stat()
	if err != nil {
		return false, &fatalError{err}
	}
	have := fi.Size()
	startOver := func() error {
		have = 0
		if err := f.Truncate(0); err != nil {
			return &fatalError{err}
		}
		return nil
	}
	p, ok := loadPartial(path)
	if have > 0 && (!ok || p.URL != url || p.Checksum != sum || p.ifRange() == "") {
		// The bytes came from another source, or from a response no validator ties to the
		// resource: continuing them could splice two resources together.
		if err := startOver(); err != nil {
			return false, err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, &fatalError{redactURLError(err)}
	}
	if have > 0 {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(have, 10)+"-")
		req.Header.Set("If-Range", p.ifRange())
	}
	resp, err := d.hc.Do(req)
	if err != nil {
		// net/http names the request's URL (or a redirect's) in its error.
		return false, redactURLError(err)
	}
	defer resp.Body.Close()
	w := &sparseWriter{f: f}
	switch {
	case resp.StatusCode == http.StatusPartialContent && have > 0:
		if err := checkResume(p, have, resp); err != nil {
			return false, errors.Join(fmt.Errorf("resuming %s: %w; starting over", url, err), startOver())
		}
		w.off = have
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable && have > 0:
		if complete(p, have, resp) {
			return true, nil // what we hold is the whole resource
		}
		return false, errors.Join(fmt.Errorf("resuming %s: %s, and the partial download is not the whole resource; starting over",
			url, resp.Status), startOver())
	case resp.StatusCode == http.StatusOK:
		// No range asked, or the server ignored it, or If-Range found the resource changed.
		if err := startOver(); err != nil {
			return false, err
		}
		if err := savePartial(path, partialOf(url, sum, resp)); err != nil {
			return false, &fatalError{err}
		}
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		return false, fmt.Errorf("GET %s: %s", RedactURL(url), resp.Status)
	default:
		return false, &fatalError{fmt.Errorf("GET %s: %s", RedactURL(url), resp.Status)}
	}
	maxBytes := d.limits.MaxDownloadBytes
	if resp.ContentLength >= 0 && w.off+resp.ContentLength > maxBytes {
		return false, refusedBy(FlagMaxDownloadSize, maxBytes, fmt.Sprintf("the server announces %d bytes", w.off+resp.ContentLength))
	}
	body := watch(resp.Body, d.limits.MinBytesPerSecond, d.window, cancel)
	defer body.stop()
	_, err = io.CopyBuffer(&cappedWriter{w: w, max: maxBytes}, body, make([]byte, 1<<20))
	// finish on the failure path too: the bytes received up to a trailing run of zeros are
	// the partial the next attempt resumes from.
	ferr := w.finish()
	if err != nil {
		if stalled := body.stalled(); stalled != nil {
			err = fmt.Errorf("GET %s: %w", url, stalled)
		}
		return false, errors.Join(err, ferr)
	}
	return true, ferr
}

// cappedWriter refuses the write that would take the download past max bytes.
type cappedWriter struct {
	w   *sparseWriter
	max int64
}

func (c *cappedWriter) Write(p []byte) (int, error) {
	if c.w.off+int64(len(p)) > c.max {
		return 0, refusedBy(FlagMaxDownloadSize, c.max, "the body runs past it")
	}
	return c.w.Write(p)
}
