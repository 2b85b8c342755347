package build

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// origin is a TLS server of one resource whose content and ETag a test may change, that
// honours Range only under a matching If-Range, as RFC 9110 asks. kill, when set, is called
// once the first response has sent half its body: the download is killed mid-transfer, as a
// restarted pod would be.
type origin struct {
	mu       sync.Mutex
	data     []byte
	etag     string
	kill     func()
	badRange bool // answer every Range with a 206 from byte 0
	requests []http.Header
	statuses []int
	srv      *httptest.Server
}

func newOrigin(t *testing.T, data []byte, etag string) *origin {
	o := &origin{data: data, etag: etag}
	o.srv = httptest.NewTLSServer(http.HandlerFunc(o.serve))
	t.Cleanup(o.srv.Close)
	trustTestServers(t, o.srv)
	return o
}

func (o *origin) serve(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	data, etag, kill := o.data, o.etag, o.kill
	o.kill = nil
	o.requests = append(o.requests, r.Header.Clone())
	status, from := http.StatusOK, 0
	if rng := r.Header.Get("Range"); rng != "" && r.Header.Get("If-Range") == etag {
		from, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(rng, "bytes="), "-"))
		status = http.StatusPartialContent
		if o.badRange {
			from = 0
		}
	}
	o.statuses = append(o.statuses, status)
	o.mu.Unlock()
	w.Header().Set("ETag", etag)
	w.Header().Set("Content-Length", strconv.Itoa(len(data)-from))
	if status == http.StatusPartialContent {
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", from, len(data)-1, len(data)))
	}
	w.WriteHeader(status)
	body := data[from:]
	if kill != nil {
		_, _ = w.Write(body[:len(body)/2])
		w.(http.Flusher).Flush()
		time.Sleep(100 * time.Millisecond) // let the client write what it got
		kill()
		<-r.Context().Done()
		return
	}
	_, _ = w.Write(body)
}

