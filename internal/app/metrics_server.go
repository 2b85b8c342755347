package app

import (
	"crypto/tls"
	"net"
	"strconv"

	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// metricsServer is how a role serves /metrics (docs/security.md, "Metrics"). Secure (the
// default): HTTPS, on every interface, with the certificate of --metrics-cert-dir (which a
// scraper verifies, reloaded when it is renewed) or else a self-signed one generated in memory at
// start (nothing is written, so it works on a read-only root filesystem), and every request
// is authenticated with a TokenReview and authorized with a SubjectAccessReview for
// `get /metrics` — a scraper needs a token bound to ClusterRole banlieue-metrics-reader.
// Not secure: plain HTTP with no checks, so it listens on loopback only, for a developer on
// the same machine (hack/lab.sh).
func metricsServer(opts Options) metricsserver.Options {
	if opts.MetricsPort == 0 {
		return metricsserver.Options{BindAddress: "0"}
	}
	port := strconv.Itoa(opts.MetricsPort)
	if !opts.MetricsSecure {
		return metricsserver.Options{BindAddress: net.JoinHostPort("127.0.0.1", port)}
	}
	return metricsserver.Options{
		BindAddress:    ":" + port,
		SecureServing:  true,
		FilterProvider: filters.WithAuthenticationAndAuthorization,
		// Empty: controller-runtime's temporary directory, where nothing is, so it generates one.
		CertDir:  opts.MetricsCertDir,
		CertName: "tls.crt",
		KeyName:  "tls.key",
		// HTTP/2 lets a client open and reset streams faster than the server can refuse them,
		// work done before authentication; a scraper needs nothing beyond HTTP/1.1.
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }},
	}
}
