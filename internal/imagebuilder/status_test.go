package imagebuilder

import (
	"testing"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

func TestParseFailure(t *testing.T) {
	for _, tt := range []struct {
		termination, reason, message string
	}{
		{`{"reason":"SourceRefused","message":"source refused by --max-disk-size 256Gi: qcow2 virtual size 300Gi"}`,
			banlieuev1.ReasonSourceRefused, "source refused by --max-disk-size 256Gi: qcow2 virtual size 300Gi"},
		{`{"reason":"BuildFailed","message":"GET https://a/b: 404 Not Found"}`, banlieuev1.ReasonBuildFailed, "GET https://a/b: 404 Not Found"},
		// The log tail of a build that crashed before writing its failure.
		{"panic: runtime error", banlieuev1.ReasonBuildFailed, "panic: runtime error"},
		// A log line that happens to be JSON cannot choose a reason the build does not report.
		{`{"reason":"Reconciled","message":"x"}`, banlieuev1.ReasonBuildFailed, `{"reason":"Reconciled","message":"x"}`},
		{"", banlieuev1.ReasonBuildFailed, ""},
	} {
		if reason, message := parseFailure(tt.termination); reason != tt.reason || message != tt.message {
			t.Errorf("parseFailure(%q) = %q, %q; want %q, %q", tt.termination, reason, message, tt.reason, tt.message)
		}
	}
}
