package build

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRedactURL(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"https://example.org/d.qcow2", "https://example.org/d.qcow2"},
		{"https://user:hunter2@example.org/d.qcow2", "https://REDACTED@example.org/d.qcow2"},
		{"https://token@example.org:8443/d.qcow2", "https://REDACTED@example.org:8443/d.qcow2"},
		{"https://bucket.s3.example/d.qcow2?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA%2F20260101&X-Amz-Signature=abc123",
			"https://bucket.s3.example/d.qcow2?X-Amz-Algorithm=REDACTED&X-Amz-Credential=REDACTED&X-Amz-Signature=REDACTED"},
		{"https://blob.example/c/d.raw?sv=2024&sig=s3cr3t%3D", "https://blob.example/c/d.raw?sv=REDACTED&sig=REDACTED"},
		{"https://example.org/d.raw?token=t0k", "https://example.org/d.raw?token=REDACTED"},
		{"https://example.org/d.raw?s3cr3t", "https://example.org/d.raw?REDACTED"},
		{"https://example.org/d.raw?a=1&&b", "https://example.org/d.raw?a=REDACTED&&REDACTED"},
		{"https://example.org/d.raw#access_token=t0k", "https://example.org/d.raw#REDACTED"},
		{"https://u:p@example.org/d.raw?sig=x#f", "https://REDACTED@example.org/d.raw?sig=REDACTED#REDACTED"},
		// A URL net/url refuses: where its credential is cannot be told, so only the scheme stays.
		{"https://user:p%zz@example.org/d.raw", "https://REDACTED (unparsable URL)"},
		{"http://u:p@[::1/d.raw", "http://REDACTED (unparsable URL)"},
		// OCI references have no place for a credential.
		{"quay.io/containerdisks/debian:12", "quay.io/containerdisks/debian:12"},
		{"", ""},
	} {
		if got := RedactURL(tt.in); got != tt.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestRedactSourceKeepsTheChain(t *testing.T) {
	from := "https://u:pw@example.org/d.raw?sig=x"
	refused := &RefusedError{Rule: "--max-download-size 1Gi", Seen: "2Gi"}
	err := redactSource(fmt.Errorf("fetching %s: %w", from, refused), from)
	if strings.Contains(err.Error(), "pw") || strings.Contains(err.Error(), "sig=x") {
		t.Errorf("error still holds the credential: %v", err)
	}
	if want := "fetching https://REDACTED@example.org/d.raw?sig=REDACTED: source refused by --max-download-size 1Gi: 2Gi"; err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
	if !errors.As(err, new(*RefusedError)) {
		t.Error("the RefusedError beneath is lost")
	}
}

// TestBuildNeverPrintsTheCredential runs builds against real servers that fail in the ways that
// put the URL into a message: an error status, a dropped connection net/http reports with the
// URL, a redirect to a presigned URL that then hangs up, and a connection refused. Neither the error
// nor the log may hold the password or the signature.
func TestBuildNeverPrintsTheCredential(t *testing.T) {
	const secret = "hunter2"
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/missing.raw":
			http.NotFound(w, r)
		case "/redirect.raw":
			http.Redirect(w, r, "/hangup.raw?X-Amz-Signature="+secret+"&X-Amz-Credential="+secret, http.StatusFound)
		case "/hangup.raw":
			conn, _, _ := w.(http.Hijacker).Hijack()
			_ = conn.Close()
		}
	}))
	t.Cleanup(srv.Close)
	prev := http.DefaultTransport.(*http.Transport).TLSClientConfig
	http.DefaultTransport.(*http.Transport).TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig
	t.Cleanup(func() { http.DefaultTransport.(*http.Transport).TLSClientConfig = prev })
	withUser := strings.Replace(srv.URL, "https://", "https://robot:"+secret+"@", 1)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "https://robot:" + secret + "@" + closed.Addr().String() + "/d.raw?token=" + secret
	_ = closed.Close()
	for _, tc := range []struct{ name, from, want string }{
		{"404", withUser + "/missing.raw?sig=" + secret, "404 Not Found"},
		// The rest are retried: the first attempt's error is in the log (net/http names the
		// redirect's target), then the deadline stops the wait for the next one.
		{"redirect to a presigned URL", srv.URL + "/redirect.raw", "X-Amz-Signature=REDACTED"},
		{"hang-up", withUser + "/hangup.raw?token=" + secret, "EOF"},
		{"connection refused", refused, "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			var log bytes.Buffer
			_, err := Build(ctx, Options{VMImage: "x", From: tc.from,
				Output: filepath.Join(t.TempDir(), "x.raw"), Limits: testLimits()}, &log)
			if err == nil {
				t.Fatal("the build succeeded")
			}
			printed := err.Error() + "\n" + FailureOf(err).Message + "\n" + log.String()
			if !strings.Contains(printed, tc.want) || !strings.Contains(printed, "REDACTED") {
				t.Errorf("want %q and the redacted URL in:\n%s", tc.want, printed)
			}
			if strings.Contains(printed, secret) {
				t.Errorf("the credential is printed:\n%s", printed)
			}
		})
	}
}
