package libvirt

import (
	"context"

	"banlieue.io/banlieue/pkg/libvirt/internal/xdr"
)

// StorageVolCreateXMLFrom creates a volume in p described by xml whose content is a copy of
// src, made by the host (for a file pool libvirt runs qemu-img convert, which reads src through
// its backing chain: a qcow2 overlay becomes a standalone image unless xml names a backing
// store). src must not be written meanwhile (a running domain's disk is refused by QEMU's image
// locks). The copy takes as long as the data: pass a ctx from WithCallTimeout sized for it.
func (c *Client) StorageVolCreateXMLFrom(ctx context.Context, p StoragePool, xml string, src StorageVol, flags uint32) (StorageVol, error) {
	return c.volCall(ctx, procStorageVolCreateXMLFrom, func(e *xdr.Encoder) {
		encodePool(e, p)
		e.String(xml)
		encodeVol(e, src)
		e.Uint32(flags)
	})
}
