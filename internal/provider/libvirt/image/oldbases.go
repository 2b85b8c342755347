package image

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	"libvirt.org/go/libvirtxml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/imagebuilder/checksum"
	providerlibvirt "banlieue.io/banlieue/internal/provider/libvirt"
	"banlieue.io/banlieue/pkg/libvirt"
)

// Old bases. A rebuilt artifact is imported into a volume of its own and the row
// moves to it; machines built on the previous volume keep their overlays backing onto it. Such
// an old base is deleted only when no volume of its pool backs onto it and no LibvirtMachine
// of the Provider names it, and only when banlieue can prove it wrote it: its name is this
// VMImage's providerlibvirt.ArtifactVolumeName for the digest its complete marker records. Whatever cannot be
// established in a pass (an API or libvirt call failing, a marker not readable, a pool too
// large to scan) keeps every base of the pool for that pass.

const (
	// defaultOldBaseGrace is how long after the import of the current artifact finished its
	// predecessors stay whatever else holds: a VirtualMachine controller whose cache still
	// shows the previous row could create a LibvirtMachine naming the old base after this
	// pass listed the machines, and a minute covers a lagging watch or a relist.
	defaultOldBaseGrace = time.Minute
	// maxBackingScan bounds the volume XML read in one pool per pass. A pool holding more
	// volumes that could back onto a base cannot be proven free of overlays in one pass, so
	// its old bases stay (logged); the bound keeps a pass well inside reconcileTimeout.
	maxBackingScan = 1024
)

// oldBase is a volume of one pool named as an import of the VMImage other than its current
// one, listed together with its marker volume.
type oldBase struct {
	vol, marker libvirt.StorageVol
	// digest is the 16 hex digits of the artifact's sha256 that the name carries.
	digest string
}

// oldBaseCandidates are the pool's volumes named as imports of vmimage, but current, that
// have a marker volume next to them. A volume without one is not provably banlieue's: another
// tool's, or (see deleteOldBase) one whose deletion was cut after its marker went; either way
// it is never touched.
func oldBaseCandidates(vmimage, current string, vols []libvirt.StorageVol) []oldBase {
	byName := make(map[string]libvirt.StorageVol, len(vols))
	for _, v := range vols {
		byName[v.Name] = v
	}
	var out []oldBase
	for _, v := range vols {
		if v.Name == current {
			continue
		}
		digest, ok := providerlibvirt.ArtifactVolumeDigest(vmimage, v.Name)
		if !ok {
			continue
		}
		if marker, ok := byName[markerName(v.Name)]; ok {
			out = append(out, oldBase{vol: v, marker: marker, digest: digest})
		}
	}
	slices.SortFunc(out, func(a, b oldBase) int { return strings.Compare(a.vol.Name, b.vol.Name) })
	return out
}

// markerFacts is what reading a base's marker gave.
type markerFacts struct {
	// ok is false when the marker could not be read or does not hold banlieue's format.
	ok     bool
	state  markerState
	digest checksum.Digest
}

// proves reports whether the marker proves that banlieue imported the base completely: a
// complete sha256 marker whose digest begins with the digits the base's name carries. A
// complete marker of another digest (a by-hand import under a --volume-name that looks like
// an import Job's) or of another algorithm proves nothing about the name.
func (m markerFacts) proves(b oldBase) bool {
	return m.ok && m.state == complete && m.digest.Alg == "sha256" && strings.HasPrefix(m.digest.Hex, b.digest)
}

// baseEvidence is what one pass established about one pool.
type baseEvidence struct {
	// machinesRead is false when the LibvirtMachines could not be listed.
	machinesRead bool
	// referenced are the boot volumes that LibvirtMachines of the Provider name in the pool.
	referenced map[string]bool
	// pinnedRead is false when the VMImages could not be listed.
	pinnedRead bool
	// pinned are the volumes a BackingFile VMImage names: its row would lose its volume.
	pinned map[string]bool
	// markers are the markers read, by base volume name.
	markers map[string]markerFacts
	// scanned is true when every volume of the pool that can back onto a base had its XML
	// read in this pass; backing holds the backingStore paths found.
	scanned bool
	backing []string
}

