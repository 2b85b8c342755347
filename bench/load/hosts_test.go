//go:build loadbench

package load

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/internal/testenv/labhost"
	"banlieue.io/banlieue/pkg/libvirt"
)

// fleetDir is where hosts.sh keeps the simulated hosts' state; removed when the bench ends.
const fleetDir = "/var/tmp/banlieue-fleet"

// benchHost is one host the bench loads: its libvirtd, the Provider namespace that reaches it,
// the run's pool on it and what the host held before the run.
type benchHost struct {
	lab testenv.LibvirtLab
	// ns holds the host's Provider, named provider, and its VMs: a team per host.
	ns, provider string
	conn         *libvirt.Client
	pool         libvirt.StoragePool
	before       []string
}

// labs are the hosts of the run: the lab host of BANLIEUE_LIBVIRT_LAB, or with -hosts N that
// many libvirtds started by hosts.sh (stopped and removed when t ends).
func labs(t *testing.T) []testenv.LibvirtLab {
	if *hostsN == 0 {
		return []testenv.LibvirtLab{testenv.RequireLibvirtLab(t)}
	}
	script := filepath.Join(testenv.RepoRoot(), "bench", "load", "hosts.sh")
	stop := func() {
		_ = exec.Command(script, "stop", fleetDir).Run()
		_ = os.RemoveAll(fleetDir)
	}
	stop() // a run killed before its cleanup
	t.Cleanup(stop)
	start := time.Now()
	cmd := exec.Command(script, "start", fmt.Sprint(*hostsN), fleetDir)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	must(t, cmd.Run())
	t.Logf("%d hosts started in %s", *hostsN, time.Since(start).Round(time.Millisecond))
	f, err := os.Open(filepath.Join(fleetDir, "hosts"))
	must(t, err)
	defer func() { _ = f.Close() }()
	var out []testenv.LibvirtLab
	for s := bufio.NewScanner(f); s.Scan(); {
		var i, port int
		var dir string
		if _, err := fmt.Sscan(s.Text(), &i, &port, &dir); err != nil {
			t.Fatalf("%s/hosts: %q: %v", fleetDir, s.Text(), err)
		}
		out = append(out, testenv.LibvirtLab{Dir: dir, Endpoint: fmt.Sprintf("qemu+tls://127.0.0.1:%d/system", port),
			PKI: filepath.Join(fleetDir, "pki")})
	}
	if len(out) != *hostsN {
		t.Fatalf("%s/hosts lists %d hosts, want %d", fleetDir, len(out), *hostsN)
	}
	return out
}

// prepareHosts gives every host the run's pool (named run) holding the boot volume, and records
// what each host holds then; eight hosts at a time.
func prepareHosts(ctx context.Context, t *testing.T, run string) []*benchHost {
	all := labs(t)
	hosts := make([]*benchHost, len(all))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []string
	sem := make(chan struct{}, 8)
	for i, lab := range all {
		h := &benchHost{lab: lab, ns: run, provider: "lab", conn: labhost.Dial(t, lab)}
		if *hostsN > 0 {
			// A fleet's hosts have names of their own, as its Providers do.
			h.ns, h.provider = fmt.Sprintf("%s-h%03d", run, i), fmt.Sprintf("host-%03d", i)
		}
		hosts[i] = h
		// CreatePool registers its cleanup with t, which must happen on this goroutine.
		h.pool = labhost.CreatePool(ctx, t, h.conn, lab, run)
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			_, err := h.conn.StorageVolCreateXML(ctx, h.pool, fmt.Sprintf(`<volume type='file'><name>%s</name><capacity unit='bytes'>%d</capacity>`+
				`<target><format type='raw'/></target></volume>`, boot, 1<<20), 0)
			var state []string
			if err == nil {
				state, err = hostState(ctx, h.conn)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = append(failed, fmt.Sprintf("%s: %v", lab.Endpoint, err))
			}
			h.before = state
		}()
	}
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("preparing hosts: %s", strings.Join(failed, "; "))
	}
	return hosts
}

// hostState is every domain on the host and every volume of every active pool.
func hostState(ctx context.Context, c *libvirt.Client) ([]string, error) {
	doms, err := c.ListAllDomains(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range doms {
		out = append(out, "domain "+d.Name)
	}
	pools, err := c.ListAllStoragePools(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range pools {
		vols, err := c.StoragePoolListAllVolumes(ctx, p)
		if err != nil {
			continue // a pool another suite is tearing down
		}
		for _, v := range vols {
			out = append(out, "volume "+p.Name+"/"+v.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}
