package libvirt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"time"

	"libvirt.org/go/libvirtxml"

	"banlieue.io/banlieue/pkg/libvirt"
)

// Live migration, the provider's half (docs/adr/0154-live-migration-peer-to-peer-over-tls.md):
// the target prepared (base present, empty overlays over it, the seed copied), the domain
// moved by the source's libvirtd peer-to-peer with its overlays copied by NBD, then the
// source cleaned. A move that fails leaves the domain running on its source and the target
// holding nothing the move created.

// Steps of a move, named in a failure's message.
const (
	stepPrepareTarget = "PreparingTarget"
	stepMigrate       = "Migrating"
	stepCleanSource   = "CleaningSource"
)

// Reasons a move is refused before anything is copied (docs/guides/libvirt-provider.md,
// "Live migration").
const (
	// reasonBaseImageMissing: the target pool has no volume of the machine's base image name.
	reasonBaseImageMissing = "BaseImageMissing"
	// reasonDiskOutsidePool: a disk of the domain is not a volume of the machine's pool.
	reasonDiskOutsidePool = "DiskOutsidePool"
	// reasonNetworkUnmapped: an interface's network or bridge has no counterpart on the target.
	reasonNetworkUnmapped = "NetworkUnmapped"
	// reasonTargetVolumeExists: a volume of the machine's name is already in the target pool.
	reasonTargetVolumeExists = "TargetVolumeExists"
	// reasonMoveAborted: the move was aborted (cancel, timeout); the domain runs on its source.
	reasonMoveAborted = "Aborted"
	// reasonMoveFailed: libvirt failed the move; the domain runs on its source.
	reasonMoveFailed = "MigrationFailed"
)

// moveError is a move that did not complete: the step it stopped at, a reason, and the host's
// error. Until step stepCleanSource the domain runs on its source alone.
type moveError struct {
	Step   string
	Reason string
	Err    error
}

func (e *moveError) Error() string { return fmt.Sprintf("%s: %s: %v", e.Step, e.Reason, e.Err) }
func (e *moveError) Unwrap() error { return e.Err }

// moveEnd is one host of a move: its connection and the pool the machine's volumes are in.
type moveEnd struct {
	c        *libvirt.Client
	pool     libvirt.StoragePool
	poolPath string
}

// moveTarget is the destination of a move, as the source's libvirtd and QEMU reach it.
type moveTarget struct {
	moveEnd
	// uri is the destination libvirtd as the source's dials it (qemu+tls://host/system).
	uri string
	// address is where the destination's QEMU listens for the migration and NBD streams.
	address string
}

// movePlan is what moves: the domain, its disk volumes (each a qcow2 in the pool: an overlay
// over a base of the pool, or a plain disk), its seed volume ("" without one), the networks
// mapped from the source's names to the target's, and the ownership record the destination's
// definition carries.
type movePlan struct {
	Domain   string
	Disks    []string
	Seed     string
	Networks map[string]string
	Owner    Owner
	// MaxDowntime bounds the guest's pause (0: libvirt's default, 300 ms).
	MaxDowntime time.Duration
	// Bandwidth caps the streams in MiB/s (0: unlimited).
	Bandwidth uint64
}

// moveResult is a completed move, measured by the destination's completed job.
type moveResult struct {
	Domain   libvirt.Domain
	Downtime time.Duration
	Total    time.Duration
}

// moveFlags: live, driven by the source, the definition persisted on the destination, the
// overlays alone copied, QEMU's streams under TLS, aborted on a disk error. Never post-copy: a
// failed post-copy loses the guest. Not UNDEFINE_SOURCE: libvirt would leave the source's
// NVRAM behind; cleanSource undefines with the NVRAM and the TPM state instead.
const moveFlags = libvirt.MigrateLive | libvirt.MigratePeer2Peer | libvirt.MigratePersistDest | libvirt.MigrateNonSharedInc |
	libvirt.MigrateTLS | libvirt.MigrateAbortOnError