// baseVerdict is the decision about one old base: remove, or keep and why.
type baseVerdict struct {
	base   oldBase
	remove bool
	why    string
}

// decideOldBases is the whole rule, free of I/O: a base goes only when every fact that could
// keep it was established and none does.
func decideOldBases(bases []oldBase, ev baseEvidence) []baseVerdict {
	out := make([]baseVerdict, 0, len(bases))
	for _, b := range bases {
		v := baseVerdict{base: b}
		m, read := ev.markers[b.vol.Name]
		switch {
		case !ev.machinesRead:
			v.why = "the LibvirtMachines could not be listed"
		case ev.referenced[b.vol.Name]:
			v.why = "a LibvirtMachine boots from it"
		case !ev.pinnedRead:
			v.why = "the VMImages could not be listed"
		case ev.pinned[b.vol.Name]:
			v.why = "a BackingFile VMImage names it"
		case !read || !m.ok:
			v.why = "its marker was not read, or is not banlieue's"
		case !m.proves(b):
			v.why = fmt.Sprintf("its marker (%s, %s) does not prove a complete import of the digest its name carries", m.digest, stateName(m.state))
		case !ev.scanned:
			v.why = "the pool's volumes were not all read"
		case backsOnto(ev.backing, b.vol):
			v.why = "a volume of the pool backs onto it"
		default:
			v.remove, v.why = true, "nothing backs onto it or boots from it"
		}
		out = append(out, v)
	}
	return out
}

func stateName(s markerState) string {
	if s == complete {
		return "complete"
	}
	return "importing"
}

// backsOnto reports whether any backingStore path names base: its path (the volume key of a
// file pool, which is what a machine's overlay is created on), or any path ending in its file
// name. The second is wider than needed: it also keeps a base when an overlay backs onto a
// file of that name reached through a symlink or another spelling of the pool's directory,
// and keeping a base is always the safe mistake.
func backsOnto(backing []string, base libvirt.StorageVol) bool {
	for _, p := range backing {
		if p != "" && (path.Clean(p) == path.Clean(base.Key) || path.Base(p) == base.Name) {
			return true
		}
	}
	return false
}

// bootVolumes are the volumes LibvirtMachines of Provider provider boot from in pool, whatever
// their namespace: a shared Provider's machines live in the namespaces it admits.
func bootVolumes(machines []infrav1.LibvirtMachine, provider types.NamespacedName, pool string) map[string]bool {
	out := map[string]bool{}
	for _, m := range machines {
		if m.ProviderKey() == provider && m.Spec.Pool == pool && m.Spec.BootSource.Volume != "" {
			out[m.Spec.BootSource.Volume] = true
		}
	}
	return out
}

// pinnedVolumes are the volumes that BackingFile VMImages of the libvirt class name.
func pinnedVolumes(images []banlieuev1.VMImage, class string) map[string]bool {
	out := map[string]bool{}
	for i := range images {
		if src, ok := libvirtSource(&images[i], class); ok && src.Kind == banlieuev1.SourceBackingFile {
			out[backingFileVolume(src.Ref)] = true
		}
	}
	return out
}

// publishedOn reports whether the row the last pass published for p (in rows as read before
// this pass) was Ready on volume. Old bases are collected only from the pass after that, so
// that every reader of the VMImage has been shown the new volume before the old one can go.
func publishedOn(rows []banlieuev1.ProviderImageStatus, p *banlieuev1.Provider, volume string) bool {
	for _, r := range rows {
		if r.ProviderNamespace == p.Namespace && r.ProviderName == p.Name {
			return r.Ready && r.ResolvedRef == volume
		}
	}
	return false
}

// oldBaseGrace is the grace in use.
func (r *Reconciler) oldBaseGrace() time.Duration {
	if r.OldBaseGrace > 0 {
		return r.OldBaseGrace
	}
	return defaultOldBaseGrace
}

