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

func TestUnique(t *testing.T) {
	long := strings.Repeat("l", 70)
	tests := []struct {
		name, readable string
		identity       []string
		want           string
	}{
		// The digests are the first 16 hex digits of `printf '7:libvirt6:team-a4:edge' |
		// sha256sum`, computed outside Go, so they pin the encoding and the algorithm.
		{"short readable kept whole", "banlieue-provider-libvirt-edge", []string{"libvirt", "team-a", "edge"},
			"banlieue-provider-libvirt-edge-7b4205e1b8aee272"},
		{"the guide's lab-gold", "banlieue-provider-libvirt-lab-gold", []string{"libvirt", "banlieue-system", "lab-gold"},
			"banlieue-provider-libvirt-lab-gold-46a39fbafde50489"},
		{"long readable cut to 46", "banlieue-provider-libvirt-" + long, []string{"libvirt", "team-a", long},
			"banlieue-provider-libvirt-" + strings.Repeat("l", 20) + "-"},
		{"trailing dash and dot trimmed at the cut", strings.Repeat("d", 44) + ".-xyz", []string{"x"},
			strings.Repeat("d", 44) + "-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Unique(tt.readable, tt.identity...)
			if !strings.HasPrefix(got, tt.want) {
				t.Errorf("Unique(%q, %q) = %q, want prefix %q", tt.readable, tt.identity, got, tt.want)
			}
			if len(got) > MaxLength {
				t.Errorf("Unique(%q) is %d characters", tt.readable, len(got))
			}
			digest := got[strings.LastIndex(got, "-")+1:]
			if len(digest) != 16 || strings.Trim(digest, "0123456789abcdef") != "" {
				t.Errorf("Unique(%q) = %q does not end in 16 hex digits", tt.readable, got)
			}
		})
	}
}

// TestUniqueSeparatesAmbiguousJoins: tuples whose parts join to the same string, or whose
// readable parts are equal, still get different names.
func TestUniqueSeparatesAmbiguousJoins(t *testing.T) {
	pairs := [][2][]string{
		{{"libvirt", "team-a", "edge"}, {"libvirt", "team", "a-edge"}},
		{{"libvirt", "team-a", "edge"}, {"libvirt", "team-b", "edge"}},
		{{"libvirt-gpu", "ns", "host"}, {"libvirt", "ns", "gpu-host"}},
		{{"a", "bc"}, {"ab", "c"}},
		{{"1:a", ""}, {"1:a0:"}},
	}
	for _, p := range pairs {
		a, b := Unique("same-readable", p[0]...), Unique("same-readable", p[1]...)
		if a == b {
			t.Errorf("%q and %q share the name %q", p[0], p[1], a)
		}
	}
}
