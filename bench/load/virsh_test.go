//go:build loadbench

package load

import (
	"fmt"
	"testing"
	"time"

	"banlieue.io/banlieue/bench/internal/virshloop"
)

// reference is -virsh: the libvirt work banlieue did for the host's VMs, done again by a
// sequential virsh loop on the same host, in the same run.
type reference struct {
	host     virshloop.Host
	template virshloop.Template
	dir      string
	doms     []string
}

// newReference takes banlieue's definition of the host's first VM and a copy of its seed, while
// they exist.
func newReference(t *testing.T, h *benchHost, run string) *reference {
	r := &reference{host: virshloop.Host{URI: h.lab.Endpoint + "?pkipath=" + h.lab.PKI, Pool: run, Backing: boot}, dir: t.TempDir()}
	domain := h.ns + "-vm-000"
	r.template = must1(r.host.TemplateOf(domain, domain+"-cidata.iso", r.dir, true))(t)
	for i := range *n {
		r.doms = append(r.doms, fmt.Sprintf("%s-virsh-%03d", h.ns, i))
	}
	return r
}

// measure runs the loop, creation then deletion, and prints banlieue's times for the same VMs
// (created, deleted) as ratios of its.
func (r *reference) measure(t *testing.T, created, deleted time.Duration) {
	start := time.Now()
	each := must1(r.host.Create(r.template, r.doms, r.dir, false))(t)
	vc := time.Since(start)
	start = time.Now()
	must(t, r.host.Delete(r.template, r.doms, false))
	vd := time.Since(start)
	var sum time.Duration
	for _, d := range each {
		sum += d
	}
	k := float64(len(r.doms))
	t.Logf("RESULT virsh sequential, the same libvirt work for %d VMs (overlay, seed volume and its upload, define; then undefine, two vol-deletes): "+
		"created in %s (%.1f machines/s, %.0f ms per VM), deleted in %s (%.1f machines/s); banlieue's creation %.2fx virsh's time (%.2fx its rate), its deletion %.2fx virsh's time",
		len(r.doms), vc.Round(time.Millisecond), k/vc.Seconds(), float64(sum.Milliseconds())/k, vd.Round(time.Millisecond), k/vd.Seconds(),
		created.Seconds()/vc.Seconds(), vc.Seconds()/created.Seconds(), deleted.Seconds()/vd.Seconds())
}
