package testenv

import (
	"crypto/rand"
	"encoding/hex"
)

// RunID is six random hex digits that name one run's objects (namespaces, pools, domains): the
// API server is the test's own, but the lab libvirtd is shared with suites running at the same
// time.
func RunID() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}
