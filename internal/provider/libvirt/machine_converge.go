package libvirt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"libvirt.org/go/libvirtxml"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	"banlieue.io/banlieue/pkg/libvirt"
	"banlieue.io/banlieue/pkg/nocloud"
)

// agentTimeout is how long libvirt waits for qemu-guest-agent per command, in seconds.
const agentTimeout = 5

// observation is what one converge pass found on the host.
type observation struct {
	domain        libvirt.Domain
	state         libvirt.DomainState
	domainType    string
	addresses     []libvirt.IPAddress
	addressSource infrav1.AddressSource
	phase         guestPhase
	// mediaDetached is true once the installer is ejected (installMedia machines only).
	mediaDetached bool
	// power is what applyPower did and found.
	power powerOutcome
	// grow is what growDisks did.
	grow growOutcome
	// snapshotsPending says a snapshot step is left for the next pass (machine_snapshot.go).
	snapshotsPending bool
}

// volumeRecord is the machine's record of its volumes (status.volumes), the proof that a volume
// of a name is the machine's own (ownership.go). Each call writes through to the API server and
// updates the machine in memory.
type volumeRecord struct {
	// add records names before the volumes are created.
	add func(ctx context.Context, names []string) error
	// drop removes a name whose create libvirtd refused: no volume of the machine's holds it,
	// and a volume someone else makes under it later must not pass for the machine's.
	drop func(ctx context.Context, name string) error
	// refresh re-reads the record from the API server, past a cache that may lag behind the
	// machine's own last write.
	refresh func(ctx context.Context) error
	// refreshSnapshots re-reads status.snapshots, status.restore and status.volumes from the API
	// server, for the same reason.
	refreshSnapshots func(ctx context.Context) error
	// snapshots writes status.snapshots, with layer names added to status.volumes, before the
	// host changes (machine_snapshot.go).
	snapshots snapshotRecordWriter
	// restore writes status.restore (machine_restore.go).
	restore restoreWriter
}

// converge makes the host match the machine (docs/guides/libvirt-provider.md, "7. Run a VM"). It is idempotent: every step
// looks before it creates, and existing volumes are reused as they are. Nothing on the host is
// created or changed before the machine has proven it may: its domain name is free or holds
// this machine's own domain, and each of its volume names is free or recorded as its own.
//
// The phases run in order: checkSpec, claimNames, ensureDisks, defineDomain, applyPower,
// growDisks, observeGuest. Every error names the step that failed: the steps whose own messages already
// say it (and which the guides quote exactly) as they are, the others wrapped by inPhase.
//
// starts tells a start libvirtd lost (killed during DomainCreate) from one in flight. userData
// is the machine's user-data, read from its per-machine Secret (machineUserData).
func converge(ctx context.Context, c *libvirt.Client, m *infrav1.LibvirtMachine, userData []byte, record volumeRecord,
	starts *startWatch) (observation, error) {
	obs := observation{mediaDetached: ptrTrue(m.Status.InstallMediaDetached)}
	pool, boot, err := checkSpec(ctx, c, m, userData)
	if err != nil {
		return obs, err
	}
	names, err := claimNames(ctx, c, pool, m, record)
	if err != nil {
		return obs, err
	}
	diskPaths, err := ensureDisks(ctx, c, pool, m, boot, names.volumes, record)
	if err != nil {
		return obs, err // names its volume: "creating volume …"
	}
	if hasSnapshotRecord(m) {
		// The record names each disk's top and the next snapshot step. A pass that read it from a
		// cache behind this provider's own last write would define the domain over an older
		// layer, hiding the writes since; so it is read from the API server.
		if err := record.refreshSnapshots(ctx); err != nil {
			return obs, fmt.Errorf("re-reading status.snapshots: %w", err)
		}
	}
	if names.current != nil {
		if err := convergeRestore(ctx, c, pool, m, names.existing, record.restore); err != nil {
			return obs, err // names the restore and its step
		}
		if obs.snapshotsPending, err = convergeSnapshots(ctx, c, pool, m, names.existing, record.snapshots); err != nil {
			return obs, err // names the snapshot and its step
		}
	}
	// The definition names each disk's top layer, and growth resizes the top.
	diskPaths, tops, err := topPaths(ctx, c, pool, m, diskPaths, names.volumes)
	if err != nil {
		return obs, err
	}
	if err := defineDomain(ctx, c, pool, m, userData, boot, names, diskPaths, record, &obs); err != nil {
		return obs, err
	}
	if obs.power, err = applyPower(ctx, c, m, obs.domain, starts); err != nil {
		return obs, err // names its step: "starting domain …", "… still starting up"
	}
	obs.state = obs.power.state
	if obs.grow, err = growDisks(ctx, c, m, tops, obs.domain, isRunning(obs.state)); err != nil {
		return obs, err // names the disk: "growing spec.disks[i] …"
	}
	if err := observeGuest(ctx, c, m, &obs); err != nil {
		return obs, err
	}
	return obs, nil
}

