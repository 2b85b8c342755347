package libvirt

import (
	"bytes"
	"testing"

	"banlieue.io/banlieue/pkg/libvirt/internal/wire"
	"banlieue.io/banlieue/pkg/libvirt/internal/xdr"
)

// The arguments are laid out by hand as remote_protocol.x declares them:
//
//	struct remote_storage_vol_create_xml_from_args { remote_nonnull_storage_pool pool;
//	    remote_nonnull_string xml; remote_nonnull_storage_vol clonevol; unsigned int flags; };
//	struct remote_storage_vol_create_xml_from_ret { remote_nonnull_storage_vol vol; };
//	struct remote_nonnull_storage_pool { remote_nonnull_string name; remote_uuid uuid; };
func TestStorageVolCreateXMLFromWire(t *testing.T) {
	got := make(chan []byte, 1)
	f := startFake(t, func(s *fakeSession) {
		h, payload, err := s.read()
		if err != nil {
			return
		}
		if procedure(h.Procedure) != 125 {
			s.replyError(h, 1, "unexpected procedure")
			return
		}
		got <- payload
		s.reply(h, wire.OK, func(e *xdr.Encoder) {
			e.String("p")
			e.String("copy")
			e.String("/k/copy")
		})
	})
	c := f.dial(t)
	pool := StoragePool{Name: "p", UUID: UUID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}}
	v, err := c.StorageVolCreateXMLFrom(testContext(t), pool, "<v/>", StorageVol{Pool: "p", Name: "od", Key: "/k"}, 0)
	if err != nil || v != (StorageVol{Pool: "p", Name: "copy", Key: "/k/copy"}) {
		t.Fatalf("volume %+v, %v", v, err)
	}
	want := []byte{
		0, 0, 0, 1, 'p', 0, 0, 0, // pool name
		1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, // pool uuid, 16 bytes fixed
		0, 0, 0, 4, '<', 'v', '/', '>', // xml
		0, 0, 0, 1, 'p', 0, 0, 0, // clonevol pool
		0, 0, 0, 2, 'o', 'd', 0, 0, // clonevol name
		0, 0, 0, 2, '/', 'k', 0, 0, // clonevol key
		0, 0, 0, 0, // flags
	}
	if args := <-got; !bytes.Equal(args, want) {
		t.Fatalf("arguments\n got %x\nwant %x", args, want)
	}
}
