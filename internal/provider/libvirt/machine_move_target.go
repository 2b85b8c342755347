package libvirt

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
)

// The target's half of a live move (docs/adr/0154-live-migration-peer-to-peer-over-tls.md,
// "Handover and providerRef"): the target Provider's provider prepares its own host from the
// machine alone (volumes recorded in status.migrationTarget before they are made, the seed
// rendered from the machine's user-data), never reading the source host. These are its pure
// decisions; machine_move_target_controller.go reads, writes and calls the host.

// Reasons of a Failed status.migrationTarget (docs/guides/libvirt-provider.md, "Live migration").
const (
	// reasonTargetPreparationFailed: the target's host could not be prepared (its pool, a
	// volume, the seed, or a machine the target cannot rebuild the volumes of).
	reasonTargetPreparationFailed = "TargetPreparationFailed"
)

// targetAction is what the target's provider does about a machine.
type targetAction int

const (
	// targetNothing: no move to this Provider, nothing recorded, or the record is final.
	targetNothing targetAction = iota
	// targetRecord: write the record (Preparing, the volumes to make) before anything is made.
	targetRecord
	// targetPrepare: make the recorded volumes still missing, then report Prepared.
	targetPrepare
	// targetRelease: the move will not happen (ended Failed or Aborted, the request removed or
	// replaced, the machine deleted): delete the recorded volumes, then the record.
	targetRelease
	// targetForget: the handover made the machine this Provider's: its recorded volumes are
	// the machine's now (status.volumes names them); the record goes.
	targetForget
	// targetObserve: the source reports the move Migrating: once the domain runs on this host
	// with no incoming job, say so (Received), for a source provider restarted mid-move.
	targetObserve
)

func (a targetAction) String() string {
	return [...]string{"nothing", "record", "prepare", "release", "forget", "observe"}[a]
}

// recordOf is the machine's status.migrationTarget when it is self's, else nil.
func recordOf(m *infrav1.LibvirtMachine, self types.NamespacedName) *infrav1.LibvirtMachineMigrationTargetStatus {
	r := m.Status.MigrationTarget
	if r == nil || (types.NamespacedName{Namespace: cmp.Or(r.Provider.Namespace, m.Namespace), Name: r.Provider.Name}) != self {
		return nil
	}
	return r
}

// decideTargetAction is the target's next action for m, self being this provider's Provider.
// Only a record of self's is acted on; the source's report (status.migration) of the same
// request tells a move that failed, so the target's volumes go, from one still to run.
func decideTargetAction(m *infrav1.LibvirtMachine, self types.NamespacedName) targetAction {
	rec := recordOf(m, self)
	req := m.Spec.Migration
	live := m.DeletionTimestamp.IsZero() && moveRoleOf(m, self) == moveRoleTarget
	switch {
	case rec == nil && live && !req.Abort && !moveEnded(m, req.MigrationName):
		return targetRecord
	case rec == nil:
		return targetNothing
	case m.Spec.ProviderRef != nil && m.ProviderKey() == self:
		return targetForget
	case !live || rec.MigrationName != req.MigrationName || moveEnded(m, req.MigrationName) && !moveSucceeded(m, req.MigrationName):
		return targetRelease
	case rec.Phase == infrav1.MachineMigrationTargetPreparing:
		return targetPrepare
	case rec.Phase == infrav1.MachineMigrationTargetPrepared && rec.MigrationName == req.MigrationName && moveMigrating(m, req.MigrationName):
		return targetObserve
	}
	return targetNothing
}

// moveMigrating reports whether the source reports the move of migration name Migrating.
func moveMigrating(m *infrav1.LibvirtMachine, name string) bool {
	r := m.Status.Migration
	return r != nil && r.MigrationName == name && r.Phase == infrav1.MachineMigrationMigrating
}

// moveEnded reports whether the source reported the move of migration name final.
func moveEnded(m *infrav1.LibvirtMachine, name string) bool {
	r := m.Status.Migration
	return r != nil && r.MigrationName == name && !underWay(r)
}

func moveSucceeded(m *infrav1.LibvirtMachine, name string) bool {
	r := m.Status.Migration
	return r != nil && r.MigrationName == name && r.Phase == infrav1.MachineMigrationSucceeded
}

// targetVolume is one volume the target makes for a move: an empty qcow2 of the disk's size
// (over the boot volume's base for the OS disk of a backingVolume machine), or the seed.
type targetVolume struct {
	name     string
	capacity uint64
	// base is the volume of the target pool the overlay is made over ("" for none).
	base string
	seed bool
}

