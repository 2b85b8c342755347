package libvirt

import (
	"crypto/sha256"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
)

// A machine's domain UUID is chosen by banlieue, not by libvirt, before anything is created on
// the host, and persisted as spec.providerID (libvirt://<provider>/<uuid>) in the same API write
// as the finalizer (ADR-0130). The seed's instance-id is that UUID, so the seed is built and
// uploaded before the domain exists and the domain is defined once, with no read-back.

// providerIDPrefix is the scheme of every providerID this provider writes.
const providerIDPrefix = "libvirt://"

// providerID is the Cluster API providerID of a domain of Provider provider.
func providerID(provider, domainUUID string) string {
	return providerIDPrefix + provider + "/" + domainUUID
}

// persistedUUID is the domain UUID spec.providerID records for Provider provider, or "" when it
// records none (not yet written, or written for another Provider or by hand in another form).
func persistedUUID(m *infrav1.LibvirtMachine, provider string) string {
	rest, ok := strings.CutPrefix(m.Spec.ProviderID, providerIDPrefix+provider+"/")
	if !ok {
		return ""
	}
	u, err := uuid.Parse(rest)
	if err != nil || u.String() != rest {
		return ""
	}
	return rest
}

// identityToWrite is the providerID the pass's first API write must record with the finalizer,
// or "" when the machine already records a UUID of this Provider's. A machine that records one
// keeps it: a pass that died after the write and before the define finds its domain missing and
// defines it under the same UUID, so the seed built then still matches. A machine without one
// gets fresh(): nothing on the host was created under a UUID before this write, because every
// creation on the host comes after it.
func identityToWrite(m *infrav1.LibvirtMachine, provider string, fresh func() string) string {
	if persistedUUID(m, provider) != "" {
		return ""
	}
	return providerID(provider, fresh())
}

// defineUUID is the UUID the domain is defined with: the existing domain's, when the machine
// proved one its own (libvirt refuses to redefine a name under another UUID, and a domain
// defined before banlieue chose UUIDs carries libvirt's), else the persisted one.
func defineUUID(persisted, existing string) string {
	if existing != "" {
		return existing
	}
	return persisted
}

// generatedMAC is the MAC of interface index of the domain domainUUID when the spec sets none:
// chosen before the first define, like the UUID, so the seed's network-config can name it, and
// derived from the UUID, so it needs no record of its own. 52:54:00 is the prefix libvirt and
// QEMU generate under; the three bytes below it are as random as libvirt's own.
func generatedMAC(domainUUID string, index int) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s/%d", domainUUID, index))
	return fmt.Sprintf("52:54:00:%02x:%02x:%02x", sum[0], sum[1], sum[2])
}

// generatedMACs are the MACs of every interface of a machine's new domain, by position; those
// the spec sets are rendered from the spec instead.
func generatedMACs(s *infrav1.LibvirtMachineSpec, domainUUID string) []string {
	macs := make([]string, len(s.Network))
	for i := range s.Network {
		macs[i] = generatedMAC(domainUUID, i)
	}
	return macs
}

// onlyProviderIDChanged is the update of the pass's own identity write: the generation moved
// because spec.providerID did, and nothing else of the spec changed. The pass that wrote it
// converges on, so reconciling again for it would only define the domain a second time.
func onlyProviderIDChanged(e event.UpdateEvent) bool {
	oldM, ok1 := e.ObjectOld.(*infrav1.LibvirtMachine)
	newM, ok2 := e.ObjectNew.(*infrav1.LibvirtMachine)
	if !ok1 || !ok2 || oldM.Spec.ProviderID == newM.Spec.ProviderID {
		return false
	}
	was := oldM.Spec.DeepCopy()
	was.ProviderID = newM.Spec.ProviderID
	return equality.Semantic.DeepEqual(*was, newM.Spec)
}

// specChanged passes a generation change other than the pass's own identity write.
var specChanged = predicate.And[client.Object](predicate.GenerationChangedPredicate{},
	predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool { return !onlyProviderIDChanged(e) }})