// importsSettled reports how long old bases must still wait: until oldBaseGrace has passed
// since the last of the current artifact's import Jobs of p finished. A Job that is not a
// finished import of the current artifact (which a Ready row should exclude) is an error:
// then nothing is collected.
func (r *Reconciler) importsSettled(ctx context.Context, img *banlieuev1.VMImage, p *banlieuev1.Provider, pools []string) (time.Duration, error) {
	var wait time.Duration
	for _, pool := range pools {
		var job batchv1.Job
		key := client.ObjectKey{Namespace: r.BuildNamespace, Name: ImportJobName(img.Name, p.Namespace, p.Name, pool)}
		if err := r.jobs().Get(ctx, key, &job); err != nil {
			return 0, fmt.Errorf("reading import Job %s: %w", key, err)
		}
		stale, conflict := jobOwnership(img, p, pool, r.expectedJob(ctx, img, p, pool, &job), &job)
		if stale || conflict != "" || job.Status.Succeeded == 0 || job.Status.CompletionTime == nil {
			return 0, fmt.Errorf("import Job %s is not a finished import of the current artifact", key)
		}
		wait = max(wait, r.oldBaseGrace()-time.Since(job.Status.CompletionTime.Time))
	}
	return wait, nil
}

// collectOldBases deletes the old bases of img that nothing holds in every pool of p, the row
// of p being Ready on current. It never fails the pass: whatever goes wrong keeps the bases,
// and is logged. It returns how long to wait before the grace allows a look (0: not waiting).
func (r *Reconciler) collectOldBases(ctx context.Context, img *banlieuev1.VMImage, p *banlieuev1.Provider, current string) time.Duration {
	logger := log.FromContext(ctx).WithValues("provider", p.Namespace+"/"+p.Name)
	pools := targetPools(p)
	wait, err := r.importsSettled(ctx, img, p, pools)
	if err != nil {
		logger.V(1).Info("old bases kept", "error", err.Error())
		return 0
	}
	if wait > 0 {
		return wait
	}
	connectCtx, cancel := context.WithTimeout(ctx, callTimeout)
	host, err := r.Connections.Connect(connectCtx, r.APIReader, p)
	cancel()
	if err != nil {
		logger.Info("old bases kept: cannot reach the Provider's host", "error", err.Error())
		return 0
	}
	g := &baseCollector{r: r, host: host, img: img, provider: p, current: current, log: logger}
	for _, pool := range pools {
		g.pool(ctx, pool)
	}
	return 0
}

// baseCollector is one pass of collectOldBases; the VMImage list is read once per pass.
type baseCollector struct {
	r        *Reconciler
	host     *libvirt.Client
	img      *banlieuev1.VMImage
	provider *banlieuev1.Provider
	current  string
	log      logr.Logger
	pinned   map[string]bool
	listed   bool
}

// pool collects the old bases of one pool. The facts are gathered cheapest first, and each
// step runs only while some base may still go; decideOldBases, given all of them, decides.
func (g *baseCollector) pool(ctx context.Context, name string) {
	logger := g.log.WithValues("pool", name)
	pool, vols, err := g.listPool(ctx, name)
	if err != nil {
		logger.Info("old bases kept", "error", err.Error())
		return
	}
	bases := oldBaseCandidates(g.img.Name, g.current, vols)
	if len(bases) == 0 {
		return
	}
	ev := baseEvidence{markers: map[string]markerFacts{}}
	ev.pinned, ev.pinnedRead = g.pinnedVolumes(ctx)
	// The machines first: the usual reason an old base stays is a machine still built on it,
	// and knowing that costs one list instead of a marker read and a scan of the pool.
	ev.referenced, ev.machinesRead = g.bootVolumes(ctx, name)
	t := target{host: g.host, pool: pool}
	proven := false
	for _, b := range bases {
		if !ev.machinesRead || ev.referenced[b.vol.Name] || !ev.pinnedRead || ev.pinned[b.vol.Name] {
			continue
		}
		t.volume, t.marker = b.vol.Name, b.marker.Name
		state, d, err := t.readMarker(ctx, b.marker)
		if err != nil {
			// Usually another tool's volume named like an old base: nothing to act on, and
			// reported at every pass, so not at the default level.
			logger.V(1).Info("old base kept", "volume", b.vol.Name, "error", err.Error())
			continue
		}
		m := markerFacts{ok: true, state: state, digest: d}
		ev.markers[b.vol.Name] = m
		proven = proven || m.proves(b)
	}
	if !proven {
		g.report(logger, decideOldBases(bases, ev))
		return
	}
	ev.backing, ev.scanned = g.scanBacking(ctx, logger, pool)
	// The machines again, just before deleting: a LibvirtMachine created during the scan
	// (whose overlay the scan may have missed) is seen here.
	ev.referenced, ev.machinesRead = g.bootVolumes(ctx, name)
	verdicts := decideOldBases(bases, ev)
	g.report(logger, verdicts)
	for _, v := range verdicts {
		if v.remove {
			g.deleteOldBase(ctx, logger, v.base)
		}
	}
}