// checkSpec refuses, before anything is created on the host, a machine whose pool or boot
// volume is missing, or whose user-data no seed can carry (the seed is built last, and a machine
// that cannot have one must not leave a domain and volumes behind). Its refusals name the field.
func checkSpec(ctx context.Context, c *libvirt.Client, m *infrav1.LibvirtMachine, userData []byte) (libvirt.StoragePool, libvirt.StorageVol, error) {
	s := &m.Spec
	if n := len(userData); n > nocloud.MaxPayloadSize {
		return libvirt.StoragePool{}, libvirt.StorageVol{}, fmt.Errorf("invalid spec.userDataSecretRef: the user-data is %d bytes, more than the %d-byte NoCloud seed maximum", n, nocloud.MaxPayloadSize)
	}
	pool, err := c.StoragePoolLookupByName(ctx, s.Pool)
	if libvirt.IsNotFound(err) {
		return pool, libvirt.StorageVol{}, fmt.Errorf("invalid spec.pool: storage pool %q does not exist on this host", s.Pool)
	} else if err != nil {
		return pool, libvirt.StorageVol{}, fmt.Errorf("looking storage pool %q up: %w", s.Pool, err)
	}
	boot, err := c.StorageVolLookupByName(ctx, pool, s.BootSource.Volume)
	if libvirt.IsNotFound(err) {
		return pool, boot, fmt.Errorf("invalid spec.bootSource.volume: volume %q is not in pool %q; the VMImage for this machine has not finished importing",
			s.BootSource.Volume, s.Pool)
	} else if err != nil {
		return pool, boot, fmt.Errorf("looking boot volume %q up: %w", s.BootSource.Volume, err)
	}
	return pool, boot, nil
}

// claimedNames is what claimNames proved the machine's: its domain, if one exists, and the
// volumes of its names that exist.
type claimedNames struct {
	current  *libvirtxml.Domain
	existing libvirt.Domain
	volumes  map[string]libvirt.StorageVol
}

// claimNames proves the domain name and the volume names free or the machine's own.
func claimNames(ctx context.Context, c *libvirt.Client, pool libvirt.StoragePool, m *infrav1.LibvirtMachine,
	record volumeRecord) (claimedNames, error) {
	var n claimedNames
	var err error
	if n.current, n.existing, err = ownDomain(ctx, c, m); err != nil {
		return n, inPhase("proving the domain name", err)
	}
	if n.volumes, err = claimVolumes(ctx, c, pool, m, record); err != nil {
		return n, inPhase("proving the volume names", err)
	}
	return n, nil
}

