package libvirt

import (
	"fmt"
	"testing"

	"libvirt.org/go/libvirtxml"

	"banlieue.io/banlieue/pkg/libvirt/internal/wire"
	"banlieue.io/banlieue/pkg/libvirt/internal/xdr"
)

// TestStorageVolXMLDescWire checks the call against remote_protocol.x: procedure 99, arguments
// {remote_nonnull_storage_vol vol; unsigned int flags}, reply {remote_nonnull_string xml}.
func TestStorageVolXMLDescWire(t *testing.T) {
	want := StorageVol{Pool: "default", Name: "vm-os.qcow2", Key: "/pools/default/vm-os.qcow2"}
	const reply = "<volume><name>vm-os.qcow2</name></volume>"
	got := make(chan string, 1)
	f := startFake(t, func(s *fakeSession) {
		h, payload, err := s.read()
		if err != nil {
			got <- "read: " + err.Error()
			return
		}
		d := xdr.NewDecoder(payload)
		v, flags := decodeVol(d), d.Uint32()
		if err := d.Finish(); err != nil || v != want || flags != 7 || procedure(h.Procedure) != procStorageVolGetXMLDesc {
			got <- fmt.Sprintf("procedure %v, vol %+v, flags %d, decode %v", procedure(h.Procedure), v, flags, err)
			s.replyError(h, 1, "unexpected call")
			return
		}
		got <- ""
		s.reply(h, wire.OK, func(e *xdr.Encoder) { e.String(reply) })
	})
	c := f.dial(t)
	xml, err := c.StorageVolXMLDesc(testContext(t), want, 7)
	if msg := <-got; msg != "" {
		t.Fatalf("the fake saw %s", msg)
	}
	if err != nil || xml != reply {
		t.Fatalf("StorageVolXMLDesc = %q, %v; want %q", xml, err, reply)
	}
	if s := procStorageVolGetXMLDesc.String(); s != "STORAGE_VOL_GET_XML_DESC" {
		t.Errorf("procedure name %q", s)
	}
}

// TestStorageVolXMLDescBackingStore reads a qcow2 overlay's XML from the lab libvirtd: its
// backingStore is the path of the raw volume it was created on, which is how the image
// controller tells a base that an overlay still needs.
func TestStorageVolXMLDescBackingStore(t *testing.T) {
	l := needLab(t)
	c := l.dial(t, "qemu:///system")
	ctx := testContext(t)
	pool := testPool(t, l, c)

	base := createVol(t, c, pool, "base.raw", 1<<20)
	overlay, err := c.StorageVolCreateXML(ctx, pool, fmt.Sprintf(`<volume type='file'><name>vm-os.qcow2</name>`+
		`<capacity unit='bytes'>%d</capacity><target><format type='qcow2'/></target>`+
		`<backingStore><path>%s</path><format type='raw'/></backingStore></volume>`, 4<<20, base.Key), 0)
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		vol         StorageVol
		format      string
		backingPath string // "" for none
	}{
		{overlay, "qcow2", base.Key},
		{base, "raw", ""},
	} {
		doc, err := c.StorageVolXMLDesc(ctx, tc.vol, 0)
		if err != nil {
			t.Fatalf("StorageVolXMLDesc(%s): %v", tc.vol.Name, err)
		}
		var v libvirtxml.StorageVolume
		if err := v.Unmarshal(doc); err != nil {
			t.Fatalf("parsing the XML of %s: %v\n%s", tc.vol.Name, err, doc)
		}
		if v.Name != tc.vol.Name || v.Target == nil || v.Target.Path != tc.vol.Key || v.Target.Format == nil || v.Target.Format.Type != tc.format {
			t.Errorf("%s: name %q target %+v; want format %s at %s\n%s", tc.vol.Name, v.Name, v.Target, tc.format, tc.vol.Key, doc)
		}
		switch {
		case tc.backingPath == "" && v.BackingStore != nil && v.BackingStore.Path != "":
			t.Errorf("%s: backingStore %+v, want none", tc.vol.Name, v.BackingStore)
		case tc.backingPath != "" && (v.BackingStore == nil || v.BackingStore.Path != tc.backingPath):
			t.Errorf("%s: backingStore %+v, want path %s\n%s", tc.vol.Name, v.BackingStore, tc.backingPath, doc)
		}
	}

	if err := c.StorageVolDelete(ctx, overlay); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StorageVolXMLDesc(ctx, overlay, 0); !IsNotFound(err) {
		t.Fatalf("StorageVolXMLDesc of a deleted volume: %v, want not found", err)
	}
}
