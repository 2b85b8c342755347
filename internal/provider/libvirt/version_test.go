package libvirt

import (
	"testing"

	"banlieue.io/banlieue/pkg/libvirt"
)

func TestUndefineFlagsFor(t *testing.T) {
	base := libvirt.UndefineManagedSave | libvirt.UndefineNVRAM
	tests := []struct {
		name    string
		version uint64
		want    libvirt.DomainUndefineFlags
	}{
		{"Debian 11 (7.0.0)", 7_000_000, base},
		{"Ubuntu 22.04 (8.0.0)", 8_000_000, base},
		{"last release without the flag (8.8.0)", 8_008_000, base},
		{"first release with the flag (8.9.0)", 8_009_000, base | libvirt.UndefineTPM},
		{"Debian 12 (9.0.0)", 9_000_000, base | libvirt.UndefineTPM},
		{"Debian 13 (11.3.0)", 11_003_000, base | libvirt.UndefineTPM},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := undefineFlagsFor(tt.version); got != tt.want {
				t.Errorf("undefineFlagsFor(%d) = %#x, want %#x", tt.version, got, tt.want)
			}
		})
	}
}

func TestFormatLibVersion(t *testing.T) {
	for v, want := range map[uint64]string{7_000_000: "7.0.0", 9_000_000: "9.0.0", 11_003_000: "11.3.0", 8_009_012: "8.9.12"} {
		if got := formatLibVersion(v); got != want {
			t.Errorf("formatLibVersion(%d) = %q, want %q", v, got, want)
		}
	}
}