// migrationDestXML maps a domain definition read on the source to the target: every disk file
// in the source pool to the same volume name in the target pool, every interface's network or
// bridge through networks, and the ownership record to owner. A disk outside the pool or an
// unmapped network refuses the move.
func migrationDestXML(def string, srcPool, dstPool string, networks map[string]string, owner Owner) (string, error) {
	var dom libvirtxml.Domain
	if err := dom.Unmarshal(def); err != nil {
		return "", fmt.Errorf("reading the domain definition: %w", err)
	}
	if dom.Devices != nil {
		for i := range dom.Devices.Disks {
			d := &dom.Devices.Disks[i]
			if d.Source == nil || d.Source.File == nil || d.Source.File.File == "" {
				continue
			}
			file := d.Source.File.File
			if path.Dir(file) != path.Clean(srcPool) {
				return "", &moveError{Step: stepPrepareTarget, Reason: reasonDiskOutsidePool,
					Err: fmt.Errorf("disk %s is %s, outside pool path %s: only the machine's own volumes can be carried", targetDev(d), file, srcPool)}
			}
			d.Source.File.File = path.Join(dstPool, path.Base(file))
			// The backing chain is the target's own (same base name): never the source's paths.
			d.BackingStore = nil
		}
		for i := range dom.Devices.Interfaces {
			src := dom.Devices.Interfaces[i].Source
			if src == nil {
				continue
			}
			var name *string
			switch {
			case src.Network != nil:
				name = &src.Network.Network
			case src.Bridge != nil:
				name = &src.Bridge.Bridge
			default:
				continue
			}
			to, ok := networks[*name]
			if !ok {
				return "", &moveError{Step: stepPrepareTarget, Reason: reasonNetworkUnmapped,
					Err: fmt.Errorf("interface %d: %s has no counterpart on the target Provider (its network mappings)", i, *name)}
			}
			*name = to
		}
	}
	md, err := owner.metadata()
	if err != nil {
		return "", err
	}
	dom.Metadata = withOwner(dom.Metadata, md)
	return dom.Marshal()
}

// withOwner replaces banlieue's ownership record in a domain's metadata, keeping any other
// tool's element.
func withOwner(cur, owner *libvirtxml.DomainMetadata) *libvirtxml.DomainMetadata {
	if cur == nil || cur.XML == "" {
		return owner
	}
	if _, ok := DomainOwner(&libvirtxml.Domain{Metadata: cur}); !ok {
		return &libvirtxml.DomainMetadata{XML: cur.XML + owner.XML}
	}
	// The record is one element in our namespace; libvirt stores each namespace's element once.
	start := bytes.Index([]byte(cur.XML), []byte("<banlieue:owner"))
	if start < 0 {
		return owner
	}
	rest := cur.XML[start:]
	end := -1
	if i := bytes.Index([]byte(rest), []byte("/>")); i >= 0 {
		end = i + 2
	}
	if j := bytes.Index([]byte(rest), []byte("</banlieue:owner>")); j >= 0 && (end < 0 || j < end) {
		end = j + len("</banlieue:owner>")
	}
	if end < 0 {
		return owner
	}
	return &libvirtxml.DomainMetadata{XML: cur.XML[:start] + owner.XML + rest[end:]}
}

func targetDev(d *libvirtxml.DomainDisk) string {
	if d.Target == nil {
		return "?"
	}
	return d.Target.Dev
}

