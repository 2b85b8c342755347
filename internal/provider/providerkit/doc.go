// Package providerkit is what every provider role shares, whatever its backend: the Provider's
// status as a probe publishes it (conditions, failure domains, the write skipped when nothing
// changed, the reachability events and the failure-domain metric), the lookup that starts each
// probe, and the per-machine user-data Secret read. It knows no hypervisor: the libvirt and
// vsphere provider roles each probe their own and hand the result here.
package providerkit