func (g *baseCollector) report(logger logr.Logger, verdicts []baseVerdict) {
	for _, v := range verdicts {
		if !v.remove {
			logger.V(1).Info("old base kept", "volume", v.base.vol.Name, "why", v.why)
		}
	}
}

func (g *baseCollector) listPool(ctx context.Context, name string) (libvirt.StoragePool, []libvirt.StorageVol, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	pool, err := g.host.StoragePoolLookupByName(ctx, name)
	if err != nil {
		return pool, nil, fmt.Errorf("looking pool %s up: %w", name, err)
	}
	vols, err := g.host.StoragePoolListAllVolumes(ctx, pool)
	if err != nil {
		return pool, nil, fmt.Errorf("listing volumes of pool %s: %w", name, err)
	}
	return pool, vols, nil
}

// bootVolumes lists the LibvirtMachines through the uncached reader: a cache lagging behind a
// machine created a moment ago must not let its base go.
func (g *baseCollector) bootVolumes(ctx context.Context, pool string) (map[string]bool, bool) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	var list infrav1.LibvirtMachineList
	if err := g.r.APIReader.List(ctx, &list); err != nil {
		g.log.Info("old bases kept: listing LibvirtMachines failed", "error", err.Error())
		return nil, false
	}
	return bootVolumes(list.Items, client.ObjectKeyFromObject(g.provider), pool), true
}

func (g *baseCollector) pinnedVolumes(ctx context.Context) (map[string]bool, bool) {
	if !g.listed {
		ctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		var list banlieuev1.VMImageList
		if err := g.r.Client.List(ctx, &list); err != nil {
			g.log.Info("old bases kept: listing VMImages failed", "error", err.Error())
			return nil, false
		}
		g.pinned, g.listed = pinnedVolumes(list.Items, providerlibvirt.ClassName), true
	}
	return g.pinned, true
}

// scanBacking reads the backingStore of every volume of the pool but markers and ISOs (neither
// is an overlay), after a refresh so that a file put there behind libvirt's back (a qemu-img
// overlay made by hand) is listed too. ok is false when anything was not read: a refresh
// refused (libvirt refuses one while an upload into the pool runs), a call failing, XML not
// parsed, or more than maxBackingScan volumes.
func (g *baseCollector) scanBacking(ctx context.Context, logger logr.Logger, pool libvirt.StoragePool) (paths []string, ok bool) {
	refreshCtx, cancel := context.WithTimeout(ctx, callTimeout)
	err := g.host.StoragePoolRefresh(refreshCtx, pool)
	var vols []libvirt.StorageVol
	if err == nil {
		vols, err = g.host.StoragePoolListAllVolumes(refreshCtx, pool)
	}
	cancel()
	if err != nil {
		logger.Info("old bases kept: refreshing and listing the pool failed", "error", err.Error())
		return nil, false
	}
	n := 0
	for _, v := range vols {
		if strings.HasSuffix(v.Name, ".sha256") || strings.HasSuffix(v.Name, ".iso") {
			continue
		}
		if n++; n > maxBackingScan {
			logger.Info("old bases kept: the pool holds more volumes than one pass reads", "limit", maxBackingScan)
			return nil, false
		}
		doc, err := g.volumeXML(ctx, v)
		switch {
		case libvirt.IsNotFound(err):
			continue // deleted since the listing: it backs onto nothing now
		case err != nil:
			logger.Info("old bases kept: reading a volume's XML failed", "volume", v.Name, "error", err.Error())
			return nil, false
		}
		var def libvirtxml.StorageVolume
		if err := def.Unmarshal(doc); err != nil {
			logger.Info("old bases kept: parsing a volume's XML failed", "volume", v.Name, "error", err.Error())
			return nil, false
		}
		if def.BackingStore != nil && def.BackingStore.Path != "" {
			paths = append(paths, def.BackingStore.Path)
		}
	}
	return paths, true
}