// defineDomain defines (or redefines) the domain with its disks and seed, once. The UUID and
// the generated MACs are chosen before the first define (machine_identity.go), so a new
// machine's seed, whose instance-id is the UUID and whose network-config names the MACs, is built
// and uploaded first and the domain is defined attaching it, with no read-back.
func defineDomain(ctx context.Context, c *libvirt.Client, pool libvirt.StoragePool, m *infrav1.LibvirtMachine, userData []byte,
	boot libvirt.StorageVol, names claimedNames, diskPaths []string, record volumeRecord, obs *observation) error {
	s := &m.Spec
	domainType, vendor, err := connectionVirtualisation(ctx, c)
	if err != nil {
		return inPhase("reading the host's capabilities", err)
	}
	obs.domainType = domainType
	in := domainInputs{spec: s, owner: ownerOf(m), domainType: domainType, cpuVendor: vendor, diskPaths: diskPaths,
		installDetached: obs.mediaDetached}
	if s.BootSource.Kind == infrav1.BootInstallMedia && !obs.mediaDetached {
		in.installMedia = boot.Key
	}
	var existing string
	if names.current != nil {
		existing = names.existing.UUID.String()
	}
	if in.uuid = defineUUID(persistedUUID(m, s.ProviderRef.Name), existing); in.uuid == "" {
		// claimIdentity wrote it before this pass reached the host.
		return fmt.Errorf("defining domain %s: spec.providerID records no domain UUID", s.DomainName)
	}
	if names.current != nil {
		in.macs = interfaceMACs(names.current)
	} else {
		in.macs = generatedMACs(s, in.uuid)
	}
	if seed, ok := names.volumes[seedVolume(s.DomainName)]; ok {
		if attaches(names.current, seed.Key) {
			// A seed is never rewritten: cloud-init has consumed it, and editing userData
			// later must not change what a running guest sees on its next boot.
			in.seed = seed.Key
		} else {
			// The definition that attaches the seed is its commit point. A seed of this
			// machine's that no definition attaches was left by a pass that stopped before it
			// (it may be partly uploaded): make it anew.
			if err := c.StorageVolDelete(ctx, seed); err != nil && !libvirt.IsNotFound(err) {
				return inPhase("deleting the uncommitted seed volume", err)
			}
		}
	}
	if in.seed == "" {
		if in.seed, err = createSeed(ctx, c, pool, m, userData, in.uuid, in.macs, record); err != nil {
			return err // names its step: "building the cloud-init seed", "uploading the seed"
		}
	}
	if obs.domain, err = define(ctx, c, in); err != nil {
		return err // "defining domain …", quoted by the guides
	}
	return nil
}

// observeGuest reads the guest's addresses and install phase, and ejects a finished install's
// medium.
func observeGuest(ctx context.Context, c *libvirt.Client, m *infrav1.LibvirtMachine, obs *observation) error {
	var err error
	if obs.addresses, obs.addressSource, err = guestAddresses(ctx, c, obs.domain); err != nil {
		return inPhase("reading the guest's addresses", err)
	}
	obs.phase = agentUnreachable
	if isRunning(obs.state) {
		obs.phase = probeGuest(ctx, func(ctx context.Context, cmd string) (string, error) {
			return c.DomainAgentCommand(ctx, obs.domain, cmd, agentTimeout)
		})
	}
	s := &m.Spec
	if s.BootSource.Kind != infrav1.BootInstallMedia || obs.mediaDetached || obs.phase != installed {
		return nil
	}
	eject, err := ejectedInstallerXML(s)
	if err != nil {
		return inPhase("ejecting the install media", err)
	}
	// Never FORCE: a guest that locked its tray has a reason, and the error says so.
	if err := c.DomainUpdateDevice(ctx, obs.domain, eject, libvirt.DeviceModifyLive|libvirt.DeviceModifyConfig); err != nil {
		return fmt.Errorf("ejecting the install media: %w", err)
	}
	obs.mediaDetached = true
	return nil
}

// ownDomain looks the machine's domain up by name and returns its persistent definition, or nil
// when there is none yet. A domain of that name whose ownership record does not name this
// machine is a conflict: it is left exactly as it is.
func ownDomain(ctx context.Context, c *libvirt.Client, m *infrav1.LibvirtMachine) (*libvirtxml.Domain, libvirt.Domain, error) {
	dom, err := c.DomainLookupByName(ctx, m.Spec.DomainName)
	if libvirt.IsNotFound(err) {
		return nil, libvirt.Domain{}, nil
	} else if err != nil {
		return nil, dom, fmt.Errorf("looking domain %q up: %w", m.Spec.DomainName, err)
	}
	def, err := readDefinition(ctx, c, dom)
	if err != nil {
		return nil, dom, err
	}
	if !ownedBy(def, m) {
		return nil, dom, domainConflict(def)
	}
	return def, dom, nil
}