// diskTargets are the targets (vda, …) of the domain's disks whose file is one of volumes in
// pool: the disks NON_SHARED_INC copies.
func diskTargets(def, pool string, volumes []string) ([]string, error) {
	var dom libvirtxml.Domain
	if err := dom.Unmarshal(def); err != nil {
		return nil, fmt.Errorf("reading the domain definition: %w", err)
	}
	var out []string
	for i := range dom.Devices.Disks {
		d := &dom.Devices.Disks[i]
		if d.Device != "disk" || d.Source == nil || d.Source.File == nil {
			continue
		}
		if f := d.Source.File.File; path.Dir(f) == path.Clean(pool) && slices.Contains(volumes, path.Base(f)) {
			out = append(out, targetDev(d))
		}
	}
	if len(out) != len(volumes) {
		return nil, fmt.Errorf("the domain's definition names %d of the machine's %d disk volumes", len(out), len(volumes))
	}
	return out, nil
}

// prepareTarget makes on the target what NON_SHARED_INC copies onto: for each disk volume of
// the source an empty qcow2 of its capacity, over the same-named base when the source's is an
// overlay; and a copy of the seed. It returns the volumes it created, which the caller records
// and deletes should the move fail. A volume of one of those names already on the target, or
// a base missing there, refuses the move before anything is created.
func prepareTarget(ctx context.Context, src moveEnd, dst moveTarget, plan movePlan) (created []string, err error) {
	type disk struct {
		name, base string
		capacity   uint64
	}
	var disks []disk
	for _, name := range append(slices.Clone(plan.Disks), plan.Seed) {
		if name == "" {
			continue
		}
		if _, err := dst.c.StorageVolLookupByName(ctx, dst.pool, name); err == nil {
			return nil, &moveError{Step: stepPrepareTarget, Reason: reasonTargetVolumeExists,
				Err: fmt.Errorf("volume %s is already in the target pool %s: it is not this machine's to overwrite", name, dst.poolPath)}
		} else if !libvirt.IsNotFound(err) {
			return nil, &moveError{Step: stepPrepareTarget, Reason: reasonMoveFailed, Err: fmt.Errorf("looking up volume %s on the target: %w", name, err)}
		}
	}
	for _, name := range plan.Disks {
		v, err := src.c.StorageVolLookupByName(ctx, src.pool, name)
		if err != nil {
			return nil, &moveError{Step: stepPrepareTarget, Reason: reasonMoveFailed, Err: fmt.Errorf("volume %s on the source: %w", name, err)}
		}
		info, err := src.c.StorageVolGetInfo(ctx, v)
		if err != nil {
			return nil, &moveError{Step: stepPrepareTarget, Reason: reasonMoveFailed, Err: fmt.Errorf("volume %s on the source: %w", name, err)}
		}
		desc, err := src.c.StorageVolXMLDesc(ctx, v, 0)
		if err != nil {
			return nil, &moveError{Step: stepPrepareTarget, Reason: reasonMoveFailed, Err: fmt.Errorf("volume %s on the source: %w", name, err)}
		}
		var vol libvirtxml.StorageVolume
		if err := vol.Unmarshal(desc); err != nil {
			return nil, &moveError{Step: stepPrepareTarget, Reason: reasonMoveFailed, Err: fmt.Errorf("volume %s on the source: %w", name, err)}
		}
		d := disk{name: name, capacity: info.Capacity}
		if vol.BackingStore != nil && vol.BackingStore.Path != "" {
			if path.Dir(vol.BackingStore.Path) != path.Clean(src.poolPath) {
				return nil, &moveError{Step: stepPrepareTarget, Reason: reasonDiskOutsidePool,
					Err: fmt.Errorf("volume %s is backed by %s, outside pool path %s", name, vol.BackingStore.Path, src.poolPath)}
			}
			d.base = path.Base(vol.BackingStore.Path)
			if _, err := dst.c.StorageVolLookupByName(ctx, dst.pool, d.base); libvirt.IsNotFound(err) {
				return nil, &moveError{Step: stepPrepareTarget, Reason: reasonBaseImageMissing,
					Err: fmt.Errorf("the target pool %s has no base image %s for disk volume %s: import the machine's VMImage on the target Provider first", dst.poolPath, d.base, name)}
			} else if err != nil {
				return nil, &moveError{Step: stepPrepareTarget, Reason: reasonMoveFailed, Err: fmt.Errorf("looking up base %s on the target: %w", d.base, err)}
			}
		}
		disks = append(disks, d)
	}

	fail := func(err error) ([]string, error) {
		return created, &moveError{Step: stepPrepareTarget, Reason: reasonMoveFailed, Err: err}
	}
	for _, d := range disks {
		spec := volumeSpec{name: d.name, capacity: d.capacity, format: formatQCOW2}
		if d.base != "" {
			spec.backingPath, spec.backingFormat = path.Join(dst.poolPath, d.base), backingFormat(d.base)
		}
		xml, err := renderVolume(spec)
		if err != nil {
			return fail(err)
		}
		// Recorded before it is created: a failure after the call may still have made it.
		created = append(created, d.name)
		if _, err := dst.c.StorageVolCreateXML(ctx, dst.pool, xml, 0); err != nil {
			return fail(fmt.Errorf("creating volume %s on the target: %w", d.name, err))
		}
	}
	if plan.Seed != "" {
		if err := copySeed(ctx, src, dst.moveEnd, plan.Seed, &created); err != nil {
			return fail(err)
		}
	}
	return created, nil
}

