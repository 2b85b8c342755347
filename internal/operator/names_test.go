package operator

import (
	"strings"
	"testing"
)

func TestNames(t *testing.T) {
	longProvider := strings.Repeat("h", 50)
	tests := []struct {
		name, got, want string
	}{
		{"workload", workloadName("libvirt", "libvirt-edge-host-7"), "banlieue-provider-libvirt-libvirt-edge-host-7"},
		{"cluster scoped", clusterScopedName("libvirt", "banlieue-system", "libvirt-edge-host-7"),
			"banlieue-provider-libvirt-banlieue-system-libvirt-edge-host-7"},
		{"import", importName("banlieue-provider-libvirt-edge"), "banlieue-provider-libvirt-edge-import"},
		{"cluster role", providerClusterRole("libvirt"), "banlieue-provider-libvirt"},
		// 54 characters kept, then the FNV-1a-32 of all 76 (computed independently).
		{"long workload capped", workloadName("libvirt", longProvider),
			"banlieue-provider-libvirt-" + strings.Repeat("h", 28) + "-308d5688"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
			if len(tt.got) > 63 && tt.name != "import" {
				t.Errorf("%q is longer than 63", tt.got)
			}
		})
	}
}