// claimVolumes finds which of the machine's volumes exist and records, before any is created,
// those that do not: a volume that exists but is not recorded is a stranger's, and the machine
// stops there with the host unchanged. It returns the existing volumes, by name.
func claimVolumes(ctx context.Context, c *libvirt.Client, pool libvirt.StoragePool, m *infrav1.LibvirtMachine,
	record volumeRecord) (map[string]libvirt.StorageVol, error) {
	names := machineVolumes(&m.Spec)
	found := map[string]libvirt.StorageVol{}
	for _, name := range names {
		vol, err := c.StorageVolLookupByName(ctx, pool, name)
		if libvirt.IsNotFound(err) {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("looking volume %q up: %w", name, err)
		}
		found[name] = vol
	}
	exists := func(name string) bool { _, ok := found[name]; return ok }
	missing, stranger := planVolumes(names, exists, m.Status.Volumes)
	if stranger != "" {
		// The cached machine may predate its own last record: ask the API server before
		// calling a volume someone else's, and before a status write from the stale copy
		// could drop the record for good.
		if err := record.refresh(ctx); err != nil {
			return nil, fmt.Errorf("re-reading status.volumes: %w", err)
		}
		missing, stranger = planVolumes(names, exists, m.Status.Volumes)
	}
	if stranger != "" {
		return nil, volumeConflict(stranger, m.Spec.Pool)
	}
	if len(missing) > 0 {
		if err := record.add(ctx, missing); err != nil {
			return nil, fmt.Errorf("recording volumes %v in status before creating them: %w", missing, err)
		}
	}
	return found, nil
}

// readDefinition returns the domain's persistent definition.
func readDefinition(ctx context.Context, c *libvirt.Client, dom libvirt.Domain) (*libvirtxml.Domain, error) {
	xml, err := c.DomainXMLDesc(ctx, dom, libvirt.DomainXMLInactive)
	if err != nil {
		return nil, err
	}
	var def libvirtxml.Domain
	if err := def.Unmarshal(xml); err != nil {
		return nil, fmt.Errorf("reading back the definition of %s: %w", dom.Name, err)
	}
	return &def, nil
}

// interfaceMACs lists the definition's interface MACs by position.
func interfaceMACs(def *libvirtxml.Domain) []string {
	if def == nil || def.Devices == nil {
		return nil
	}
	macs := make([]string, len(def.Devices.Interfaces))
	for i, iface := range def.Devices.Interfaces {
		if iface.MAC != nil {
			macs[i] = iface.MAC.Address
		}
	}
	return macs
}

// attaches reports whether the definition has a CD-ROM holding path.
func attaches(def *libvirtxml.Domain, path string) bool {
	if def == nil || def.Devices == nil {
		return false
	}
	for _, d := range def.Devices.Disks {
		if d.Device == "cdrom" && d.Source != nil && d.Source.File != nil && d.Source.File.File == path {
			return true
		}
	}
	return false
}

// ensureDisks creates the OS disk and data disks that do not exist yet and returns every disk's
// host path. Existing volumes (found, all recorded as this machine's) are never recreated;
// growDisks grows them.
func ensureDisks(ctx context.Context, c *libvirt.Client, pool libvirt.StoragePool, m *infrav1.LibvirtMachine,
	boot libvirt.StorageVol, found map[string]libvirt.StorageVol, record volumeRecord) ([]string, error) {
	s := &m.Spec
	paths := make([]string, len(s.Disks))
	for i, d := range s.Disks {
		name := diskVolume(s.DomainName, d.Name)
		if vol, ok := found[name]; ok {
			paths[i] = vol.Key
			continue
		}
		spec := volumeSpec{name: name, capacity: uint64(d.SizeGiB) << 30, format: formatQCOW2}
		if i == 0 && s.BootSource.Kind == infrav1.BootBackingVolume {
			spec.backingPath, spec.backingFormat = boot.Key, backingFormat(boot.Name)
		}
		xml, err := renderVolume(spec)
		if err != nil {
			return nil, err
		}
		// No pool refresh after it: a volume created through libvirt is in the pool's list with
		// its size at once, and a refresh rescans every volume of the pool.
		vol, err := createVolume(ctx, c, pool, xml, name, record)
		if err != nil {
			return nil, err
		}
		paths[i] = vol.Key
	}
	return paths, nil
}

