//go:build bench

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"

	"banlieue.io/banlieue/pkg/libvirt"
)

// downloads times dense and sparse downloads by pkg/libvirt (StorageVolDownloadObserved into a
// file, bounded by the volume's capacity, as an export does, without the digest) and by
// `virsh vol-download` (--sparse for the sparse volume), each in a child process whose peak RSS is
// reported, alternating tools for several rounds. The volumes are uploaded once beforehand.
func (b *bench) downloads(denseSize, sparseSize, sparseData int64, rounds int) error {
	ctx := context.Background()
	c, err := b.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	work, pool, cleanup, err := b.scratchPool(ctx, c)
	if err != nil {
		return err
	}
	defer cleanup()

	fmt.Printf("\npreparing %s dense and %s sparse (%s data) volumes...\n", size(denseSize), size(sparseSize), size(sparseData))
	cases := []struct {
		name, vol string
		length    int64
		sparse    bool
	}{
		{"dense " + size(denseSize), "dense", denseSize, false},
		{"sparse " + size(sparseSize) + " (" + size(sparseData) + " data)", "sparse", sparseSize, true},
	}
	for _, k := range cases {
		src := filepath.Join(work, k.vol+".raw")
		if k.sparse {
			err = writeSparse(src, k.length, sparseData)
		} else {
			err = writeDense(src, k.length)
		}
		if err != nil {
			return err
		}
		_ = deleteVol(ctx, c, pool, k.vol)
		v, err := c.StorageVolCreateXML(ctx, pool, fmt.Sprintf(`<volume><name>%s</name><capacity unit='bytes'>%d</capacity><allocation>0</allocation><target><format type='raw'/></target></volume>`, k.vol, k.length), 0)
		if err != nil {
			return err
		}
		f, err := os.Open(src)
		if err != nil {
			return err
		}
		err = c.StorageVolUploadSparse(ctx, v, f, nil)
		_ = f.Close() // read only
		_ = os.Remove(src)
		if err != nil {
			return err
		}
	}

	self, err := os.Executable()
	if err != nil {
		return err
	}
	fmt.Printf("download (%d alternating rounds, every round printed; best, median and spread of the times; peak RSS is the highest seen; allocated: the destination's blocks)\n", rounds)
	fmt.Printf("%-34s %10s %10s %12s %12s\n", "", "seconds", "MiB/s", "peak RSS", "allocated")
	for _, k := range cases {
		var results [2]result
		var times [2][]float64
		for round := range rounds {
			for i, tool := range []string{"pkg/libvirt", "virsh"} {
				dst := filepath.Join(work, "out.raw")
				_ = os.Remove(dst)
				var cmd *exec.Cmd
				if tool == "virsh" {
					args := []string{"-q", "-c", b.uri(), "vol-download", "--pool", benchPool, k.vol, dst}
					if k.sparse {
						args = append(args, "--sparse")
					}
					cmd = exec.Command("virsh", args...)
				} else {
					cmd = exec.Command(self, "download", b.pki, k.vol, dst, strconv.Itoa(b.port))
				}
				r, err := run(cmd)
				if err != nil {
					return fmt.Errorf("%s %s: %w", tool, k.name, err)
				}
				fi, err := os.Stat(dst)
				if err != nil {
					return err
				}
				if fi.Size() != k.length {
					return fmt.Errorf("%s %s: downloaded %d bytes, want %d", tool, k.name, fi.Size(), k.length)
				}
				alloc := fi.Sys().(*syscall.Stat_t).Blocks * 512
				if round == 0 || r.elapsed < results[i].elapsed {
					results[i].elapsed = r.elapsed
				}
				results[i].maxRSS = max(results[i].maxRSS, r.maxRSS)
				times[i] = append(times[i], r.elapsed.Seconds())
				fmt.Printf("%-34s %10.2f %10.0f %12s %12s   %s, round %d\n", k.name, r.elapsed.Seconds(),
					float64(k.length)/(1<<20)/r.elapsed.Seconds(), size(r.maxRSS), size(alloc), tool, round+1)
			}
		}
		for i, tool := range []string{"pkg/libvirt", "virsh"} {
			r := results[i]
			fmt.Printf("%-34s %10.2f %10.0f %12s %12s   %s, best (median %.2f s, spread %.2f–%.2f s)\n", k.name, r.elapsed.Seconds(),
				float64(k.length)/(1<<20)/r.elapsed.Seconds(), size(r.maxRSS), "", tool, median(times[i]), slices.Min(times[i]), slices.Max(times[i]))
		}
		fmt.Printf("%-34s pkg/libvirt takes %.2fx virsh's time (best), %.2fx (median)\n", "",
			results[0].elapsed.Seconds()/results[1].elapsed.Seconds(), median(times[0])/median(times[1]))
	}
	for _, k := range cases {
		if err := deleteVol(ctx, c, pool, k.vol); err != nil {
			return err
		}
	}
	return nil
}

// childDownload is the measured process: dial, download into a new file, exit.
func childDownload(args []string) error {
	pki, name, dst := args[0], args[1], args[2]
	port, err := strconv.Atoi(args[3])
	if err != nil {
		return err
	}
	ctx := context.Background()
	c, err := (&bench{pki: pki, port: port}).dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	pool, err := c.StoragePoolLookupByName(ctx, benchPool)
	if err != nil {
		return err
	}
	vol, err := c.StorageVolLookupByName(ctx, pool, name)
	if err != nil {
		return err
	}
	info, err := c.StorageVolGetInfo(ctx, vol)
	if err != nil {
		return err
	}
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	_, err = c.StorageVolDownloadObserved(ctx, vol, f, libvirt.DownloadOptions{Limit: int64(info.Capacity)})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