func (g *baseCollector) volumeXML(ctx context.Context, v libvirt.StorageVol) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return g.host.StorageVolXMLDesc(ctx, v, 0)
}

// deleteOldBase deletes the marker, then the volume. The order decides what a crash (or a
// failed call) between the two leaves behind:
//
//   - marker first (this order): the volume without its marker. Nothing names it (the row
//     moved away; no machine boots from it, no overlay backs onto it: just checked), and
//     without a marker banlieue can no longer prove it is its own, so it never deletes it or
//     imports over it: one image leaks until an operator removes it (logged here), and a
//     re-import of that very artifact is refused with "not created by a banlieue import".
//   - volume first: a complete marker without its volume. A volume someone else later creates
//     under that name would then carry banlieue's proof of ownership: the next pass would
//     delete it as an old base, and an import of that artifact would take it for its own.
//
// A leak is recoverable; deleting a stranger's volume is not. An in-progress marker (rewriting
// it first, then deleting both) would be no better: left alone, it lets an import of that
// artifact delete whatever volume then holds the name as its own partial upload.
func (g *baseCollector) deleteOldBase(ctx context.Context, logger logr.Logger, b oldBase) {
	t := target{host: g.host, volume: b.vol.Name, marker: b.marker.Name}
	if err := g.deleteVol(ctx, b.marker); err != nil {
		logger.Info("old base kept: deleting its marker failed", "volume", b.vol.Name, "marker", b.marker.Name, "error", err.Error())
		return
	}
	if err := t.delete(ctx, b.vol); err != nil {
		logger.Error(err, "old base left without its marker: banlieue will not touch it again; delete it by hand (virsh vol-delete)",
			"volume", b.vol.Name)
		return
	}
	logger.Info("deleted old base", "volume", b.vol.Name, "marker", b.marker.Name, "key", b.vol.Key)
}

// deleteVol deletes v; unlike target.delete, a volume already gone is an error: a marker that
// vanished since it was read means someone else acts on this base, and its volume is left.
func (g *baseCollector) deleteVol(ctx context.Context, v libvirt.StorageVol) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return g.host.StorageVolDelete(ctx, v)
}

// machineImages maps a deleted LibvirtMachine to the VMImages whose import volume it booted
// from: its deletion (after its teardown deleted its overlay) may free an old base.
func (r *Reconciler) machineImages(ctx context.Context, o client.Object) []reconcile.Request {
	m, ok := o.(*infrav1.LibvirtMachine)
	if !ok || r.ProviderName != "" && m.ProviderKey().Name != r.ProviderName {
		return nil
	}
	var list banlieuev1.VMImageList
	if err := r.Client.List(ctx, &list); err != nil {
		log.FromContext(ctx).Error(err, "listing VMImages for a deleted LibvirtMachine")
		return nil
	}
	var reqs []reconcile.Request
	for _, img := range list.Items {
		if _, ok := providerlibvirt.ArtifactVolumeDigest(img.Name, m.Spec.BootSource.Volume); ok {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Name: img.Name}})
		}
	}
	return reqs
}