// createVolume creates a recorded volume. When libvirtd answers that it did not (the name is
// taken after all, the pool is full), the name leaves the record: it proves nothing any more.
// When the answer is lost (the connection broke), the volume may exist and the name stays.
func createVolume(ctx context.Context, c *libvirt.Client, pool libvirt.StoragePool, xml, name string,
	record volumeRecord) (libvirt.StorageVol, error) {
	vol, err := c.StorageVolCreateXML(ctx, pool, xml, 0)
	if err == nil {
		return vol, nil
	}
	var refused *libvirt.Error
	if errors.As(err, &refused) {
		if dropErr := record.drop(ctx, name); dropErr != nil {
			return vol, fmt.Errorf("creating volume %s: %w (and removing it from status.volumes: %v)", name, err, dropErr)
		}
	}
	return vol, fmt.Errorf("creating volume %s: %w", name, err)
}

func define(ctx context.Context, c *libvirt.Client, in domainInputs) (libvirt.Domain, error) {
	xml, err := renderDomain(in)
	if err != nil {
		return libvirt.Domain{}, err
	}
	dom, err := c.DomainDefineXML(ctx, xml, 0)
	if err != nil {
		return libvirt.Domain{}, fmt.Errorf("defining domain %s: %w", in.spec.DomainName, err)
	}
	return dom, nil
}

// createSeed uploads the machine's NoCloud seed, built in memory: the guest's bootstrap
// credentials never touch this process's filesystem.
func createSeed(ctx context.Context, c *libvirt.Client, pool libvirt.StoragePool, m *infrav1.LibvirtMachine, userData []byte,
	domainUUID string, macs []string, record volumeRecord) (string, error) {
	// user-data is always written, empty when the machine has none: cloud-init's NoCloud
	// datasource ignores a seed that lacks either file, and the guest would then get no
	// instance-id, hostname or network-config.
	seed := nocloud.Seed{InstanceID: domainUUID, Hostname: m.Spec.DomainName,
		UserData: append([]byte{}, userData...)}
	network, err := seedNetworkConfig(m, macs)
	if err != nil {
		return "", err
	}
	seed.NetworkConfig = network
	image, err := seed.Build()
	if err != nil {
		return "", fmt.Errorf("building the cloud-init seed: %w", err)
	}
	var buf bytes.Buffer
	if _, err := image.WriteTo(&buf); err != nil {
		return "", err
	}
	xml, err := renderVolume(volumeSpec{name: seedVolume(m.Spec.DomainName), capacity: uint64(buf.Len()), format: formatRaw})
	if err != nil {
		return "", err
	}
	vol, err := createVolume(ctx, c, pool, xml, seedVolume(m.Spec.DomainName), record)
	if err != nil {
		return "", err
	}
	if err := c.StorageVolUpload(ctx, vol, &buf, int64(buf.Len()), nil); err != nil {
		// A seed that is not whole must not be mistaken for one on the next pass.
		_ = c.StorageVolDelete(ctx, vol)
		return "", fmt.Errorf("uploading the seed: %w", err)
	}
	// libvirtd refreshes the pool itself when an upload's stream closes.
	return vol.Key, nil
}

// seedNetworkConfig renders network-config v2 for the NICs with static addresses, matched by
// MAC: the spec's, else the one the definition carries (generated or kept, by position).
func seedNetworkConfig(m *infrav1.LibvirtMachine, assigned []string) ([]byte, error) {
	static := false
	for _, n := range m.Spec.Network {
		static = static || n.IPAM.Static != nil
	}
	if !static {
		return nil, nil
	}
	nics := make([]nocloud.NIC, len(m.Spec.Network))
	for i, n := range m.Spec.Network {
		nics[i] = nocloud.NIC{Name: n.Name, MAC: n.MACAddress}
		if nics[i].MAC == "" && i < len(assigned) {
			nics[i].MAC = assigned[i]
		}
		if st := n.IPAM.Static; st != nil {
			nics[i].Static = &nocloud.StaticIP{Address: st.Address, Prefix: uint8(st.Prefix), Gateway: st.Gateway,
				Nameservers: st.Nameservers, Domain: st.Domain}
		}
	}
	return nocloud.NetworkConfigV2(nics)
}

// inPhase names the phase of converge an error came from, so a ReconcileFailed message says
// which step failed (and, through pkg/libvirt, which procedure). A refusal that is already a
// sentence to the user (a name conflict, whose text the guides quote exactly) is left as it is.
func inPhase(phase string, err error) error {
	if conflictReason(err) != "" {
		return err
	}
	return fmt.Errorf("%s: %w", phase, err)
}