// maxSeed bounds the seed ISO copied through memory; banlieue's seeds are a few hundred KiB.
const maxSeed = 16 << 20

// copySeed copies the seed ISO volume from the source pool to the target's: it is read-only
// for the guest, so the copy made before the move is the one the guest reads after it.
func copySeed(ctx context.Context, src, dst moveEnd, name string, created *[]string) error {
	v, err := src.c.StorageVolLookupByName(ctx, src.pool, name)
	if err != nil {
		return fmt.Errorf("seed %s on the source: %w", name, err)
	}
	info, err := src.c.StorageVolGetInfo(ctx, v)
	if err != nil {
		return fmt.Errorf("seed %s on the source: %w", name, err)
	}
	if info.Capacity > maxSeed {
		return fmt.Errorf("seed %s on the source is %d bytes, more than a seed holds (%d)", name, info.Capacity, maxSeed)
	}
	var buf bytes.Buffer
	if _, err := src.c.StorageVolDownload(ctx, v, &buf, nil); err != nil {
		return fmt.Errorf("reading seed %s on the source: %w", name, err)
	}
	xml, err := renderVolume(volumeSpec{name: name, capacity: uint64(buf.Len()), format: formatRaw})
	if err != nil {
		return err
	}
	*created = append(*created, name)
	nv, err := dst.c.StorageVolCreateXML(ctx, dst.pool, xml, 0)
	if err != nil {
		return fmt.Errorf("creating seed %s on the target: %w", name, err)
	}
	if err := dst.c.StorageVolUpload(ctx, nv, bytes.NewReader(buf.Bytes()), int64(buf.Len()), nil); err != nil {
		return fmt.Errorf("writing seed %s on the target: %w", name, err)
	}
	return nil
}

