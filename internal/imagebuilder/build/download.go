package build

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"
)

const (
	downloadAttempts = 6
	// headerTimeout bounds waiting for a response; the body may take as long as it needs as
	// long as it keeps moving (idleTimeout).
	headerTimeout = 30 * time.Second
	idleTimeout   = 60 * time.Second
)

// download fetches url into path, resuming with a Range request from what path already holds:
// after a dropped connection within this run, and after a pod restart, since path lives on the
// artifacts PVC. Zeros are written as holes.
func download(ctx context.Context, hc *http.Client, url, path string, log io.Writer) error {
	var lastErr error
	for attempt := range downloadAttempts {
		if attempt > 0 {
			wait := time.Duration(1<<attempt) * time.Second / 2
			_, _ = fmt.Fprintf(log, "download interrupted (%v); resuming in %s\n", lastErr, wait) // advisory, as in Build
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait):
			}
		}
		done, err := downloadOnce(ctx, hc, url, path)
		if done {
			return nil
		}
		var fatal *fatalError
		if errors.As(err, &fatal) || ctx.Err() != nil {
			return err
		}
		lastErr = err
	}
	return fmt.Errorf("downloading %s: giving up after %d attempts: %w", RedactURL(url), downloadAttempts, lastErr)
}

// fatalError is a response retrying cannot fix (404, 403, ...).
type fatalError struct{ error }

func downloadOnce(ctx context.Context, hc *http.Client, url, path string) (done bool, err error) {
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
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, &fatalError{redactURLError(err)}
	}
	if have > 0 {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(have, 10)+"-")
	}
	resp, err := hc.Do(req)
	if err != nil {
		// net/http names the request's URL (or a redirect's) in its error.
		return false, redactURLError(err)
	}
	defer resp.Body.Close()
	w := &sparseWriter{f: f}
	switch {
	case resp.StatusCode == http.StatusPartialContent && have > 0:
		w.off = have
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable && have > 0:
		return true, nil // what we hold is the whole file
	case resp.StatusCode == http.StatusOK:
		// The server ignored the range (or there was none): start over.
		if err := f.Truncate(0); err != nil {
			return false, &fatalError{err}
		}
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		return false, fmt.Errorf("GET %s: %s", RedactURL(url), resp.Status)
	default:
		return false, &fatalError{fmt.Errorf("GET %s: %s", RedactURL(url), resp.Status)}
	}
	body := &idleReader{r: resp.Body, timer: time.AfterFunc(idleTimeout, cancel)}
	defer body.timer.Stop()
	if _, err := io.CopyBuffer(w, body, make([]byte, 1<<20)); err != nil {
		_ = w.finish()
		return false, err
	}
	return true, w.finish()
}

// idleReader cancels the request when the body stops moving for idleTimeout.
type idleReader struct {
	r     io.Reader
	timer *time.Timer
}

func (r *idleReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.timer.Reset(idleTimeout)
	return n, err
}

func newHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = headerTimeout
	// Compressed transfer encoding would make Range offsets refer to the encoded stream.
	t.DisableCompression = true
	return &http.Client{Transport: t}
}
