package pool

import (
	"net/netip"
	"sort"
	"time"
)

// Why the planner deletes a member; logged with the deletion (docs/guides/virtualmachine-pools.md).
const (
	reasonProvisioningTimeout = "ProvisioningTimeout"
	reasonStaleImage          = "StaleImage"
	reasonIdleExpired         = "IdleExpired"
	reasonScaleDown           = "ScaleDown"
)

// planInput is everything plan decides from.
type planInput struct {
	Members              []member
	Warm                 int
	MaxReplicas          int
	MaxSurge             int
	ProvisioningTimeout  time.Duration
	MaxIdle              time.Duration // zero: members never expire for idling
	RecycleOnImageChange bool
	Revision             string
	// Addresses are the addressing.pool ranges; nil when the pool hands out no addresses.
	Addresses []addressRange
}

// plan is what to do to the pool's members.
type plan struct {
	Deletes []deletion
	// Creates holds one entry per member to create: its address, or the zero Addr without
	// addressing.
	Creates []netip.Addr
	// BlockedOnCapacity and BlockedOnAddresses count members wanted but not created.
	BlockedOnCapacity  int
	BlockedOnAddresses int
}

type deletion struct {
	Name   string
	Reason string
}

// staleMember is a Ready member due for replacement and why.
type staleMember struct {
	member
	reason string
}

// planPool decides the deletions and creations that move the pool towards warm fresh members,
// within maxReplicas and maxSurge. It is pure and deterministic: the same input always gives the
// same plan, and a plan applied and planned again asks for nothing more.
//
// Claimed members are never deleted and never count as warm; they only take room under
// maxReplicas. Stale members (old image, idle too long) stand in as warm until fresh ones are
// Ready, so recycling never empties the pool.
func planPool(in planInput) plan {
	var p plan
	provisioning, claimed := 0, 0
	var fresh []member
	var stale []staleMember
	for _, m := range in.Members {
		switch m.Phase {
		case phaseClaimed:
			claimed++
		case phaseProvisioning:
			if m.Age > in.ProvisioningTimeout {
				p.Deletes = append(p.Deletes, deletion{m.Name, reasonProvisioningTimeout})
			} else {
				provisioning++
			}
		case phaseReady:
			switch {
			case in.RecycleOnImageChange && m.Revision != in.Revision:
				stale = append(stale, staleMember{m, reasonStaleImage})
			case in.MaxIdle > 0 && m.ReadyFor > in.MaxIdle:
				stale = append(stale, staleMember{m, reasonIdleExpired})
			default:
				fresh = append(fresh, m)
			}
		}
	}
	sort.Slice(fresh, func(i, j int) bool { return olderFirst(fresh[i], fresh[j]) })
	sort.Slice(stale, func(i, j int) bool { return olderFirst(stale[i].member, stale[j].member) })

	freshKept := min(len(fresh), in.Warm)
	for _, m := range fresh[:len(fresh)-freshKept] {
		p.Deletes = append(p.Deletes, deletion{m.Name, reasonScaleDown})
	}
	// The newest stale members stand in as warm: they have the most life left in them.
	staleKept := min(len(stale), in.Warm-freshKept)
	for _, m := range stale[:len(stale)-staleKept] {
		p.Deletes = append(p.Deletes, deletion{m.Name, m.reason})
	}
	kept := stale[len(stale)-staleKept:]

	toCreate := max(0, min(in.Warm-freshKept-provisioning, in.MaxSurge-provisioning))
	// room may be negative when maxReplicas was lowered under the claimed members; trading
	// then still frees room one for one before any creation fits.
	room := in.MaxReplicas - (claimed + provisioning + freshKept + len(kept))
	for toCreate > room && len(kept) > 0 {
		p.Deletes = append(p.Deletes, deletion{kept[0].Name, kept[0].reason})
		kept = kept[1:]
		room++
	}
	creates := max(0, min(toCreate, room))
	p.BlockedOnCapacity = toCreate - creates

	if in.Addresses == nil {
		p.Creates = make([]netip.Addr, creates)
		return p
	}
	// Every address still on a member is in use, including members being or about to be
	// deleted: their guests may hold the address until they are really gone.
	inUse := make(map[netip.Addr]bool, len(in.Members))
	for _, m := range in.Members {
		if m.Address.IsValid() {
			inUse[m.Address] = true
		}
	}
	p.Creates = drawAddresses(in.Addresses, inUse, creates)
	p.BlockedOnAddresses = creates - len(p.Creates)
	return p
}

// olderFirst orders members oldest first, then by name, so every tie is broken the same way.
func olderFirst(a, b member) bool {
	if a.Age != b.Age {
		return a.Age > b.Age
	}
	return a.Name < b.Name
}
