package libvirt

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
)

func TestOrphaned(t *testing.T) {
	owner := Owner{UID: "uid-1", Namespace: "team", Name: "web"}
	machine := func(uid string) *infrav1.LibvirtMachine {
		return &infrav1.LibvirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web", UID: types.UID("uid-" + uid)}}
	}
	tests := []struct {
		name    string
		machine *infrav1.LibvirtMachine
		want    bool
		why     string
	}{
		{"the owner lives", machine("1"), false, ""},
		{"the owner is gone", nil, true, "LibvirtMachine team/web does not exist"},
		{"a new machine took the name", machine("2"), true, "LibvirtMachine team/web is another machine now (uid uid-2)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, why := orphaned(owner, tt.machine)
			if got != tt.want || why != tt.why {
				t.Errorf("orphaned = %v %q, want %v %q", got, why, tt.want, tt.why)
			}
		})
	}
}
