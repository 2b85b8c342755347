package vcenter

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"slices"
	"strings"

	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// Default tag categories, as the vSphere CSI driver and cloud provider read them.
const (
	DefaultRegionCategory = "k8s-region"
	DefaultZoneCategory   = "k8s-zone"
)

// FailureDomainQuery says which failure domains to list and what to narrow them to.
type FailureDomainQuery struct {
	// Datacenters restricts the listing to these inventory paths; empty means all.
	Datacenters []string
	// Datastores and Networks are the names asked for (from the declared storage and network
	// classes); a domain lists those reachable from all its usable hosts, in this order. Empty
	// means: list every reachable one, sorted.
	Datastores, Networks []string
	// RegionCategory and ZoneCategory name the tag categories; empty means the defaults.
	RegionCategory, ZoneCategory string
	// VTPM is declared by the admin and copied to every domain, never discovered (ADR-0039).
	VTPM bool
}

// FailureDomain is one compute cluster.
type FailureDomain struct {
	Name         string // "<datacenter>.<cluster>" sanitised, see DomainName
	Datacenter   string // inventory path, as MachineSpec.Datacenter takes it
	Cluster      string // path below "<datacenter>/host"
	ResourcePool string // the cluster's root pool, as MachineSpec.ResourcePool takes it
	Region, Zone string
	Datastores   []string
	Networks     []string
	VTPM         bool
	// CPUs and MemoryMiB are the cluster's size: its hosts' logical CPUs and memory (the
	// cluster summary's numCpuThreads and totalMemory); zero when vCenter reports none.
	CPUs      int32
	MemoryMiB int64
	// DatastoreSpace is the size and free space of each of Datastores, in the same order.
	DatastoreSpace []DatastoreSpace
}

// DatastoreSpace is one datastore's size and free space, as its summary reports them, rounded
// down to whole GiB so that a probe finding a few bytes more written changes nothing.
type DatastoreSpace struct {
	Name                 string
	CapacityGiB, FreeGiB int64
}

// DomainName is the predictable failure-domain name of a cluster: datacenter path and cluster
// path lower-cased, joined by ".", every other character outside [a-z0-9-] turned into "-",
// at most 63 characters (longer names end in a hash of the original).
func DomainName(datacenter, cluster string) string {
	raw := strings.Trim(datacenter, "/") + "." + strings.Trim(cluster, "/")
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(raw) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.':
			b.WriteRune(r)
			dash = false
		default:
			if !dash {
				b.WriteByte('-')
			}
			dash = true
		}
	}
	name := strings.Trim(b.String(), "-.")
	if len(name) > 63 {
		sum := sha256.Sum256([]byte(raw))
		name = strings.TrimRight(name[:54], "-.") + "-" + hex.EncodeToString(sum[:])[:8]
	}
	return name
}

