package naming

import (
	"strings"
	"testing"
)

func TestCapped(t *testing.T) {
	long := "banlieue-provider-libvirt-" + strings.Repeat("a", 40)
	dashAt54 := strings.Repeat("b", 53) + "--" + strings.Repeat("c", 20)
	tests := []struct {
		name, in, want string
	}{
		{"short name unchanged", "banlieue-provider-libvirt-edge", "banlieue-provider-libvirt-edge"},
		{"exactly 63 unchanged", strings.Repeat("x", 63), strings.Repeat("x", 63)},
		// The hash is FNV-1a-32 of the full input; the expected values pin the algorithm so a
		// rewrite cannot silently rename every existing workload.
		{"64 is capped", strings.Repeat("x", 64), strings.Repeat("x", 54) + "-" + fnvHex(strings.Repeat("x", 64))},
		{"long name capped", long, long[:54] + "-" + fnvHex(long)},
		{"trailing dashes trimmed before the hash", dashAt54, strings.Repeat("b", 53) + "-" + fnvHex(dashAt54)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Capped(tt.in)
			if got != tt.want {
				t.Errorf("Capped(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if len(got) > MaxLength {
				t.Errorf("Capped(%q) is %d characters", tt.in, len(got))
			}
		})
	}
}

// TestFNVReference checks the test's own FNV-1a-32 against a published vector, so the cases
// above do not merely compare the implementation with a copy of itself.
func TestFNVReference(t *testing.T) {
	// FNV-1a-32 test vector: "foobar" → bf9cf968 (from the FNV reference test suite).
	if got := fnvHex("foobar"); got != "bf9cf968" {
		t.Fatalf("fnvHex(foobar) = %s, want bf9cf968", got)
	}
}

func TestCappedDistinguishesSharedPrefixes(t *testing.T) {
	prefix := strings.Repeat("p", 60)
	a, b := Capped(prefix+"-one"), Capped(prefix+"-two")
	if a == b {
		t.Fatalf("two long names with a shared prefix collide: %q", a)
	}
}

// fnvHex is an independent FNV-1a-32 (offset basis 2166136261, prime 16777619).
func fnvHex(s string) string {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	const hex = "0123456789abcdef"
	out := make([]byte, 8)
	for i := 7; i >= 0; i-- {
		out[i] = hex[h&0xf]
		h >>= 4
	}
	return string(out)
}
