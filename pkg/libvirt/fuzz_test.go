package libvirt

import (
	"testing"

	"banlieue.io/banlieue/pkg/libvirt/internal/xdr"
)

// FuzzDecodeReplies runs every reply decoder over arbitrary bytes: none may panic or return
// more elements than the input could encode.
func FuzzDecodeReplies(f *testing.F) {
	e := xdr.NewEncoder(nil)
	e.Uint32(1)
	encodeDomain(e, Domain{Name: "vm", ID: -1})
	e.Uint32(1)
	f.Add(e.Bytes())
	e = xdr.NewEncoder(nil)
	e.Uint32(1)
	encodeVol(e, StorageVol{Pool: "p", Name: "v", Key: "/k"})
	e.Uint32(1)
	f.Add(e.Bytes())
	e = xdr.NewEncoder(nil)
	e.Uint32(2)
	encodeTypedParam(e, ULLongParam("downtime", 12))
	encodeTypedParam(e, StringParam("errmsg", "x"))
	f.Add(e.Bytes())
	f.Add([]byte{0, 0, 0, 42, 0, 0, 0, 10, 0, 0, 0, 1, 0, 0, 0, 2, 'n', 'o', 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		check := func(n int, what string) {
			if n*4 > len(in) {
				t.Fatalf("%s: %d elements from %d bytes", what, n, len(in))
			}
		}
		check(len(decodeList(xdr.NewDecoder(in), maxListObjects, minDomainSize, decodeDomain)), "domains")
		check(len(decodeList(xdr.NewDecoder(in), maxListObjects, minPoolSize, decodePool)), "pools")
		check(len(decodeList(xdr.NewDecoder(in), maxListObjects, minVolSize, decodeVol)), "volumes")
		check(len(decodeList(xdr.NewDecoder(in), maxListObjects, minNetworkSize, decodeNetwork)), "networks")
		check(len(decodeList(xdr.NewDecoder(in), maxListObjects, minInterfaceSize, decodeInterface)), "interfaces")
		check(len(decodeList(xdr.NewDecoder(in), maxDomainIfaces, 3*4, decodeDomainInterface)), "domain interfaces")
		check(len(decodeList(xdr.NewDecoder(in), maxDHCPLeases, 9*4, decodeLease)), "leases")
		check(len(decodeList(xdr.NewDecoder(in), maxTypedParams, 3*4, decodeTypedParam)), "typed parameters")
		_ = decodeError(xdr.NewDecoder(in))
		_, _ = decodeHole(in)
	})
}