// applyPower acts on the domain's power the way decidePower says (machine_power.go) and reads
// the state it left.
func applyPower(ctx context.Context, c *libvirt.Client, m *infrav1.LibvirtMachine, dom libvirt.Domain,
	starts *startWatch) (powerOutcome, error) {
	state, reason, err := c.DomainState(ctx, dom)
	out := powerOutcome{state: state, reason: reason}
	if err != nil {
		return out, err
	}
	// A start still in flight: a pass that died during DomainCreate (libvirtd finishes it
	// alone), or another client's. Reported now it would read as Suspended and stand until the
	// next 30 s pass; failing the pass looks again on the 5 s error interval. A start that
	// libvirtd itself lost (killed mid-start) never finishes: past the bound the half-started
	// domain, proven this machine's, is destroyed and started again. When libvirtd refuses that
	// destroy too (it lost the start before QEMU ran, B10), the machine says so, and no pass
	// asks again: each refusal holds one of the host's domain slots for libvirtd's 30 s wait.
	if startingUp(state, reason) {
		verdict, lost := starts.judge(m.UID)
		switch verdict {
		case startInFlight:
			return out, fmt.Errorf("domain %s is still starting up; looking again shortly", dom.Name)
		case startLost:
			return out, lost
		}
		if err := c.DomainDestroy(libvirt.WithCallTimeout(ctx, destroyTimeout), dom); err != nil && !libvirt.IsNotFound(err) {
			if lost := lostStart(dom.Name, state, reason, err); lost != nil {
				starts.refused(m.UID, lost)
				return out, lost
			}
			return out, fmt.Errorf("destroying domain %s, stuck starting up: %w", dom.Name, err)
		}
		state = libvirt.DomainShutOff
	}
	starts.clear(m.UID)
	out.inputs = powerInputsOf(m, state, time.Now())
	out.plan = decidePower(out.inputs)
	if out.asked, err = powerCall(ctx, c, dom, out.plan.action); err != nil {
		return out, err
	}
	if out.plan.action == powerNone {
		out.state = state
		return out, nil
	}
	out.state, out.reason, err = c.DomainState(ctx, dom)
	return out, err
}

// powerCall makes the libvirt calls of one power action and says how a soft shutdown or reboot
// reached the guest. Each error names the step.
func powerCall(ctx context.Context, c *libvirt.Client, dom libvirt.Domain, action powerAction) (softAsk, error) {
	var ask softAsk
	var err error
	switch action {
	case powerStart:
		if _, err = c.DomainCreate(ctx, dom, 0); err != nil {
			return ask, fmt.Errorf("starting domain %s: %w", dom.Name, err)
		}
	case powerShutdown:
		ask, err = askGuest(ctx, func(ctx context.Context, f libvirt.DomainPowerFlags) error { return c.DomainShutdown(ctx, dom, f) })
		if err != nil {
			return ask, fmt.Errorf("%s to shut domain %s down: %w", ask.via.asking(), dom.Name, err)
		}
	case powerDestroy:
		if err = c.DomainDestroy(ctx, dom); err != nil {
			return ask, fmt.Errorf("stopping domain %s: %w", dom.Name, err)
		}
	case powerForce:
		if err = c.DomainDestroy(ctx, dom); err != nil {
			return ask, fmt.Errorf("destroying domain %s after spec.powerOffTimeout: %w", dom.Name, err)
		}
	case powerSuspend:
		if err = c.DomainSuspend(ctx, dom); err != nil {
			return ask, fmt.Errorf("suspending domain %s: %w", dom.Name, err)
		}
	case powerResume:
		if err = c.DomainResume(ctx, dom); err != nil {
			return ask, fmt.Errorf("resuming domain %s: %w", dom.Name, err)
		}
	case powerReboot:
		ask, err = askGuest(ctx, func(ctx context.Context, f libvirt.DomainPowerFlags) error { return c.DomainReboot(ctx, dom, f) })
		if err != nil {
			return ask, fmt.Errorf("%s to reboot domain %s: %w", ask.via.asking(), dom.Name, err)
		}
	case powerCycle:
		if err = c.DomainDestroy(ctx, dom); err != nil {
			return ask, fmt.Errorf("destroying domain %s to restart it: %w", dom.Name, err)
		}
		if _, err = c.DomainCreate(ctx, dom, 0); err != nil {
			return ask, fmt.Errorf("starting domain %s to restart it: %w", dom.Name, err)
		}
	}
	return ask, nil
}