// deleteVolumes deletes the named volumes of a pool, those already gone skipped.
func deleteVolumes(ctx context.Context, e moveEnd, names []string) error {
	var errs []error
	for _, name := range names {
		v, err := e.c.StorageVolLookupByName(ctx, e.pool, name)
		if libvirt.IsNotFound(err) {
			continue
		}
		if err == nil {
			err = e.c.StorageVolDelete(ctx, v)
		}
		if err != nil && !libvirt.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting volume %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// moveDomain moves the running domain dom from src to dst as plan says, and returns once it runs
// on dst alone and src keeps nothing of it. abort, closed, aborts the copy (DOMAIN_ABORT_JOB on
// the source): the move then fails with reasonMoveAborted, as it does when ctx ends first. On
// any failure before the domain runs on dst, what the move created on dst is deleted and the
// domain runs on src as before.
func moveDomain(ctx context.Context, src moveEnd, dst moveTarget, dom libvirt.Domain, plan movePlan,
	abort <-chan struct{}) (moveResult, error) {
	params, err := migrationParams(ctx, src, dst.poolPath, dst.address, dom, plan)
	if err != nil {
		return moveResult{}, err
	}
	created, err := prepareTarget(ctx, src, dst, plan)
	if err != nil {
		return moveResult{}, rollBack(ctx, dst.moveEnd, created, err)
	}
	if plan.MaxDowntime > 0 {
		if err := src.c.DomainMigrateSetMaxDowntime(ctx, dom, plan.MaxDowntime); err != nil {
			return moveResult{}, rollBack(ctx, dst.moveEnd, created, &moveError{Step: stepMigrate, Reason: reasonMoveFailed, Err: fmt.Errorf("setting the max downtime: %w", err)})
		}
	}

	if reason, perr := migrate(ctx, src, dom, dst.uri, params, abort); perr != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Minute)
		defer cancel()
		// The call may have returned on its own deadline while the daemon still ends the job:
		// nothing on the target is removed before the source's job is over.
		if err := waitJobEnd(rctx, src, dom); err != nil {
			return moveResult{}, &moveError{Step: stepMigrate, Reason: reason, Err: errors.Join(perr,
				fmt.Errorf("waiting for the source's migration job to end before cleaning the target: %w", err))}
		}
		merr := rollBack(rctx, dst.moveEnd, created, &moveError{Step: stepMigrate, Reason: reason, Err: perr})
		if err := clearTarget(rctx, src, dst.moveEnd, dom, params.PersistXML); err != nil {
			merr = rollBack(rctx, dst.moveEnd, nil, &moveError{Step: stepMigrate, Reason: reason,
				Err: errors.Join(perr, fmt.Errorf("removing the domain's state from the target: %w", err))})
		}
		return moveResult{}, merr
	}

	moved, err := dst.c.DomainLookupByName(ctx, dom.Name)
	if err != nil {
		return moveResult{}, &moveError{Step: stepCleanSource, Reason: reasonMoveFailed, Err: fmt.Errorf("the domain on the target: %w", err)}
	}
	res := moveResult{Domain: moved}
	if st, err := dst.c.DomainGetJobStats(ctx, moved, libvirt.JobStatsCompleted); err == nil {
		res.Downtime, res.Total = st.Downtime, st.TimeElapsed
	}
	if err := cleanSource(ctx, src, dom, plan); err != nil {
		return res, &moveError{Step: stepCleanSource, Reason: reasonMoveFailed, Err: err}
	}
	return res, nil
}

// cleanSource removes what the source keeps of a domain that runs on the target: its inactive
// definition with its NVRAM and TPM state, then its volumes. Idempotent: a crash between the
// move and the clean-up is finished by calling it again.
func cleanSource(ctx context.Context, src moveEnd, dom libvirt.Domain, plan movePlan) error {
	d, err := src.c.DomainLookupByName(ctx, dom.Name)
	switch {
	case libvirt.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("looking up the domain on the source: %w", err)
	case d.UUID != dom.UUID:
		return fmt.Errorf("the source's domain %s has UUID %x, not the moved domain's: left alone", dom.Name, d.UUID)
	default:
		if state, _, err := src.c.DomainState(ctx, d); err != nil {
			return fmt.Errorf("reading the domain's state on the source: %w", err)
		} else if state == libvirt.DomainRunning || state == libvirt.DomainPaused {
			return fmt.Errorf("the domain still runs on the source (state %s): not cleaned", state)
		}
		if err := src.c.DomainUndefine(ctx, d, libvirt.UndefineNVRAM|libvirt.UndefineTPM|libvirt.UndefineManagedSave); err != nil && !libvirt.IsNotFound(err) {
			return fmt.Errorf("undefining the domain on the source: %w", err)
		}
	}
	vols := slices.Clone(plan.Disks)
	if plan.Seed != "" {
		vols = append(vols, plan.Seed)
	}
	return deleteVolumes(ctx, src, vols)
}

