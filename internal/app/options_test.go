package app

import "testing"

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