func (o *origin) set(data []byte, etag string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.data, o.etag = data, etag
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func testDownloader(l Limits) *downloader {
	return &downloader{hc: newHTTPClient(l), limits: l, window: rateWindow, log: io.Discard}
}

// killed downloads from o until o kills the transfer halfway, leaving a partial download.
func killed(t *testing.T, o *origin, url, path string) int64 {
	ctx, cancel := context.WithCancel(context.Background())
	o.mu.Lock()
	o.kill = cancel
	o.mu.Unlock()
	if err := testDownloader(testLimits()).download(ctx, url, "", path); !errors.Is(err, context.Canceled) {
		t.Fatalf("killed download: %v", err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Size() == 0 {
		t.Fatalf("no partial download: %v", err)
	}
	return fi.Size()
}

func TestResumeHonoursIfRange(t *testing.T) {
	data := randomBytes(1 << 20)
	o := newOrigin(t, data, `"v1"`)
	path := filepath.Join(t.TempDir(), "d.download")
	have := killed(t, o, o.srv.URL+"/d", path)
	if err := testDownloader(testLimits()).download(context.Background(), o.srv.URL+"/d", "", path); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	last := o.requests[len(o.requests)-1]
	if !bytes.Equal(got, data) || last.Get("Range") != fmt.Sprintf("bytes=%d-", have) || last.Get("If-Range") != `"v1"` ||
		o.statuses[len(o.statuses)-1] != http.StatusPartialContent {
		t.Errorf("resume: %d bytes, equal %v, last request %v, statuses %v", len(got), bytes.Equal(got, data), last, o.statuses)
	}
}

func TestResumeOfAChangedSourceStartsOver(t *testing.T) {
	v1, v2 := randomBytes(1<<20), randomBytes(1<<20)
	o := newOrigin(t, v1, `"v1"`)
	path := filepath.Join(t.TempDir(), "d.download")
	killed(t, o, o.srv.URL+"/d", path)
	o.set(v2, `"v2"`)
	if err := testDownloader(testLimits()).download(context.Background(), o.srv.URL+"/d", "", path); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	last := o.requests[len(o.requests)-1]
	// The resume asked for the v1 range; the server, whose resource changed, sent all of v2.
	if !bytes.Equal(got, v2) || last.Get("If-Range") != `"v1"` || o.statuses[len(o.statuses)-1] != http.StatusOK {
		t.Errorf("%d bytes, is v2 %v, last request %v, statuses %v", len(got), bytes.Equal(got, v2), last, o.statuses)
	}
}

func TestResumeOfAnotherSourceStartsOver(t *testing.T) {
	data := randomBytes(1 << 20)
	o := newOrigin(t, data, `"v1"`)
	path := filepath.Join(t.TempDir(), "d.download")
	killed(t, o, o.srv.URL+"/a", path)
	for _, src := range []struct{ url, sum string }{
		{o.srv.URL + "/b", ""},                                  // another URL
		{o.srv.URL + "/b", "sha256:" + strings.Repeat("0", 64)}, // the URL of the partial now, another checksum
	} {
		n := len(o.requests)
		d := testDownloader(testLimits())
		o.mu.Lock()
		o.kill = func() {} // cut again, so a partial is left for the next source
		o.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_ = d.download(ctx, src.url, src.sum, path)
		cancel()
		if h := o.requests[n]; h.Get("Range") != "" {
			t.Errorf("%+v: resumed the partial of another source: %v", src, h)
		}
	}
}

func TestResumeChecksContentRange(t *testing.T) {
	data := randomBytes(1 << 20)
	o := newOrigin(t, data, `"v1"`)
	path := filepath.Join(t.TempDir(), "d.download")
	killed(t, o, o.srv.URL+"/d", path)
	o.mu.Lock()
	o.badRange = true
	o.mu.Unlock()
	var log bytes.Buffer
	d := testDownloader(testLimits())
	d.log = &log
	if err := d.download(context.Background(), o.srv.URL+"/d", "", path); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if !bytes.Equal(got, data) || !strings.Contains(log.String(), "got a range from 0; starting over") {
		t.Errorf("%d bytes, equal %v; log:\n%s", len(got), bytes.Equal(got, data), log.String())
	}
}

func TestContentRange(t *testing.T) {
	for _, tt := range []struct {
		h                  string
		first, last, total int64
		wantErr            bool
	}{
		{"bytes 100-199/200", 100, 199, 200, false},
		{"bytes 0-0/*", 0, 0, -1, false},
		{"bytes */500", -1, -1, 500, false},
		{"bytes 100-199/150", 0, 0, 0, true}, // last beyond total
		{"bytes 200-100/300", 0, 0, 0, true},
		{"items 0-1/2", 0, 0, 0, true},
		{"bytes 0-1", 0, 0, 0, true},
		{"bytes -1-2/3", 0, 0, 0, true},
		{"", 0, 0, 0, true},
	} {
		first, last, total, err := contentRange(tt.h)
		if (err != nil) != tt.wantErr || !tt.wantErr && (first != tt.first || last != tt.last || total != tt.total) {
			t.Errorf("contentRange(%q) = %d, %d, %d, %v", tt.h, first, last, total, err)
		}
	}
}

func TestCheckResume(t *testing.T) {
	p := partial{ETag: `"v1"`, Size: 300}
	for _, tt := range []struct {
		cr, etag string
		wantErr  string
	}{
		{"bytes 100-299/300", `"v1"`, ""},
		{"bytes 100-299/*", "", ""},
		{"bytes 0-299/300", `"v1"`, "asked for bytes from 100, got a range from 0"},
		{"bytes 100-399/400", `"v1"`, "was 300 bytes and is now 400"},
		{"bytes 100-299/300", `"v2"`, `ETag was "v1" and is now "v2"`},
		{"", `"v1"`, "not bytes"},
	} {
		resp := &http.Response{Header: http.Header{}}
		resp.Header.Set("Content-Range", tt.cr)
		resp.Header.Set("ETag", tt.etag)
		err := checkResume(p, 100, resp)
		if (err == nil) != (tt.wantErr == "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("checkResume(%q, %q) = %v, want %q", tt.cr, tt.etag, err, tt.wantErr)
		}
	}
}

func TestIfRangePrefersAStrongETag(t *testing.T) {
	lm := "Tue, 01 Dec 2026 10:00:00 GMT"
	for _, tt := range []struct {
		p    partial
		want string
	}{
		{partial{ETag: `"a"`, LastModified: lm}, `"a"`},
		{partial{ETag: `W/"a"`, LastModified: lm}, lm}, // If-Range compares strongly: a weak tag never matches
		{partial{LastModified: lm}, lm},
		{partial{ETag: `W/"a"`}, ""},
	} {
		if got := tt.p.ifRange(); got != tt.want {
			t.Errorf("%+v.ifRange() = %q, want %q", tt.p, got, tt.want)
		}
	}
}

func TestDownloadSizeLimit(t *testing.T) {
	big := randomBytes(2 << 20)
	l := testLimits()
	l.MaxDownloadBytes = 1 << 20
	t.Run("Content-Length over the limit is refused unread", func(t *testing.T) {
		o := newOrigin(t, big, `"v1"`)
		path := filepath.Join(t.TempDir(), "d.download")
		err := testDownloader(l).download(context.Background(), o.srv.URL+"/d", "", path)
		fi, _ := os.Stat(path)
		if !isRefused(err) || !strings.Contains(err.Error(), "source refused by --max-download-size 1Mi: the server announces 2097152 bytes") ||
			fi.Size() != 0 || len(o.requests) != 1 {
			t.Errorf("err %v, %d bytes kept, %d requests", err, fi.Size(), len(o.requests))
		}
	})
	t.Run("a body without Content-Length stops at the limit", func(t *testing.T) {
		srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			for range 4 {
				_, _ = w.Write(big[:512<<10])
				w.(http.Flusher).Flush() // chunked: nothing announced
			}
		}))
		defer srv.Close()
		trustTestServers(t, srv)
		path := filepath.Join(t.TempDir(), "d.download")
		err := testDownloader(l).download(context.Background(), srv.URL+"/d", "", path)
		fi, _ := os.Stat(path)
		if !isRefused(err) || !strings.Contains(err.Error(), "the body runs past it") || fi.Size() > 1<<20 {
			t.Errorf("err %v, %d bytes kept", err, fi.Size())
		}
	})
}