// waitJobEnd returns once dom has no active job on h.
func waitJobEnd(ctx context.Context, h moveEnd, dom libvirt.Domain) error {
	for {
		st, err := h.c.DomainGetJobStats(ctx, dom, 0)
		if err != nil {
			return err
		}
		if st.Type != libvirt.JobBounded && st.Type != libvirt.JobUnbounded {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// clearTarget removes the NVRAM file and swtpm state a failed move leaves on the target
// (libvirt ends the incoming domain there but keeps the NVRAM it created): the domain's
// definition is defined there and undefined with them. Only while the domain runs on the
// source and the target has no domain of its name, so nothing of a domain that runs is touched.
func clearTarget(ctx context.Context, src, dst moveEnd, dom libvirt.Domain, persistent string) error {
	if state, _, err := src.c.DomainState(ctx, dom); err != nil {
		return fmt.Errorf("reading the domain's state on the source: %w", err)
	} else if state != libvirt.DomainRunning && state != libvirt.DomainPaused {
		return fmt.Errorf("the domain is %s on the source: the target is left as it is", state)
	}
	if _, err := dst.c.DomainLookupByName(ctx, dom.Name); err == nil {
		return fmt.Errorf("the target has a domain %s: left alone", dom.Name)
	} else if !libvirt.IsNotFound(err) {
		return err
	}
	d, err := dst.c.DomainDefineXML(ctx, persistent, 0)
	if err != nil {
		return fmt.Errorf("defining the domain to undefine it: %w", err)
	}
	if err := dst.c.DomainUndefine(ctx, d, libvirt.UndefineNVRAM|libvirt.UndefineTPM); err != nil {
		return fmt.Errorf("undefining the domain: %w", err)
	}
	return nil
}

// rollBack deletes on the target what a failed move created there, and returns the move's
// error, with the clean-up's appended when it failed too.
func rollBack(ctx context.Context, dst moveEnd, created []string, err error) error {
	if cerr := deleteVolumes(ctx, dst, created); cerr != nil {
		var me *moveError
		if errors.As(err, &me) {
			return &moveError{Step: me.Step, Reason: me.Reason, Err: errors.Join(me.Err, fmt.Errorf("removing what the move created on the target: %w", cerr))}
		}
		return errors.Join(err, cerr)
	}
	return err
}

func asMoveError(step string, err error) error {
	var me *moveError
	if errors.As(err, &me) {
		return err
	}
	return &moveError{Step: step, Reason: reasonMoveFailed, Err: err}
}

// deadlineOr is ctx's deadline, else d from now.
func deadlineOr(ctx context.Context, d time.Duration) time.Time {
	if t, ok := ctx.Deadline(); ok {
		return t
	}
	return time.Now().Add(d)
}

// moveOutcome is where an interrupted move stands, by the hosts: after a restart they are the
// truth, not what the provider last wrote.
type moveOutcome int

const (
	// moveUnderWay: the source's migration job still runs; look again later.
	moveUnderWay moveOutcome = iota
	// moveStayed: the domain runs on the source alone: the move did not happen. What it made
	// on the target is deleted.
	moveStayed
	// moveDone: the domain runs on the target alone: the source is cleaned.
	moveDone
	// moveUnclear: neither host runs it, or both do; nothing is touched and the machine says so.
	moveUnclear
)

func (o moveOutcome) String() string {
	switch o {
	case moveUnderWay:
		return "under way"
	case moveStayed:
		return "stayed on the source"
	case moveDone:
		return "done"
	}
	return "unclear"
}

// hostView is what one host shows of the moving domain.
type hostView struct {
	// Defined: the host has a domain of the name and UUID.
	Defined bool
	// Running: it runs (or is paused) there.
	Running bool
	// Job: a migration job is active on it.
	Job bool
	// Incoming: it is the receiving end of a migration, paused, whose statistics libvirt keeps
	// on the source alone.
	Incoming bool
}

// decideMove is where a move interrupted at any step stands, from what both hosts show.
func decideMove(src, dst hostView) moveOutcome {
	switch {
	case src.Job || dst.Job:
		return moveUnderWay
	case src.Running && dst.Incoming:
		// The source's job is over (it spans the destination's whole incoming phase), so the
		// target's incoming domain is one libvirt failed to end: the move did not happen.
		return moveStayed
	case src.Running && !dst.Running:
		return moveStayed
	case dst.Running && !dst.Incoming && !src.Running:
		return moveDone
	}
	return moveUnclear
}

// viewOf reads what h shows of dom.
func viewOf(ctx context.Context, h moveEnd, dom libvirt.Domain) (hostView, error) {
	d, err := h.c.DomainLookupByName(ctx, dom.Name)
	if libvirt.IsNotFound(err) {
		return hostView{}, nil
	}
	if err != nil {
		return hostView{}, err
	}
	if d.UUID != dom.UUID {
		return hostView{}, fmt.Errorf("domain %s there has UUID %s, not the moving domain's %s", dom.Name, d.UUID, dom.UUID)
	}
	v := hostView{Defined: true}
	state, _, err := h.c.DomainState(ctx, d)
	if err != nil {
		return v, err
	}
	v.Running = state == libvirt.DomainRunning || state == libvirt.DomainPaused
	st, err := h.c.DomainGetJobStats(ctx, d, 0)
	if err != nil && state == libvirt.DomainPaused && libvirt.IsUnsupported(err) {
		// "migration statistics are available only on the source host": an incoming domain.
		v.Incoming = true
		return v, nil
	}
	if err != nil && v.Running {
		return v, err
	}
	v.Job = err == nil && (st.Type == libvirt.JobBounded || st.Type == libvirt.JobUnbounded)
	return v, nil
}

// convergeMove finishes a move the provider was interrupted in (killed, restarted) from what
// the hosts show: the domain runs on exactly one host and the other keeps nothing of it.
// created are the volumes the move recorded on the target before creating them.
func convergeMove(ctx context.Context, src moveEnd, dst moveTarget, dom libvirt.Domain, plan movePlan, created []string) (moveOutcome, error) {
	sv, err := viewOf(ctx, src, dom)
	if err != nil {
		return moveUnclear, fmt.Errorf("the source: %w", err)
	}
	dv, err := viewOf(ctx, dst.moveEnd, dom)
	if err != nil {
		return moveUnclear, fmt.Errorf("the target: %w", err)
	}
	out := decideMove(sv, dv)
	switch out {
	case moveDone:
		return out, cleanSource(ctx, src, dom, plan)
	case moveStayed:
		if dv.Incoming {
			// Transient until the move's Finish: destroyed, it is gone, with the QEMU that
			// holds the target's volumes open.
			d, err := dst.c.DomainLookupByName(ctx, dom.Name)
			if err == nil && d.UUID == dom.UUID {
				err = dst.c.DomainDestroy(libvirt.WithCallTimeout(ctx, destroyTimeout), d)
			}
			if err != nil && !libvirt.IsNotFound(err) {
				return out, fmt.Errorf("ending the target's stale incoming domain %s: %w", dom.Name, err)
			}
			if _, err := dst.c.DomainLookupByName(ctx, dom.Name); err == nil {
				return out, fmt.Errorf("the target still has domain %s after its incoming migration was ended", dom.Name)
			}
			dv.Defined = false
		}
		if err := deleteVolumes(ctx, dst.moveEnd, created); err != nil {
			return out, err
		}
		persistent, err := src.c.DomainXMLDesc(ctx, dom, libvirt.DomainXMLMigratable|libvirt.DomainXMLInactive)
		if err != nil {
			return out, err
		}
		if persistent, err = migrationDestXML(persistent, src.poolPath, dst.poolPath, plan.Networks, plan.Owner); err != nil {
			return out, err
		}
		if dv.Defined {
			return out, fmt.Errorf("the target still has domain %s, not running: left for libvirtd to end", dom.Name)
		}
		return out, clearTarget(ctx, src, dst.moveEnd, dom, persistent)
	}
	return out, nil
}

// migrate runs the peer-to-peer migration of dom from src to the destination's uri, aborting it
// (DOMAIN_ABORT_JOB) when abort is closed or ctx ends; on failure reason is reasonMoveAborted
// for an abort, else reasonMoveFailed.
func migrate(ctx context.Context, src moveEnd, dom libvirt.Domain, uri string, params libvirt.MigrateParams, abort <-chan struct{}) (reason string, err error) {
	done := make(chan error, 1)
	go func() {
		// The call lasts the whole copy: its deadline is the move's, not the RPC default.
		done <- src.c.DomainMigratePerform3Params(libvirt.WithCallTimeout(ctx, time.Until(deadlineOr(ctx, 24*time.Hour))),
			dom, uri, params.Typed(), moveFlags)
	}()
	aborted := false
	select {
	case err = <-done:
	case <-abort:
		aborted = true
	case <-ctx.Done():
		aborted = true
	}
	if aborted {
		// A fresh deadline: ctx may be the one that ended. A copy that completed before the
		// abort reached it succeeds all the same.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		_ = src.c.DomainAbortJob(actx, dom)
		cancel()
		err = <-done
	}
	if err == nil {
		return "", nil
	}
	var le *libvirt.Error
	if aborted || errors.As(err, &le) && le.Code == libvirt.ErrOperationAborted {
		return reasonMoveAborted, err
	}
	return reasonMoveFailed, err
}

// migrationParams reads dom's migratable definitions from src and makes the migration's
// parameters: the disks to copy (those of plan in src's pool) and the destination's
// definitions, live and persistent, on the target's pool (dstPoolPath) and networks, its
// streams to dstAddress.
func migrationParams(ctx context.Context, src moveEnd, dstPoolPath, dstAddress string, dom libvirt.Domain, plan movePlan) (libvirt.MigrateParams, error) {
	live, err := src.c.DomainXMLDesc(ctx, dom, libvirt.DomainXMLMigratable)
	if err != nil {
		return libvirt.MigrateParams{}, &moveError{Step: stepPrepareTarget, Reason: reasonMoveFailed, Err: fmt.Errorf("reading the domain's definition: %w", err)}
	}
	persistent, err := src.c.DomainXMLDesc(ctx, dom, libvirt.DomainXMLMigratable|libvirt.DomainXMLInactive)
	if err != nil {
		return libvirt.MigrateParams{}, &moveError{Step: stepPrepareTarget, Reason: reasonMoveFailed, Err: fmt.Errorf("reading the domain's definition: %w", err)}
	}
	targets, err := diskTargets(live, src.poolPath, plan.Disks)
	if err != nil {
		return libvirt.MigrateParams{}, &moveError{Step: stepPrepareTarget, Reason: reasonDiskOutsidePool, Err: err}
	}
	destLive, err := migrationDestXML(live, src.poolPath, dstPoolPath, plan.Networks, plan.Owner)
	if err != nil {
		return libvirt.MigrateParams{}, asMoveError(stepPrepareTarget, err)
	}
	destPersistent, err := migrationDestXML(persistent, src.poolPath, dstPoolPath, plan.Networks, plan.Owner)
	if err != nil {
		return libvirt.MigrateParams{}, asMoveError(stepPrepareTarget, err)
	}
	return libvirt.MigrateParams{URI: "tcp://" + dstAddress, ListenAddress: dstAddress, MigrateDisks: targets,
		DestXML: destLive, PersistXML: destPersistent, Bandwidth: plan.Bandwidth}, nil
}
