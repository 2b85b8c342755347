package app

import (
	"crypto/tls"
	"slices"
	"testing"
)

func TestMetricsServer(t *testing.T) {
	tests := []struct {
		name        string
		opts        Options
		wantAddress string
		wantSecure  bool
	}{
		{"secure by default, every interface", Options{MetricsPort: 8080, MetricsSecure: true}, ":8080", true},
		{"plain HTTP only on loopback", Options{MetricsPort: 18080, MetricsSecure: false}, "127.0.0.1:18080", false},
		{"port 0 disables it, secure or not", Options{MetricsPort: 0, MetricsSecure: true}, "0", false},
		{"port 0 disables it, plain", Options{MetricsPort: 0}, "0", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := metricsServer(tt.opts)
			if got.BindAddress != tt.wantAddress {
				t.Errorf("BindAddress %q, want %q", got.BindAddress, tt.wantAddress)
			}
			if got.SecureServing != tt.wantSecure || (got.FilterProvider != nil) != tt.wantSecure {
				t.Errorf("SecureServing %v, filter set %v; want both %v", got.SecureServing, got.FilterProvider != nil, tt.wantSecure)
			}
			var cfg tls.Config
			for _, o := range got.TLSOpts {
				o(&cfg)
			}
			if tt.wantSecure && !slices.Equal(cfg.NextProtos, []string{"http/1.1"}) {
				t.Errorf("TLS NextProtos %v, want only http/1.1", cfg.NextProtos)
			}
		})
	}
}
