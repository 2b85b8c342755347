package operator

import (
	"strings"
	"testing"
)

// A pruned workload's event note names the instance and counts the kinds, within an event
// note's 1024 characters however long the names.
func TestPrunedNote(t *testing.T) {
	long := "banlieue-provider-libvirt-libvirt-edge-host-7-6f5aeeba6513f8e3"
	var objects []string
	for _, k := range []string{"ClusterRoleBinding", "Deployment", "Service", "ServiceAccount", "ServiceAccount", "Role", "Role", "Role",
		"RoleBinding", "RoleBinding", "RoleBinding"} {
		objects = append(objects, k+" banlieue-system/"+long+"-"+strings.Repeat("x", 100))
	}
	for _, tt := range []struct {
		objects []string
		want    string
	}{
		{objects, "pruned workload " + long + ": 11 objects (ClusterRoleBinding, Deployment, Role ×3, RoleBinding ×3, Service, ServiceAccount ×2)"},
		{objects[1:2], "pruned workload " + long + ": 1 object (Deployment)"},
	} {
		got := prunedNote(long, tt.objects)
		if got != tt.want {
			t.Errorf("prunedNote:\n got %q\nwant %q", got, tt.want)
		}
		if len(got) > 1024 {
			t.Errorf("note of %d characters", len(got))
		}
	}
}
