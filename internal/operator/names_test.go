package operator

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestNames(t *testing.T) {
	// The digests are the first 16 hex digits of the sha256sum of the length-prefixed identity,
	// computed outside Go: `printf '7:libvirt15:banlieue-system19:libvirt-edge-host-7' | sha256sum`.
	const guide = "banlieue-provider-libvirt-libvirt-edge-host-7-6f5aeeba6513f8e3"
	tests := []struct {
		name, got, want string
	}{
		{"workload", workloadName("libvirt", "banlieue-system", "libvirt-edge-host-7"), guide},
		{"import", importName(guide), guide + "-import"},
		{"build", buildName(guide), guide + "-build"},
		{"cluster role", providerClusterRole("libvirt"), "banlieue-provider-libvirt"},
		{"long provider cut to 46 before the digest", workloadName("libvirt", "team-a", strings.Repeat("h", 70)),
			"banlieue-provider-libvirt-" + strings.Repeat("h", 20) + "-f61b8039069aba33"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}

// TestWorkloadNamesDoNotCollide: the collisions docs/security.md lists under "Workload names in
// shared scopes" (the build RoleBinding shared by team-a/edge and team-b/edge, the ClusterRoleBinding shared by team/a-edge and team-a/edge, and
// a class/provider split in one namespace) now give distinct names, each a valid name for every
// kind it names and a valid label value.
func TestWorkloadNamesDoNotCollide(t *testing.T) {
	type id struct{ class, ns, name string }
	long := strings.Repeat("x", 70)
	pairs := []struct {
		what string
		a, b id
	}{
		{"same name in two namespaces (build namespace)", id{"libvirt", "team-a", "edge"}, id{"libvirt", "team-b", "edge"}},
		{"namespace/name split (cluster scope)", id{"libvirt", "team", "a-edge"}, id{"libvirt", "team-a", "edge"}},
		{"class/name split (one namespace)", id{"libvirt-gpu", "ns", "host"}, id{"libvirt", "ns", "gpu-host"}},
		{"long names sharing 46 characters", id{"libvirt", "team-a", long + "-one"}, id{"libvirt", "team-a", long + "-two"}},
	}
	for _, tt := range pairs {
		t.Run(tt.what, func(t *testing.T) {
			a, b := workloadName(tt.a.class, tt.a.ns, tt.a.name), workloadName(tt.b.class, tt.b.ns, tt.b.name)
			if a == b {
				t.Fatalf("%v and %v share %q", tt.a, tt.b, a)
			}
			for _, n := range []string{a, b} {
				// ServiceAccount, Deployment, Lease and RBAC names are DNS-1123 subdomains; the
				// workload name is also the instance label's value.
				if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
					t.Errorf("%q: %v", n, errs)
				}
				if errs := validation.IsValidLabelValue(n); len(errs) > 0 {
					t.Errorf("%q as a label value: %v", n, errs)
				}
				for _, suffixed := range []string{importName(n), buildName(n)} {
					if errs := validation.IsDNS1123Subdomain(suffixed); len(errs) > 0 {
						t.Errorf("%q: %v", suffixed, errs)
					}
				}
			}
		})
	}
}