func TestTricklingServerIsRefused(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000000")
		for {
			if _, err := w.Write([]byte{1}); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select { // a byte every 50 ms: never idle, 20 bytes/s
			case <-r.Context().Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}))
	defer srv.Close()
	trustTestServers(t, srv)
	l := testLimits()
	l.MinBytesPerSecond = 1 << 10
	d := testDownloader(l)
	d.window = time.Second
	start := time.Now()
	err := d.download(context.Background(), srv.URL+"/d", "", filepath.Join(t.TempDir(), "d.download"))
	elapsed := time.Since(start)
	if !isRefused(err) || !strings.Contains(err.Error(), "source refused by --min-transfer-rate 1Ki/s:") ||
		!strings.Contains(err.Error(), "bytes in the last 1s") || elapsed > 3*time.Second {
		t.Errorf("after %s: %v", elapsed, err)
	}
	t.Logf("refused after %s: %v", elapsed.Round(time.Millisecond), err)
}

func TestRedirectPolicy(t *testing.T) {
	var plainHits int
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { plainHits++ }))
	defer plain.Close()
	var srv *httptest.Server
	srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/downgrade":
			http.Redirect(w, r, plain.URL+"/disk.img", http.StatusFound)
		case "/metadata":
			http.Redirect(w, r, "https://169.254.169.254/latest/meta-data/", http.StatusFound)
		case "/loop":
			http.Redirect(w, r, srv.URL+"/loop", http.StatusFound)
		}
	}))
	defer srv.Close()
	trustTestServers(t, srv)
	for _, tt := range []struct {
		path, want string
	}{
		{"/downgrade", "source refused by the redirect policy: https://" + srv.Listener.Addr().String() +
			" redirected to http://" + plain.Listener.Addr().String() + ", a downgrade"},
		{"/metadata", "source refused by --allow-network: 169.254.169.254 is a link-local address"},
		{"/loop", "source refused by the redirect policy: more than 10 redirects"},
	} {
		err := testDownloader(testLimits()).download(context.Background(), srv.URL+tt.path, "", filepath.Join(t.TempDir(), "d"))
		if !isRefused(err) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.path, err, tt.want)
		}
	}
	if plainHits != 0 {
		t.Errorf("the plain http server was reached %d times", plainHits)
	}
}

