package qcow2

import "fmt"

// hostClusters records which clusters of the file the image references, two bits per cluster
// of the file (not of the virtual disk, which the file merely claims): an L2 table or a data
// cluster owns its cluster, and compressed clusters share theirs. A cluster claimed twice is
// what lets a few kilobytes of L1 and L2 entries expand into a whole disk of output.
type hostClusters struct {
	bits     uint32
	fileSize int64
	owned    []uint64 // header, L1 table, L2 tables, data clusters
	packed   []uint64 // clusters holding compressed data
}

func newHostClusters(fileSize int64, clusterBits uint32) *hostClusters {
	n := (fileSize>>clusterBits + 1 + 63) / 64
	return &hostClusters{bits: clusterBits, fileSize: fileSize, owned: make([]uint64, n), packed: make([]uint64, n)}
}

// claimMetadata marks the clusters of [off, off+length) as owned; Open checked they lie in
// the file.
func (h *hostClusters) claimMetadata(off, length int64) {
	for c := off >> h.bits; c <= (off+length-1)>>h.bits; c++ {
		set(h.owned, c)
	}
}

// claim marks the cluster at off, whose first need bytes must lie in the file, as owned, or
// says why it cannot be: "" when it is claimed.
func (h *hostClusters) claim(off, need int64) string {
	switch c := off >> h.bits; {
	case off&(1<<h.bits-1) != 0:
		return "is not cluster aligned"
	case off > h.fileSize-need:
		return fmt.Sprintf("lies beyond the %d-byte file", h.fileSize)
	case isSet(h.owned, c) || isSet(h.packed, c):
		return "is referenced twice"
	default:
		set(h.owned, c)
		return ""
	}
}

// claimPacked marks the cluster holding the compressed data at off, which lies in the file, as
// shared by compressed clusters, or says why it cannot be.
func (h *hostClusters) claimPacked(off int64) string {
	c := off >> h.bits
	if isSet(h.owned, c) {
		return "lies in a cluster the image uses for a table or a data cluster"
	}
	set(h.packed, c)
	return ""
}

func set(b []uint64, i int64)        { b[i/64] |= 1 << (i % 64) }
func isSet(b []uint64, i int64) bool { return b[i/64]&(1<<(i%64)) != 0 }
