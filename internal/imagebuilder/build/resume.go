package build

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
)

// partial is what a partial download was fetched from, kept in `<download>.source` beside it:
// the bytes it holds may only be continued from the same source, and only while the server
// says the resource is still the one they came from.
type partial struct {
	// URL and Checksum are the source as the VMImage names it; another source, even at the
	// same URL, starts over.
	URL      string `json:"url"`
	Checksum string `json:"checksum,omitempty"`
	// ETag and LastModified are the validators of the response the bytes came from; If-Range
	// sends one of them back so the server answers 206 only if the resource is unchanged.
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"lastModified,omitempty"`
	// Size is the whole resource's length when the server announced it; -1 otherwise.
	Size int64 `json:"size"`
}

func partialPath(download string) string { return download + ".source" }

// loadPartial reads the sidecar of download; a missing or unreadable one is no partial.
func loadPartial(download string) (partial, bool) {
	data, err := os.ReadFile(partialPath(download))
	if err != nil {
		return partial{}, false
	}
	var p partial
	if json.Unmarshal(data, &p) != nil {
		return partial{}, false
	}
	return p, true
}

// savePartial replaces the sidecar of download atomically, before the body's bytes are
// written: a kill at any point leaves a sidecar that describes the bytes on disk.
func savePartial(download string, p partial) error {
	data, err := json.Marshal(p)
	if err != nil {
		return err
	}
	tmp := partialPath(download) + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("recording the download's source: %w", err)
	}
	if err := os.Rename(tmp, partialPath(download)); err != nil {
		return fmt.Errorf("recording the download's source: %w", err)
	}
	return nil
}

// removePartial deletes a download and its sidecar, for a download that must not be resumed.
func removePartial(download string) {
	for _, p := range []string{download, partialPath(download)} {
		_ = os.Remove(p) // best effort: a leftover sidecar names another source or no bytes
	}
}

// ifRange is the validator a resume sends: the ETag when it is strong (If-Range compares
// strongly, so a weak one never matches), else Last-Modified; "" when the response gave
// neither, and then a resume cannot tell a changed resource from the same one.
func (p partial) ifRange() string {
	if p.ETag != "" && !strings.HasPrefix(p.ETag, "W/") {
		return p.ETag
	}
	return p.LastModified
}

// partialOf is the sidecar for the full (200) response resp of source url.
func partialOf(url, sum string, resp *http.Response) partial {
	return partial{URL: url, Checksum: sum, ETag: resp.Header.Get("ETag"),
		LastModified: resp.Header.Get("Last-Modified"), Size: resp.ContentLength}
}

// contentRange parses a Content-Range header: `bytes first-last/total` or `bytes */total`
// (first is -1 then); total is -1 for `*`.
func contentRange(h string) (first, last, total int64, err error) {
	spec, ok := strings.CutPrefix(h, "bytes ")
	rng, tot, ok2 := strings.Cut(spec, "/")
	if !ok || !ok2 {
		return 0, 0, 0, fmt.Errorf("content-range %q: not bytes first-last/total", h)
	}
	total = -1
	if tot != "*" {
		if total, err = strconv.ParseInt(tot, 10, 64); err != nil || total < 0 {
			return 0, 0, 0, fmt.Errorf("content-range %q: bad total", h)
		}
	}
	if rng == "*" {
		return -1, -1, total, nil
	}
	a, b, ok := strings.Cut(rng, "-")
	if !ok {
		return 0, 0, 0, fmt.Errorf("content-range %q: not bytes first-last/total", h)
	}
	first, err1 := strconv.ParseInt(a, 10, 64)
	last, err2 := strconv.ParseInt(b, 10, 64)
	if err := errors.Join(err1, err2); err != nil || first < 0 || last < first || total >= 0 && last >= total {
		return 0, 0, 0, fmt.Errorf("content-range %q: bad range", h)
	}
	return first, last, total, nil
}

// checkResume says whether a 206 response continues the partial p that holds have bytes: its
// range must start at have and, where both are known, its total must be p's size and its
// ETag p's. Anything else would splice another resource's bytes onto ours.
func checkResume(p partial, have int64, resp *http.Response) error {
	first, _, total, err := contentRange(resp.Header.Get("Content-Range"))
	if err != nil {
		return err
	}
	if first != have {
		return fmt.Errorf("asked for bytes from %d, got a range from %d", have, first)
	}
	if total >= 0 && p.Size >= 0 && total != p.Size {
		return fmt.Errorf("the resource was %d bytes and is now %d", p.Size, total)
	}
	if etag := resp.Header.Get("ETag"); etag != "" && p.ETag != "" && etag != p.ETag {
		return fmt.Errorf("the resource's ETag was %s and is now %s", p.ETag, etag)
	}
	return nil
}

// complete says a 416 answer to a resume means the partial already holds the whole resource:
// the server says how long the resource is (`bytes */total`), or the partial knows it, and
// that is what the partial holds.
func complete(p partial, have int64, resp *http.Response) bool {
	total := p.Size
	if _, _, t, err := contentRange(resp.Header.Get("Content-Range")); err == nil && t >= 0 {
		total = t
	}
	return total == have
}
