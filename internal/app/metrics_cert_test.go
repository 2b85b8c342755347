package app_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/testenv"
)

// TestMetricsServesItsCertificate: with --metrics-cert-dir, /metrics presents that certificate
// over real TLS: a client that trusts its CA and asks for its name connects; one asking for
// another name, or trusting another CA, is refused. Without the files the role refuses to start
// rather than fall back to a self-signed certificate nothing can verify.
func TestMetricsServesItsCertificate(t *testing.T) {
	const name = "banlieue-metrics.banlieue-system.svc"
	caPEM, ca, caKey := testenv.NewCA(t, "metrics-ca")
	otherPEM, _, _ := testenv.NewCA(t, "other-ca")
	certPEM, keyPEM, err := testenv.SignCert(ca, caKey, name, []string{name}, x509.ExtKeyUsageServerAuth)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for f, data := range map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM} {
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	opts := app.Options{MetricsPort: testenv.FreePort(t), MetricsSecure: true, MetricsCertDir: dir}
	if err := validateMetrics(opts); err != nil {
		t.Fatalf("Validate with the certificate present: %v", err)
	}
	srv, err := metricsserver.NewServer(app.MetricsServerOptions(opts), &rest.Config{Host: "https://127.0.0.1:1"}, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the metrics server ended with %v", err)
		}
	})

	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(opts.MetricsPort))
	dial := func(roots []byte, serverName string) error {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(roots)
		d := tls.Dialer{Config: &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12}}
		dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer dcancel()
		conn, err := d.DialContext(dctx, "tcp", addr)
		if err == nil {
			conn.Close()
		}
		return err
	}
	// The server starts in the background: wait (generously) until it accepts connections.
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := dial(caPEM, name)
		if err == nil {
			break
		}
		var opErr *net.OpError
		if !errors.As(err, &opErr) || opErr.Op != "dial" || time.Now().After(deadline) {
			t.Fatalf("the right CA and name: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var unknown x509.UnknownAuthorityError
	if err := dial(otherPEM, name); !errors.As(err, &unknown) {
		t.Errorf("another CA: %v, want an unknown authority", err)
	}
	var hostErr x509.HostnameError
	if err := dial(caPEM, "banlieue-metrics.elsewhere.svc"); !errors.As(err, &hostErr) {
		t.Errorf("another name: %v, want a hostname mismatch", err)
	}

	for what, o := range map[string]app.Options{
		"no certificate in the directory": {MetricsPort: 8080, MetricsSecure: true, MetricsCertDir: t.TempDir()},
		"plain HTTP":                      {MetricsPort: 8080, MetricsSecure: false, MetricsCertDir: dir},
	} {
		if err := validateMetrics(o); err == nil {
			t.Errorf("%s: Validate accepted --metrics-cert-dir", what)
		}
	}
}

// validateMetrics is Options.Validate with the other flags at valid values.
func validateMetrics(o app.Options) error {
	o.LogFormat, o.Workers, o.KubeAPIQPS, o.KubeAPIBurst, o.NoLeaderElect = "text", 1, 1, 1, true
	return o.Validate()
}