func TestDestinationCheckedAtDial(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("x")) }))
	defer srv.Close()
	trustTestServers(t, srv)
	_, port, _ := strings.Cut(srv.Listener.Addr().String(), ":")
	// A name, resolved at dial time: what a rebinding DNS answer or a redirect would reach.
	url := "https://localhost:" + port + "/d"
	err := testDownloader(DefaultLimits()).download(context.Background(), url, "", filepath.Join(t.TempDir(), "d"))
	if !isRefused(err) || !strings.Contains(err.Error(), "source refused by --allow-network: localhost is 127.0.0.1, a loopback address") &&
		!strings.Contains(err.Error(), "localhost is ::1, a loopback address") {
		t.Errorf("not allow-listed: %v", err)
	}
	d := testDownloader(testLimits())
	tr := d.hc.Transport.(*http.Transport)
	tr.TLSClientConfig = tr.TLSClientConfig.Clone()
	tr.TLSClientConfig.ServerName = "example.com" // a name the test certificate holds
	if err := d.download(context.Background(), url, "", filepath.Join(t.TempDir(), "d")); err != nil {
		t.Errorf("allow-listed 127.0.0.0/8: %v", err)
	}
}

func TestCheckDestination(t *testing.T) {
	tenNet := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	for _, tt := range []struct {
		ip    string
		allow []netip.Prefix
		want  string // "" for allowed
	}{
		{"8.8.8.8", nil, ""},
		{"2606:4700:4700::1111", nil, ""},
		{"10.1.2.3", nil, "private"},
		{"172.16.0.1", nil, "private"},
		{"192.168.1.1", nil, "private"},
		{"fd00::1", nil, "private"},
		{"127.0.0.1", nil, "loopback"},
		{"::1", nil, "loopback"},
		{"169.254.169.254", nil, "link-local"},
		{"fe80::1", nil, "link-local"},
		{"0.0.0.0", nil, "unspecified"},
		{"::", nil, "unspecified"},
		{"100.64.0.10", nil, "non-global (100.64.0.0/10)"},
		{"0.1.2.3", nil, "non-global (0.0.0.0/8)"},
		{"255.255.255.255", nil, "non-global (240.0.0.0/4)"},
		{"224.0.0.1", nil, "multicast"},
		{"::ffff:169.254.169.254", nil, "link-local"},            // IPv4-mapped
		{"64:ff9b::a9fe:a9fe", nil, "non-global (64:ff9b::/96)"}, // NAT64 of 169.254.169.254
		{"2002:a9fe:a9fe::1", nil, "non-global (2002::/16)"},     // 6to4
		{"10.1.2.3", tenNet, ""},
		{"::ffff:10.1.2.3", tenNet, ""},
		{"192.168.1.1", tenNet, "private"},
	} {
		err := checkDestination("h", netip.MustParseAddr(tt.ip), tt.allow)
		if (err == nil) != (tt.want == "") || err != nil && !strings.Contains(err.Error(), "a "+tt.want+" address") {
			t.Errorf("checkDestination(%s, %v) = %v, want %q", tt.ip, tt.allow, err, tt.want)
		}
	}
}

// A certificate the build does not trust fails the download at once: every retry would meet
// the same certificate.
func TestUntrustedCertificateIsNotRetried(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1) }))
	defer srv.Close()
	d := testDownloader(testLimits())
	// Trust nothing: every httptest server presents the same certificate, which other tests of
	// the package make the default transport trust.
	tr := d.hc.Transport.(*http.Transport)
	tr.TLSClientConfig = &tls.Config{RootCAs: x509.NewCertPool(), MinVersion: tls.VersionTLS12}
	start := time.Now()
	err := d.download(context.Background(), srv.URL+"/d", "", filepath.Join(t.TempDir(), "d"))
	if err == nil || !untrusted(err) || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Fatalf("err = %v, want the unknown authority", err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second || hits.Load() != 0 {
		t.Errorf("took %s and reached the handler %d times; want one failed handshake", elapsed, hits.Load())
	}
}
