package app

import (
	"strings"
	"testing"
)

// BANLIEUE_METRICS_SECURE defaults to true: only a value that parses as false turns it off.
func TestEnvBoolOr(t *testing.T) {
	for _, tt := range []struct {
		value string
		want  bool
	}{{"", true}, {"false", false}, {"0", false}, {"true", true}, {"flase", true}} {
		t.Setenv("BANLIEUE_TEST_BOOL", tt.value)
		if got := envBoolOr("BANLIEUE_TEST_BOOL", true); got != tt.want {
			t.Errorf("envBoolOr(%q, true) = %v, want %v", tt.value, got, tt.want)
		}
	}
}

// --workers out of 1..MaxWorkers is refused, naming the flag.
func TestValidateWorkers(t *testing.T) {
	for _, tt := range []struct {
		workers int
		ok      bool
	}{{0, false}, {1, true}, {MaxWorkers, true}, {MaxWorkers + 1, false}, {-3, false}} {
		o := Options{LogFormat: "text", NoLeaderElect: true, Workers: tt.workers, KubeAPIQPS: DefaultKubeAPIQPS, KubeAPIBurst: DefaultKubeAPIBurst}
		err := o.Validate()
		if (err == nil) != tt.ok {
			t.Errorf("Validate with Workers %d = %v, want ok %v", tt.workers, err, tt.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "invalid --workers") {
			t.Errorf("Validate with Workers %d = %v, want it to name --workers", tt.workers, err)
		}
	}
}

// Request limits that are not positive are refused, naming both flags; the defaults pass.
func TestValidateKubeAPILimits(t *testing.T) {
	for _, tt := range []struct {
		qps   float64
		burst int
		ok    bool
	}{{DefaultKubeAPIQPS, DefaultKubeAPIBurst, true}, {0.5, 1, true}, {0, 10, false}, {-1, 10, false}, {5, 0, false}} {
		o := Options{LogFormat: "text", NoLeaderElect: true, Workers: 1, KubeAPIQPS: tt.qps, KubeAPIBurst: tt.burst}
		err := o.Validate()
		if (err == nil) != tt.ok {
			t.Errorf("Validate with qps %v burst %d = %v, want ok %v", tt.qps, tt.burst, err, tt.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "invalid --kube-api-qps/--kube-api-burst") {
			t.Errorf("Validate with qps %v burst %d = %v, want it to name the flags", tt.qps, tt.burst, err)
		}
	}
}
