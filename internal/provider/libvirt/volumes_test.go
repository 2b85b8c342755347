package libvirt

import (
	"strings"
	"testing"

	"libvirt.org/go/libvirtxml"
)

func TestBackingFormatComesFromTheName(t *testing.T) {
	for name, want := range map[string]string{
		"ubuntu.qcow2": "qcow2", "old.qcow": "qcow2", "ubuntu.raw": "raw", "installer.iso": "raw",
		"qcow2": "raw", "image.qcow2.raw": "raw", "noext": "raw",
	} {
		if got := backingFormat(name); got != want {
			t.Errorf("backingFormat(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestRenderVolume(t *testing.T) {
	xml, err := renderVolume(volumeSpec{name: "ns-web-01-os.qcow2", capacity: 20 << 30, format: formatQCOW2,
		backingPath: "/var/lib/libvirt/images/ubuntu.raw", backingFormat: formatRaw})
	if err != nil {
		t.Fatal(err)
	}
	var v libvirtxml.StorageVolume
	if err := v.Unmarshal(xml); err != nil {
		t.Fatal(err)
	}
	if v.Type != "file" || v.Name != "ns-web-01-os.qcow2" || v.Capacity.Value != 20<<30 || v.Capacity.Unit != "bytes" ||
		v.Allocation.Value != 0 || v.Target.Format.Type != "qcow2" {
		t.Errorf("volume: %+v", v)
	}
	if v.BackingStore.Path != "/var/lib/libvirt/images/ubuntu.raw" || v.BackingStore.Format.Type != "raw" {
		t.Errorf("backing store: %+v", v.BackingStore)
	}
}

func TestRenderVolumeRefusesBadInput(t *testing.T) {
	tests := []struct {
		v    volumeSpec
		want string
	}{
		{volumeSpec{name: "", format: "raw"}, "must be 1-200 characters"},
		{volumeSpec{name: strings.Repeat("a", 201), format: "raw"}, "must be 1-200 characters"},
		{volumeSpec{name: "..", format: "raw"}, "invalid volume name"},
		{volumeSpec{name: "a/b", format: "raw"}, "only letters, digits"},
		{volumeSpec{name: "a b", format: "raw"}, "only letters, digits"},
		{volumeSpec{name: "ok", format: "raw", backingPath: "/x'/><evil"}, "XML metacharacters"},
		{volumeSpec{name: "ok", format: "raw", backingPath: "/x\x00"}, "control character"},
	}
	for _, tt := range tests {
		if _, err := renderVolume(tt.v); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: got %v, want %q", tt.v, err, tt.want)
		}
	}
}
