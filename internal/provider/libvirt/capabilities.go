package libvirt

import (
	"sort"
	"strings"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/pkg/libvirt"
)

// Target keys of the libvirt capability mappings.
const (
	targetPool    = "pool"
	targetNetwork = "network"
	targetBridge  = "bridge"
)

// hostInventory is what a probe found on the host.
type hostInventory struct {
	pools      []string
	networks   []string
	interfaces []string
	domainType string
	// libVersion is libvirtd's version (major*1_000_000 + minor*1000 + release).
	libVersion uint64
	// cpus and memoryKiB are the host's size (NODE_GET_INFO).
	cpus      int32
	memoryKiB uint64
	// poolSizes are the sizes of the pools the Provider maps, by pool name; a pool not running
	// has none.
	poolSizes map[string]libvirt.StoragePoolInfo
}

// narrowed is the declared capabilities cut down to what the host has.
type narrowed struct {
	storageClasses []string
	networkClasses []string
	// missing lists each declared class the host lacks, as "storageClass X (pool P)".
	missing []string
}

// narrowCapabilities keeps each declared class whose target exists on the host. A class with no
// target is missing too: a Provider must not advertise what it has not verified.
func narrowCapabilities(caps banlieuev1.ProviderCapabilities, host hostInventory) narrowed {
	pools, networks, ifaces := setOf(host.pools), setOf(host.networks), setOf(host.interfaces)
	var n narrowed
	for _, sc := range caps.StorageClasses {
		pool, ok := sc.Target[targetPool]
		switch {
		case !ok:
			n.missing = append(n.missing, "storageClass "+sc.Name+" (no pool target)")
		case !pools[pool]:
			n.missing = append(n.missing, "storageClass "+sc.Name+" (pool "+pool+")")
		default:
			n.storageClasses = append(n.storageClasses, sc.Name)
		}
	}
	for _, nc := range caps.NetworkClasses {
		if network, ok := nc.Target[targetNetwork]; ok {
			if networks[network] {
				n.networkClasses = append(n.networkClasses, nc.Name)
			} else {
				n.missing = append(n.missing, "networkClass "+nc.Name+" (network "+network+")")
			}
			continue
		}
		if bridge, ok := nc.Target[targetBridge]; ok {
			if ifaces[bridge] {
				n.networkClasses = append(n.networkClasses, nc.Name)
			} else {
				n.missing = append(n.missing, "networkClass "+nc.Name+" (bridge "+bridge+")")
			}
			continue
		}
		n.missing = append(n.missing, "networkClass "+nc.Name+" (no network or bridge target)")
	}
	return n
}

// failureDomain is the single failure domain of a libvirt Provider: one host, one boundary.
func failureDomain(p *banlieuev1.Provider, host hostInventory, n narrowed) banlieuev1.FailureDomain {
	labels := map[string]string{}
	for k, v := range p.Labels {
		labels[k] = v
	}
	labels["name"] = p.Name
	return banlieuev1.FailureDomain{
		Name:   p.Name,
		Labels: labels,
		Attributes: banlieuev1.FailureDomainAttributes{
			AvailableStorageClasses: n.storageClasses,
			AvailableNetworkClasses: n.networkClasses,
			Features:                p.Spec.Capabilities.Features,
			Raw: map[string]string{
				"endpoint":   p.Spec.Connection.Endpoint,
				"pools":      joinSorted(host.pools),
				"networks":   joinSorted(host.networks),
				"domainType": host.domainType,
				// Which flags the host accepts follows from it (version.go); operators read it
				// to know which hosts an upgrade must reach first.
				"libvirtVersion": formatLibVersion(host.libVersion),
			},
		},
		Capacity: capacity(host),
	}
}

// capacity is the host's size as the failure domain publishes it: memory in MiB, pools in
// whole GiB rounded down, so that only a change of that size makes the probe write.
func capacity(host hostInventory) *banlieuev1.FailureDomainCapacity {
	if host.cpus == 0 {
		return nil // not read: the scheduler then checks no capacity
	}
	c := &banlieuev1.FailureDomainCapacity{CPUs: host.cpus, MemoryMiB: int64(host.memoryKiB >> 10)}
	names := make([]string, 0, len(host.poolSizes))
	for name := range host.poolSizes {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		info := host.poolSizes[name]
		c.Pools = append(c.Pools, banlieuev1.PoolCapacity{Name: name,
			CapacityGiB: int64(info.Capacity >> 30), AvailableGiB: int64(info.Available >> 30)})
	}
	return c
}

// mappedPools are the pools the Provider's storage classes name, each once.
func mappedPools(caps banlieuev1.ProviderCapabilities) map[string]bool {
	out := map[string]bool{}
	for _, sc := range caps.StorageClasses {
		if pool, ok := sc.Target[targetPool]; ok {
			out[pool] = true
		}
	}
	return out
}

func setOf(names []string) map[string]bool {
	s := make(map[string]bool, len(names))
	for _, n := range names {
		s[n] = true
	}
	return s
}

func joinSorted(names []string) string {
	s := append([]string(nil), names...)
	sort.Strings(s)
	return strings.Join(s, ",")
}
