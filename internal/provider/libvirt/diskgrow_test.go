package libvirt

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	"banlieue.io/banlieue/pkg/libvirt"
)

func TestDisksToCheck(t *testing.T) {
	disks := []infrav1.LibvirtDisk{{Name: "os", SizeGiB: 20}, {Name: "data", SizeGiB: 50}, {Name: "new", SizeGiB: 5}}
	existing := func(names ...string) func(string) bool {
		return func(n string) bool { return slices.Contains(names, n) }
	}
	for _, tc := range []struct {
		name     string
		recorded []infrav1.DiskSize
		exists   func(string) bool
		want     []diskCheck
	}{
		{"all recorded at their size: no host call", []infrav1.DiskSize{{Name: "os", SizeGiB: 20}, {Name: "data", SizeGiB: 50}, {Name: "new", SizeGiB: 5}},
			existing("os", "data", "new"), nil},
		{"a raised size is checked", []infrav1.DiskSize{{Name: "os", SizeGiB: 20}, {Name: "data", SizeGiB: 40}, {Name: "new", SizeGiB: 5}},
			existing("os", "data", "new"), []diskCheck{{index: 1, name: "data", want: 50}}},
		{"a record above the spec (never shrunk) is left", []infrav1.DiskSize{{Name: "os", SizeGiB: 30}, {Name: "data", SizeGiB: 50}, {Name: "new", SizeGiB: 5}},
			existing("os", "data", "new"), nil},
		{"a machine from before the record: every existing disk is checked once", nil,
			existing("os", "data"), []diskCheck{{index: 0, name: "os", want: 20}, {index: 1, name: "data", want: 50}}},
		{"a disk created by this pass has its size already", []infrav1.DiskSize{{Name: "os", SizeGiB: 20}, {Name: "data", SizeGiB: 50}},
			existing("os", "data"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := disksToCheck(disks, tc.recorded, tc.exists); !slices.Equal(got, tc.want) {
				t.Errorf("disksToCheck = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestDiskSizesAfter(t *testing.T) {
	disks := []infrav1.LibvirtDisk{{Name: "os", SizeGiB: 20}, {Name: "data", SizeGiB: 50}}
	for _, tc := range []struct {
		name     string
		recorded []infrav1.DiskSize
		refused  map[string]bool
		want     []infrav1.DiskSize
	}{
		{"every disk at its spec size", nil, nil, []infrav1.DiskSize{{Name: "os", SizeGiB: 20}, {Name: "data", SizeGiB: 50}}},
		{"a refused disk keeps its recorded size", []infrav1.DiskSize{{Name: "os", SizeGiB: 20}, {Name: "data", SizeGiB: 40}},
			map[string]bool{"data": true}, []infrav1.DiskSize{{Name: "os", SizeGiB: 20}, {Name: "data", SizeGiB: 40}}},
		{"a refused disk never recorded stays unrecorded, so it is asked about again", nil,
			map[string]bool{"data": true}, []infrav1.DiskSize{{Name: "os", SizeGiB: 20}}},
		{"a disk gone from the spec leaves the record", []infrav1.DiskSize{{Name: "os", SizeGiB: 20}, {Name: "old", SizeGiB: 9}},
			nil, []infrav1.DiskSize{{Name: "os", SizeGiB: 20}, {Name: "data", SizeGiB: 50}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := diskSizesAfter(disks, tc.recorded, tc.refused); !slices.Equal(got, tc.want) {
				t.Errorf("diskSizesAfter = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// Only libvirtd's "the host cannot" answers make a refusal: a connection that broke, or any
// other error, fails the pass, which is retried.
func TestIsUnsupported(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&libvirt.Error{Code: libvirt.ErrNoSupport, Message: "storage pool does not support changing of volume capacity"}, true},
		{fmt.Errorf("wrapped: %w", &libvirt.Error{Code: libvirt.ErrOperationUnsupported}), true},
		{&libvirt.Error{Code: libvirt.ErrOperationFailed}, false},
		{errors.New("connection reset"), false},
		{nil, false},
	} {
		if got := libvirt.IsUnsupported(tc.err); got != tc.want {
			t.Errorf("IsUnsupported(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestRefusalStands(t *testing.T) {
	refused := func(gen int64) metav1.Condition {
		return metav1.Condition{Type: infrav1.ConditionDisksGrown, Status: metav1.ConditionFalse, Reason: infrav1.ReasonDiskGrowUnsupported,
			Message: "the host cannot grow spec.disks[0] (os)", ObservedGeneration: gen}
	}
	for _, tc := range []struct {
		name       string
		generation int64
		conditions []metav1.Condition
		want       bool
	}{
		{"no refusal", 3, nil, false},
		{"refused for this spec: not asked again", 3, []metav1.Condition{refused(3)}, true},
		{"refused for an earlier spec: asked again", 4, []metav1.Condition{refused(3)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &infrav1.LibvirtMachine{}
			m.Generation, m.Status.Conditions = tc.generation, tc.conditions
			msg, got := refusalStands(m)
			if got != tc.want || got && msg != "the host cannot grow spec.disks[0] (os)" {
				t.Errorf("refusalStands = %q, %v; want %v", msg, got, tc.want)
			}
		})
	}
}
