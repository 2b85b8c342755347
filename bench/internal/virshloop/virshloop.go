//go:build bench || loadbench

// Package virshloop is the reference bench/provision and bench/load compare banlieue with: the
// libvirt work banlieue does for a VM, done with virsh one VM after the other, as an operator's
// script would. Each VM is one virsh process (one TLS connection, commands separated by ";").
package virshloop

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Host is the libvirtd the loop works on, and the pool whose backing volume the VMs' overlays
// are made over.
type Host struct {
	URI     string // with its pkipath, e.g. qemu+tls://127.0.0.1/system?pkipath=DIR
	Pool    string
	Backing string // a raw volume of Pool
}

// Template is banlieue's own definition of a VM, which every VM of the loop gets renamed.
type Template struct {
	domain string
	xml    string
	// seed is a local copy of the template's seed volume, uploaded as every VM's seed; empty when
	// the loop leaves the seed out. seedSize is its size in bytes, each seed volume's capacity.
	seed     string
	seedSize int64
}

var (
	uuidRE     = regexp.MustCompile(`(?s)\s*<uuid>.*?</uuid>`)
	metadataRE = regexp.MustCompile(`(?s)\s*<metadata>.*?</metadata>`)
	cdromRE    = regexp.MustCompile(`(?s)\s*<disk type='file' device='cdrom'>.*?</disk>`)
)

// TemplateOf reads domain's inactive definition from the host. Its UUID is left out (libvirt
// assigns one per define) and so is its metadata, so that no VM of the loop carries banlieue's
// proof of ownership. With seed, the domain's seed volume (volume) is downloaded into dir and
// every VM gets a copy of it uploaded, as banlieue uploads one per machine; without, the seed
// CD-ROM is left out of the definition.
func (h Host) TemplateOf(domain, volume, dir string, seed bool) (Template, error) {
	out, err := exec.Command("virsh", "-q", "-c", h.URI, "dumpxml", "--inactive", domain).Output()
	if err != nil {
		return Template{}, fmt.Errorf("dumpxml %s: %w", domain, err)
	}
	t := Template{domain: domain, xml: metadataRE.ReplaceAllString(uuidRE.ReplaceAllString(string(out), ""), "")}
	if !seed {
		t.xml = cdromRE.ReplaceAllString(t.xml, "")
		return t, nil
	}
	if !strings.Contains(volume, domain) {
		// The VMs' seed volumes are named by renaming the template's, as their paths in the XML are.
		return Template{}, fmt.Errorf("seed volume %s is not named after domain %s", volume, domain)
	}
	t.seed = filepath.Join(dir, volume)
	if err := h.Run(fmt.Sprintf("vol-download --pool %s %s %s", h.Pool, volume, t.seed)); err != nil {
		return Template{}, err
	}
	st, err := os.Stat(t.seed)
	if err != nil {
		return Template{}, err
	}
	t.seedSize = st.Size()
	return t, nil
}

// Create defines the VMs named doms one after the other, starting each when on: the overlay
// volume, the seed volume and its upload (when the template has a seed), the define. It returns
// each VM's time. The definitions are written into dir. On an error, what was created is removed.
func (h Host) Create(t Template, doms []string, dir string, on bool) ([]time.Duration, error) {
	var each []time.Duration
	for i, dom := range doms {
		file := filepath.Join(dir, dom+".xml")
		if err := os.WriteFile(file, []byte(strings.ReplaceAll(t.xml, t.domain, dom)), 0o644); err != nil {
			return nil, err
		}
		cmds := fmt.Sprintf("vol-create-as %s %s-os.qcow2 1G --format qcow2 --backing-vol %s --backing-vol-format raw ; ",
			h.Pool, dom, h.Backing)
		if t.seed != "" {
			seed := h.seedVolume(t, dom)
			cmds += fmt.Sprintf("vol-create-as %s %s %d --format raw ; vol-upload --pool %s %s %s ; ", h.Pool, seed, t.seedSize, h.Pool, seed, t.seed)
		}
		cmds += "define " + file
		if on {
			cmds += " ; start " + dom
		}
		t0 := time.Now()
		if err := h.Run(cmds); err != nil {
			for _, d := range doms[:i+1] {
				h.remove(t, d, on)
			}
			return nil, err
		}
		each = append(each, time.Since(t0))
	}
	return each, nil
}

// Delete does what banlieue's teardown does, one VM after the other: destroy (when on), undefine,
// and the VM's volumes deleted.
func (h Host) Delete(t Template, doms []string, on bool) error {
	for _, dom := range doms {
		if err := h.Run(strings.Join(h.teardown(t, dom, on), " ; ")); err != nil {
			return err
		}
	}
	return nil
}

// remove is Delete's work for one VM that may be partly created, each command in a virsh of its
// own so that a step with nothing to do does not stop the others; best effort, for a failed run.
func (h Host) remove(t Template, dom string, on bool) {
	for _, cmd := range h.teardown(t, dom, on) {
		_ = h.Run(cmd)
	}
}

// teardown is the virsh commands that remove dom.
func (h Host) teardown(t Template, dom string, on bool) []string {
	var cmds []string
	if on {
		cmds = append(cmds, "destroy "+dom)
	}
	cmds = append(cmds, "undefine "+dom, fmt.Sprintf("vol-delete --pool %s %s-os.qcow2", h.Pool, dom))
	if t.seed != "" {
		cmds = append(cmds, fmt.Sprintf("vol-delete --pool %s %s", h.Pool, h.seedVolume(t, dom)))
	}
	return cmds
}

// seedVolume is dom's seed volume, named as the template's is.
func (h Host) seedVolume(t Template, dom string) string {
	return strings.ReplaceAll(filepath.Base(t.seed), t.domain, dom)
}

// Run runs one virsh process with the given ;-separated commands.
func (h Host) Run(cmds string) error {
	out, err := exec.Command("virsh", "-q", "-c", h.URI, cmds).CombinedOutput()
	if err != nil {
		return fmt.Errorf("virsh %s: %v\n%s", cmds, err, out)
	}
	return nil
}
