package controller

import (
	"strings"
	"testing"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

func TestImageClassMismatch(t *testing.T) {
	withMode := func(m banlieuev1.InstallMode) *banlieuev1.VMImage {
		img := testImage()
		img.Spec.Template = &banlieuev1.VMImageTemplate{InstallMode: m}
		return img
	}
	noTemplate := testImage()
	noTemplate.Spec.Template = nil
	tpm := testClass(func(c *banlieuev1.VMClass) { c.Spec.TPMEnabled = true })
	tests := []struct {
		name     string
		class    *banlieuev1.VMClass
		image    *banlieuev1.VMImage
		mismatch bool
	}{
		{"tpm + immediate", tpm, withMode(banlieuev1.InstallImmediate), true},
		{"tpm + no template", tpm, noTemplate, true},
		{"tpm + empty mode", tpm, withMode(""), true},
		{"tpm + deferred", tpm, withMode(banlieuev1.InstallDeferred), false},
		{"tpm + manual", tpm, withMode(banlieuev1.InstallManual), false},
		{"tpm + Immediate (the guide's casing)", tpm, withMode("Immediate"), true},
		{"tpm + Deferred (the guide's casing)", tpm, withMode("Deferred"), false},
		{"tpm + Manual (the guide's casing)", tpm, withMode("Manual"), false},
		{"no tpm + immediate", testClass(), withMode(banlieuev1.InstallImmediate), false},
		{"no tpm + no template", testClass(), noTemplate, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := imageClassMismatch(tt.class, tt.image)
			if (msg != "") != tt.mismatch {
				t.Fatalf("message = %q, want mismatch %v", msg, tt.mismatch)
			}
			if tt.mismatch {
				for _, want := range []string{"VMClass small", "VMImage ubuntu-2404", "ADR-0040", "ADR-0048"} {
					if !strings.Contains(msg, want) {
						t.Errorf("message %q lacks %q", msg, want)
					}
				}
			}
		})
	}
}