// targetVolumes are the volumes the target makes for m's move, in the order they are made: the
// disks, then the seed. NON_SHARED_INC copies a disk's top image onto a file of its size over
// the same base, so a disk's size is the largest the provider knows it to have. A machine whose
// disks are layered by snapshots cannot be rebuilt from the machine alone and is refused.
func targetVolumes(m *infrav1.LibvirtMachine) ([]targetVolume, error) {
	s := &m.Spec
	if len(s.Snapshots) > 0 || len(m.Status.Snapshots) > 0 {
		return nil, fmt.Errorf("spec.snapshots: the machine's disks are layered by %d snapshots; only a machine without snapshots moves live",
			max(len(s.Snapshots), len(m.Status.Snapshots)))
	}
	vols := make([]targetVolume, 0, len(s.Disks)+1)
	for i, d := range s.Disks {
		size := d.SizeGiB
		if j := slices.IndexFunc(m.Status.DiskSizes, func(z infrav1.DiskSize) bool { return z.Name == d.Name }); j >= 0 {
			size = max(size, m.Status.DiskSizes[j].SizeGiB)
		}
		v := targetVolume{name: diskVolume(s.DomainName, d.Name), capacity: uint64(size) << 30}
		if i == 0 && s.BootSource.Kind == infrav1.BootBackingVolume {
			v.base = cmp.Or(m.Status.BootVolume, s.BootSource.Volume)
		}
		vols = append(vols, v)
	}
	return append(vols, targetVolume{name: seedVolume(s.DomainName), seed: true}), nil
}

// targetRecordFor is the record written before anything is made on the target's host.
func targetRecordFor(m *infrav1.LibvirtMachine, self types.NamespacedName, vols []targetVolume) *infrav1.LibvirtMachineMigrationTargetStatus {
	rec := &infrav1.LibvirtMachineMigrationTargetStatus{MigrationName: m.Spec.Migration.MigrationName,
		Provider: m.Spec.Migration.TargetProvider, Pool: cmp.Or(m.Spec.Migration.TargetPool, m.Spec.Pool),
		Phase: infrav1.MachineMigrationTargetPreparing}
	if rec.Provider.Namespace == "" && self.Namespace != m.Namespace {
		rec.Provider.Namespace = self.Namespace
	}
	for _, v := range vols {
		rec.Volumes = append(rec.Volumes, v.name)
	}
	return rec
}

// targetFailed is rec (or a fresh record) reporting Failed with err, whose volumes stay
// recorded until they are released.
func targetFailed(m *infrav1.LibvirtMachine, self types.NamespacedName, rec *infrav1.LibvirtMachineMigrationTargetStatus,
	reason string, err error) *infrav1.LibvirtMachineMigrationTargetStatus {
	if rec == nil {
		rec = targetRecordFor(m, self, nil)
	} else {
		rec = rec.DeepCopy()
	}
	rec.Phase, rec.Reason, rec.Message = infrav1.MachineMigrationTargetFailed, reason, clipMessage(err.Error())
	return rec
}

// seedMACs are the MACs the target's seed names for m's interfaces, by position: the spec's,
// else the one the provider generated from the domain's UUID before its first define
// (generatedMAC). The source checks its definition holds the same before the move
// (checkSeedMACs): the target never reads the source's host.
func seedMACs(m *infrav1.LibvirtMachine) []string {
	macs := generatedMACs(&m.Spec, m.Status.DomainUUID)
	for i, n := range m.Spec.Network {
		if n.MACAddress != "" {
			macs[i] = n.MACAddress
		}
	}
	return macs
}

// checkSeedMACs refuses a move whose domain has an interface with a static address under a MAC
// other than the one the target's seed names (a domain defined by an older provider, or edited
// by hand): the moved guest's network-config would name a NIC it does not have.
func checkSeedMACs(m *infrav1.LibvirtMachine, definition []string) error {
	want := seedMACs(m)
	for i, n := range m.Spec.Network {
		if n.IPAM.Static == nil {
			continue
		}
		got := ""
		if i < len(definition) {
			got = definition[i]
		}
		if !strings.EqualFold(got, want[i]) {
			return fmt.Errorf("spec.network[%d]: the domain's interface has MAC %q, not %q, which the target's seed names for the "+
				"static address (the domain was defined by hand or by an older provider): it cannot move live", i, got, want[i])
		}
	}
	return nil
}
