package vsphere

import (
	"maps"
	"slices"
	"strings"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// Target keys of the vSphere capability mappings (docs/guides/vsphere-provider.md, "2.
// Register the Provider").
const (
	targetDatastore = "datastore"
	targetPortGroup = "portGroup"
)

// Labels of a vSphere failure domain that carry its vSphere tags, under the keys Kubernetes
// nodes carry them, so that a topologyKey means the same for VMs and nodes.
const (
	LabelRegion = "topology.kubernetes.io/region"
	LabelZone   = "topology.kubernetes.io/zone"
)

// maxDatastores bounds capacity.datastores (its CRD maxItems).
const maxDatastores = 64

// featureVTPM is the Provider feature that declares a key provider for virtual TPMs.
const featureVTPM = "vtpm"

// providerQuery is what a probe asks of the inventory: the datastores and port groups the
// Provider's storage and network classes map to, each once, and the vTPM the Provider declares.
func providerQuery(p *banlieuev1.Provider, folder string) FailureDomainQuery {
	q := FailureDomainQuery{Folder: folder, VTPM: slices.Contains(p.Spec.Capabilities.Features, featureVTPM)}
	for _, sc := range p.Spec.Capabilities.StorageClasses {
		if ds, ok := sc.Target[targetDatastore]; ok && !slices.Contains(q.Datastores, ds) {
			q.Datastores = append(q.Datastores, ds)
		}
	}
	for _, nc := range p.Spec.Capabilities.NetworkClasses {
		if pg, ok := nc.Target[targetPortGroup]; ok && !slices.Contains(q.Networks, pg) {
			q.Networks = append(q.Networks, pg)
		}
	}
	return q
}

// providerFailureDomains is the Provider's status.failureDomains for the inventory's compute
// clusters fds (already narrowed to providerQuery's datastores and port groups): each cluster
// offers the declared classes whose target is reachable there. missing lists each declared
// class reachable in no cluster, or with no target of its kind ("storageClass fast (datastore
// ssd)"), and an inventory without a compute cluster: the Provider is then not Ready
// (CapabilitiesIncomplete), as a libvirt host lacking a pool is.
func providerFailureDomains(p *banlieuev1.Provider, fds []FailureDomain) (out []banlieuev1.FailureDomain, missing []string) {
	caps := p.Spec.Capabilities
	if len(fds) == 0 {
		missing = append(missing, "compute cluster (none in the inventory)")
	}
	storageSeen, networkSeen := map[string]bool{}, map[string]bool{}
	for _, fd := range fds {
		labels := maps.Clone(p.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		labels["name"] = fd.Name
		if fd.Region != "" {
			labels[LabelRegion] = fd.Region
		}
		if fd.Zone != "" {
			labels[LabelZone] = fd.Zone
		}
		var storage, networks []string
		for _, sc := range caps.StorageClasses {
			if ds, ok := sc.Target[targetDatastore]; ok && slices.Contains(fd.Datastores, ds) {
				storage = append(storage, sc.Name)
				storageSeen[sc.Name] = true
			}
		}
		for _, nc := range caps.NetworkClasses {
			if pg, ok := nc.Target[targetPortGroup]; ok && slices.Contains(fd.Networks, pg) {
				networks = append(networks, nc.Name)
				networkSeen[nc.Name] = true
			}
		}
		features := slices.Clone(caps.Features)
		if !fd.VTPM {
			features = slices.DeleteFunc(features, func(f string) bool { return f == featureVTPM })
		}
		raw := map[string]string{
			"endpoint":     p.Spec.Connection.Endpoint,
			"datacenter":   fd.Datacenter,
			"cluster":      fd.Cluster,
			"resourcePool": fd.ResourcePool,
			"datastores":   strings.Join(fd.Datastores, ","),
			"portGroups":   strings.Join(fd.Networks, ","),
		}
		if fd.Region != "" {
			raw["region"] = fd.Region
		}
		if fd.Zone != "" {
			raw["zone"] = fd.Zone
		}
		d := banlieuev1.FailureDomain{Name: fd.Name, Labels: labels, Attributes: banlieuev1.FailureDomainAttributes{
			AvailableStorageClasses: storage, AvailableNetworkClasses: networks, Features: features, Raw: raw}}
		// Datastore space is published only beside the cluster's size: a capacity without CPUs
		// would read as a cluster with none to the scheduler.
		if fd.CPUs > 0 {
			d.Capacity = &banlieuev1.FailureDomainCapacity{CPUs: fd.CPUs, MemoryMiB: fd.MemoryMiB}
			for _, sp := range fd.DatastoreSpace {
				if len(d.Capacity.Datastores) < maxDatastores {
					d.Capacity.Datastores = append(d.Capacity.Datastores, banlieuev1.PoolCapacity{Name: sp.Name, CapacityGiB: sp.CapacityGiB, AvailableGiB: sp.FreeGiB})
				}
			}
		}
		out = append(out, d)
	}
	for _, sc := range caps.StorageClasses {
		missing = appendMissing(missing, "storageClass", sc.Name, targetDatastore, sc.Target, storageSeen[sc.Name] || len(fds) == 0)
	}
	for _, nc := range caps.NetworkClasses {
		missing = appendMissing(missing, "networkClass", nc.Name, targetPortGroup, nc.Target, networkSeen[nc.Name] || len(fds) == 0)
	}
	return out, missing
}

// appendMissing adds a declared class to missing when it has no target of key, or its target
// was reached nowhere (reached false): "storageClass fast (datastore ssd)".
func appendMissing(missing []string, kind, name, key string, target map[string]string, reached bool) []string {
	switch v, ok := target[key]; {
	case !ok:
		return append(missing, kind+" "+name+" (no "+key+" target)")
	case !reached:
		return append(missing, kind+" "+name+" ("+key+" "+v+")")
	}
	return missing
}