// guestAddresses asks the agent, then DHCP leases, then the ARP table; the first source with an
// address wins. A source libvirt cannot serve for this domain is skipped; a broken connection
// is an error.
func guestAddresses(ctx context.Context, c *libvirt.Client, dom libvirt.Domain) ([]libvirt.IPAddress, infrav1.AddressSource, error) {
	sources := []struct {
		src  libvirt.AddressSource
		name infrav1.AddressSource
	}{
		{libvirt.AddressSourceAgent, infrav1.AddressFromGuestAgent},
		{libvirt.AddressSourceLease, infrav1.AddressFromDHCPLease},
		{libvirt.AddressSourceARP, infrav1.AddressFromARPTable},
	}
	for _, s := range sources {
		ifaces, err := c.DomainInterfaceAddresses(ctx, dom, s.src)
		var remote *libvirt.Error
		if errors.As(err, &remote) {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		var addrs []libvirt.IPAddress
		for _, i := range ifaces {
			addrs = append(addrs, i.Addrs...)
		}
		if len(addrs) > 0 {
			return addrs, s.name, nil
		}
	}
	return nil, "", nil
}

// hostVirtualisation reads the domain type (kvm when the host offers hardware virtualisation for
// x86_64 guests, else qemu) and the host CPU's vendor from the host's capabilities.
func hostVirtualisation(ctx context.Context, c *libvirt.Client) (domainType, vendor string, err error) {
	capsXML, err := c.Capabilities(ctx)
	if err != nil {
		return "", "", fmt.Errorf("reading host capabilities: %w", err)
	}
	if domainType, err = libvirt.DomainType(capsXML, hostArch); err != nil {
		return "", "", err
	}
	var caps libvirtxml.Caps
	if err := caps.Unmarshal(capsXML); err != nil {
		return "", "", fmt.Errorf("reading host capabilities: %w", err)
	}
	if caps.Host.CPU != nil {
		vendor = caps.Host.CPU.Vendor
	}
	return domainType, vendor, nil
}

// virtualisation is what hostVirtualisation found on one connection.
type virtualisation struct{ domainType, vendor string }

// byConnection holds each live connection's virtualisation (*libvirt.Client → virtualisation):
// a host's capabilities do not change under a connection (libvirtd reads them at its start),
// and every pass would otherwise fetch and parse the whole capabilities XML. An entry goes when
// its connection ends.
var byConnection sync.Map

// connectionVirtualisation is hostVirtualisation, read once per connection.
func connectionVirtualisation(ctx context.Context, c *libvirt.Client) (domainType, vendor string, err error) {
	if v, ok := byConnection.Load(c); ok {
		got := v.(virtualisation)
		return got.domainType, got.vendor, nil
	}
	if domainType, vendor, err = hostVirtualisation(ctx, c); err != nil {
		return "", "", err
	}
	if _, loaded := byConnection.LoadOrStore(c, virtualisation{domainType, vendor}); !loaded {
		go func() {
			<-c.Done()
			byConnection.Delete(c)
		}()
	}
	return domainType, vendor, nil
}

// isRunning counts every state in which the domain holds its resources.
func isRunning(s libvirt.DomainState) bool {
	switch s {
	case libvirt.DomainRunning, libvirt.DomainBlocked, libvirt.DomainPaused, libvirt.DomainShuttingDown, libvirt.DomainPMSuspended:
		return true
	}
	return false
}

// usableAddress drops loopback and link-local addresses, which say nothing about how to reach
// the guest.
func usableAddress(a string) bool {
	l := strings.ToLower(a)
	for _, p := range []string{"127.", "169.254.", "fe8", "fe9", "fea", "feb"} {
		if strings.HasPrefix(l, p) {
			return false
		}
	}
	return l != "::1"
}

func ptrTrue(b *bool) bool { return b != nil && *b }