// FailureDomains lists one failure domain per compute cluster.
func (s *Session) FailureDomains(ctx context.Context, q FailureDomainQuery) ([]FailureDomain, error) {
	if q.RegionCategory == "" {
		q.RegionCategory = DefaultRegionCategory
	}
	if q.ZoneCategory == "" {
		q.ZoneCategory = DefaultZoneCategory
	}
	content := s.vc.ServiceContent

	var dcs []mo.Datacenter
	if err := s.retrieveView(ctx, content.RootFolder, "Datacenter", []string{"name", "parent", "hostFolder"}, &dcs); err != nil {
		return nil, stepErr("list datacenters", err)
	}
	type cluster struct {
		cc        mo.ClusterComputeResource
		dcPath    string
		path      string // below <dc>/host
		ancestors []types.ManagedObjectReference
	}
	var clusters []cluster
	for _, dc := range dcs {
		dcPath, _, err := s.inventoryPath(ctx, dc.Self)
		if err != nil {
			return nil, stepErr("read datacenter path", err)
		}
		if len(q.Datacenters) > 0 && !slices.ContainsFunc(q.Datacenters, func(d string) bool { return strings.Trim(d, "/") == dcPath }) {
			continue
		}
		var ccs []mo.ClusterComputeResource
		if err := s.retrieveView(ctx, dc.HostFolder, "ClusterComputeResource", []string{"name", "parent", "host", "resourcePool", "summary"}, &ccs); err != nil {
			return nil, stepErr("list clusters of "+dcPath, err)
		}
		for _, cc := range ccs {
			p, anc, err := s.inventoryPath(ctx, cc.Self)
			if err != nil {
				return nil, stepErr("read cluster path", err)
			}
			clusters = append(clusters, cluster{cc: cc, dcPath: dcPath, path: strings.TrimPrefix(p, dcPath+"/host/"), ancestors: anc})
		}
	}

	var refs []types.ManagedObjectReference
	for _, c := range clusters {
		for _, r := range c.ancestors {
			if !slices.Contains(refs, r) {
				refs = append(refs, r)
			}
		}
	}
	tagsOf, err := s.tagsByObject(ctx, refs, q)
	if err != nil {
		return nil, err
	}

	var out []FailureDomain
	for _, c := range clusters {
		ds, space, nets, err := s.reachable(ctx, c.cc.Host)
		if err != nil {
			return nil, stepErr("read hosts of cluster "+c.path, err)
		}
		fd := FailureDomain{
			Name:         DomainName(c.dcPath, c.path),
			Datacenter:   c.dcPath,
			Cluster:      c.path,
			ResourcePool: c.path + "/Resources",
			Datastores:   narrow(q.Datastores, ds),
			Networks:     narrow(q.Networks, nets),
			VTPM:         q.VTPM,
		}
		for _, name := range fd.Datastores {
			if sp, ok := space[name]; ok {
				fd.DatastoreSpace = append(fd.DatastoreSpace, sp)
			}
		}
		if c.cc.Summary != nil {
			if sum := c.cc.Summary.GetComputeResourceSummary(); sum != nil {
				fd.CPUs, fd.MemoryMiB = int32(sum.NumCpuThreads), sum.TotalMemory>>20
			}
		}
		fd.Region = nearestTag(tagsOf, c.ancestors, q.RegionCategory)
		fd.Zone = nearestTag(tagsOf, c.ancestors, q.ZoneCategory)
		out = append(out, fd)
	}
	slices.SortFunc(out, func(a, b FailureDomain) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// narrow keeps what was asked for and is reachable, in the asked order; nothing asked means all.
func narrow(asked, reachable []string) []string {
	if len(asked) == 0 {
		return reachable
	}
	var out []string
	for _, a := range asked {
		if slices.Contains(reachable, a) && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// nearestTag is the tag name in category found first on the object or its nearest ancestor
// (cluster, then folders, then the datacenter); of two tags on one object the first by name.
func nearestTag(tagsOf map[string]map[string][]string, chain []types.ManagedObjectReference, category string) string {
	for _, ref := range chain {
		if names := tagsOf[ref.Value][category]; len(names) > 0 {
			return slices.Min(names)
		}
	}
	return ""
}

func (s *Session) retrieveView(ctx context.Context, root types.ManagedObjectReference, kind string, props []string, dst any) error {
	cctx, cancel := s.call(ctx)
	defer cancel()
	v, err := view.NewManager(s.vc).CreateContainerView(cctx, root, []string{kind}, true)
	if err != nil {
		return err
	}
	defer func() { _ = v.Destroy(cctx) }()
	return v.Retrieve(cctx, []string{kind}, props, dst)
}

// inventoryPath is the object's path without the leading "/", and the object followed by its
// ancestors up to, not including, the root folder.
func (s *Session) inventoryPath(ctx context.Context, ref types.ManagedObjectReference) (string, []types.ManagedObjectReference, error) {
	root := s.vc.ServiceContent.RootFolder
	var names []string
	var chain []types.ManagedObjectReference
	for cur := ref; cur != root; {
		var e mo.ManagedEntity
		cctx, cancel := s.call(ctx)
		err := property.DefaultCollector(s.vc).RetrieveOne(cctx, cur, []string{"name", "parent"}, &e)
		cancel()
		if err != nil {
			return "", nil, err
		}
		names = append(names, strings.ReplaceAll(e.Name, "/", "%2f"))
		chain = append(chain, cur)
		if e.Parent == nil || len(chain) > 64 {
			break
		}
		cur = *e.Parent
	}
	slices.Reverse(names)
	return strings.Join(names, "/"), chain, nil
}

// reachable lists the datastores (accessible, with their space by name) and networks that every
// usable host of a cluster sees: connected and not in maintenance mode.
func (s *Session) reachable(ctx context.Context, hosts []types.ManagedObjectReference) ([]string, map[string]DatastoreSpace, []string, error) {
	if len(hosts) == 0 {
		return nil, nil, nil, nil
	}
	var hs []mo.HostSystem
	cctx, cancel := s.call(ctx)
	defer cancel()
	pc := property.DefaultCollector(s.vc)
	if err := pc.Retrieve(cctx, hosts, []string{"datastore", "network", "runtime.connectionState", "runtime.inMaintenanceMode"}, &hs); err != nil {
		return nil, nil, nil, err
	}
	var dsRefs, netRefs []types.ManagedObjectReference
	first := true
	for _, h := range hs {
		if h.Runtime.ConnectionState != types.HostSystemConnectionStateConnected || h.Runtime.InMaintenanceMode {
			continue
		}
		if first {
			dsRefs, netRefs, first = slices.Clone(h.Datastore), slices.Clone(h.Network), false
			continue
		}
		dsRefs = slices.DeleteFunc(dsRefs, func(r types.ManagedObjectReference) bool { return !slices.Contains(h.Datastore, r) })
		netRefs = slices.DeleteFunc(netRefs, func(r types.ManagedObjectReference) bool { return !slices.Contains(h.Network, r) })
	}
	var dsNames, netNames []string
	space := map[string]DatastoreSpace{}
	if len(dsRefs) > 0 {
		var dss []mo.Datastore
		if err := pc.Retrieve(cctx, dsRefs, []string{"name", "summary.accessible", "summary.capacity", "summary.freeSpace"}, &dss); err != nil {
			return nil, nil, nil, err
		}
		for _, d := range dss {
			if d.Summary.Accessible {
				dsNames = append(dsNames, d.Name)
				space[d.Name] = DatastoreSpace{Name: d.Name, CapacityGiB: d.Summary.Capacity >> 30, FreeGiB: d.Summary.FreeSpace >> 30}
			}
		}
	}
	if len(netRefs) > 0 {
		var nets []mo.Network
		if err := pc.Retrieve(cctx, netRefs, []string{"name"}, &nets); err != nil {
			return nil, nil, nil, err
		}
		for _, n := range nets {
			netNames = append(netNames, n.Name)
		}
	}
	slices.Sort(dsNames)
	slices.Sort(netNames)
	return slices.Compact(dsNames), space, slices.Compact(netNames), nil
}

// tagsByObject reads, through the vAPI tagging service (its own REST session, logged in and out
// for this listing), the tags in the region and zone categories attached to refs: object ID ->
// category name -> tag names.
func (s *Session) tagsByObject(ctx context.Context, refs []types.ManagedObjectReference, q FailureDomainQuery) (map[string]map[string][]string, error) {
	out := map[string]map[string][]string{}
	if len(refs) == 0 {
		return out, nil
	}
	cctx, cancel := s.call(ctx)
	defer cancel()
	rc := rest.NewClient(s.vc)
	if err := rc.Login(cctx, url.UserPassword(s.ep.Username, s.ep.Password)); err != nil {
		return nil, stepErr("log in to the tagging service", err)
	}
	defer func() {
		lctx, lcancel := s.call(context.WithoutCancel(ctx))
		defer lcancel()
		_ = rc.Logout(lctx)
	}()
	m := tags.NewManager(rc)
	cats, err := m.GetCategories(cctx)
	if err != nil {
		return nil, stepErr("read tag categories", err)
	}
	catName := map[string]string{}
	for _, c := range cats {
		if c.Name == q.RegionCategory || c.Name == q.ZoneCategory {
			catName[c.ID] = c.Name
		}
	}
	if len(catName) == 0 {
		return out, nil
	}
	objs := make([]mo.Reference, len(refs))
	for i := range refs {
		objs[i] = refs[i]
	}
	attached, err := m.GetAttachedTagsOnObjects(cctx, objs)
	if err != nil {
		return nil, stepErr("read attached tags", err)
	}
	for _, a := range attached {
		id := a.ObjectID.Reference().Value
		for _, t := range a.Tags {
			cat, ok := catName[t.CategoryID]
			if !ok {
				continue
			}
			if out[id] == nil {
				out[id] = map[string][]string{}
			}
			out[id][cat] = append(out[id][cat], t.Name)
		}
	}
	return out, nil
}
