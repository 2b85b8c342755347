//go:build bench

// Command bench compares banlieue's libvirt client (pkg/libvirt) with
// github.com/digitalocean/go-libvirt for RPC round trips, and with `virsh vol-upload` and
// `virsh vol-download` for dense and sparse uploads and downloads, against the lab libvirtd
// (hack/libvirt-lab.sh, or with -port a host of hack/migration-lab.sh).
//
//	go run -tags bench ./bench/libvirt [-lab DIR] [-port 16514] [-only rpc,uploads,downloads] [-duration 5s] [-dense-size 1GiB] [-sparse-size 8GiB] [-sparse-data 512MiB]
//
// Uploads and downloads run in child processes so that each one's peak RSS is its own.
package main

import (
	"banlieue.io/banlieue/bench/internal/program"

	"cmp"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"
	"github.com/digitalocean/go-libvirt/socket/dialers"

	"banlieue.io/banlieue/pkg/libvirt"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "download" {
		if err := childDownload(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "download:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "upload" {
		if err := childUpload(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "upload:", err)
			os.Exit(1)
		}
		return
	}
	lab := flag.String("lab", os.Getenv("BANLIEUE_LIBVIRT_LAB"), "lab directory (hack/libvirt-lab.sh)")
	duration := flag.Duration("duration", 3*time.Second, "time per RPC measurement")
	rounds := flag.Int("rounds", 3, "alternating rounds per case; every round is printed, then the median, best and spread")
	denseSize := flag.Int64("dense-size", 1<<30, "dense upload size in bytes")
	sparseSize := flag.Int64("sparse-size", 8<<30, "sparse upload size in bytes")
	sparseData := flag.Int64("sparse-data", 512<<20, "data bytes in the sparse file")
	port := flag.Int("port", libvirt.DefaultPort, "libvirtd's TLS port on 127.0.0.1")
	only := flag.String("only", "rpc,uploads,downloads", "comma-separated measurements to run")
	flag.Parse()
	if *lab == "" {
		program.Fatal(fmt.Errorf("no lab: pass -lab or set BANLIEUE_LIBVIRT_LAB"))
	}
	b := &bench{pki: filepath.Join(*lab, "pki"), dir: *lab, port: *port}
	run := strings.Split(*only, ",")
	if slices.Contains(run, "rpc") {
		program.Fatal(b.rpc(*duration, *rounds))
	}
	if slices.Contains(run, "uploads") {
		program.Fatal(b.uploads(*denseSize, *sparseSize, *sparseData, *rounds))
	}
	if slices.Contains(run, "downloads") {
		program.Fatal(b.downloads(*denseSize, *sparseSize, *sparseData, *rounds))
	}
}

type bench struct {
	pki, dir string
	port     int
}

// uri is libvirtd's URI for virsh, with the lab's PKI.
func (b *bench) uri() string {
	return fmt.Sprintf("qemu+tls://127.0.0.1:%d/system?pkipath=%s", b.port, b.pki)
}

func (b *bench) dial(ctx context.Context) (*libvirt.Client, error) {
	creds, err := libvirt.ReadPKIDir(b.pki)
	if err != nil {
		return nil, err
	}
	return libvirt.Dialer{Endpoint: libvirt.Endpoint{Host: "127.0.0.1", Port: cmp.Or(b.port, libvirt.DefaultPort)}, Credentials: creds}.Dial(ctx)
}

func (b *bench) dialGoLibvirt() (*golibvirt.Libvirt, error) {
	l := golibvirt.NewWithDialer(dialers.NewTLS("127.0.0.1", dialers.UsePKIPath(b.pki), dialers.UseTLSPort(strconv.Itoa(cmp.Or(b.port, libvirt.DefaultPort)))))
	return l, l.ConnectToURI(golibvirt.QEMUSystem)
}

// Objects the benchmark creates on the lab host and removes afterwards.
const (
	lookupDomain = "bench-lookup"
	benchPool    = "bench-upload"
)

// rpc measures round trips per second for both clients at 1 and 16 concurrent callers. The
// clients take turns for several rounds; every round is printed, then the median, the best
// (which filters out most of the noise of other work on a small shared machine) and the spread,
// so a ratio is never read without how much it moved.
func (b *bench) rpc(d time.Duration, rounds int) error {
	ctx := context.Background()
	ours, err := b.dial(ctx)
	if err != nil {
		return err
	}
	defer ours.Close()
	dom, err := ours.DomainDefineXML(ctx, `<domain type='qemu'><name>`+lookupDomain+`</name><memory unit='MiB'>64</memory>
		<os><type arch='x86_64'>hvm</type></os></domain>`, 0)
	if err != nil {
		return err
	}
	defer func() { _ = ours.DomainUndefine(ctx, dom, 0) }() // transient bench domain; never started
	theirs, err := b.dialGoLibvirt()
	if err != nil {
		return err
	}
	defer func() { _ = theirs.Disconnect() }() // the measurement is over

	calls := []struct {
		name   string
		ours   func() error
		theirs func() error
	}{
		{"CONNECT_GET_LIB_VERSION",
			func() error { _, err := ours.LibVersion(ctx); return err },
			func() error { _, err := theirs.ConnectGetLibVersion(); return err }},
		{"DOMAIN_LOOKUP_BY_NAME",
			func() error { _, err := ours.DomainLookupByName(ctx, lookupDomain); return err },
			func() error { _, err := theirs.DomainLookupByName(lookupDomain); return err }},
	}
	fmt.Printf("RPC round trips per second (%d rounds of %s each, one connection per client; every round, then median, best and spread)\n", rounds, d)
	fmt.Printf("and the client's CPU per call (this process's user+system time over the round ÷ calls; the clients take turns, so each round's CPU is its own)\n")
	fmt.Printf("%-26s %7s %-9s %12s %12s %7s %10s %10s %9s\n", "procedure", "callers", "round", "pkg/libvirt", "go-libvirt", "ratio", "µs/call", "µs/call", "CPU ratio")
	for _, c := range calls {
		for _, n := range []int{1, 16} {
			var ourRates, theirRates, ratios, ourCPU, theirCPU []float64
			for round := range rounds {
				ro, co, err := rate(c.ours, n, d)
				if err != nil {
					return err
				}
				rt, ct, err := rate(c.theirs, n, d)
				if err != nil {
					return err
				}
				ourRates, theirRates, ratios = append(ourRates, ro), append(theirRates, rt), append(ratios, ro/rt)
				ourCPU, theirCPU = append(ourCPU, co), append(theirCPU, ct)
				fmt.Printf("%-26s %7d %-9d %12.0f %12.0f %6.2fx %10.1f %10.1f %8.2fx\n", c.name, n, round+1, ro, rt, ro/rt, co, ct, co/ct)
			}
			fmt.Printf("%-26s %7d %-9s %12.0f %12.0f %6.2fx %10.1f %10.1f %8.2fx\n", c.name, n, "median", median(ourRates), median(theirRates),
				median(ourRates)/median(theirRates), median(ourCPU), median(theirCPU), median(ourCPU)/median(theirCPU))
			fmt.Printf("%-26s %7d %-9s %12.0f %12.0f %6.2fx\n", c.name, n, "best", slices.Max(ourRates), slices.Max(theirRates), slices.Max(ourRates)/slices.Max(theirRates))
			fmt.Printf("%-26s %7d %-9s %5.0f–%-6.0f %5.0f–%-6.0f %.2f–%.2fx\n", c.name, n, "spread", slices.Min(ourRates), slices.Max(ourRates),
				slices.Min(theirRates), slices.Max(theirRates), slices.Min(ratios), slices.Max(ratios))
		}
	}
	return nil
}

// median of a non-empty sample.
func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// rate runs call from n goroutines for d and returns completed calls per second and this
// process's CPU time (user and system) per call, in microseconds.
func rate(call func() error, n int, d time.Duration) (perSecond, cpuMicros float64, err error) {
	var done atomic.Int64
	var firstErr error
	var once sync.Once
	runtime.GC() // the other client's garbage is not this one's cost
	cpu0 := cpuTime()
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				if err := call(); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	calls := float64(done.Load())
	return calls / d.Seconds(), float64((cpuTime() - cpu0).Microseconds()) / max(calls, 1), firstErr
}

// cpuTime is the user and system time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru) // RUSAGE_SELF never fails
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// scratchPool makes a scratch directory under the bench's and a transient dir pool in it; cleanup
// destroys the pool (libvirtd drops it anyway on restart) and removes the directory (a leftover
// is harmless).
func (b *bench) scratchPool(ctx context.Context, c *libvirt.Client) (string, libvirt.StoragePool, func(), error) {
	var pool libvirt.StoragePool
	work, err := os.MkdirTemp(b.dir, "bench-")
	if err != nil {
		return "", pool, nil, err
	}
	removeWork := func() { _ = os.RemoveAll(work) }
	poolDir := filepath.Join(work, "pool")
	err = os.Chmod(work, 0o755)
	if err == nil {
		err = os.Mkdir(poolDir, 0o755)
	}
	if err != nil {
		removeWork()
		return "", pool, nil, err
	}
	pool, err = c.StoragePoolCreateXML(ctx, `<pool type='dir'><name>`+benchPool+`</name><target><path>`+poolDir+`</path></target></pool>`, 0)
	if err != nil {
		removeWork()
		return "", pool, nil, err
	}
	return work, pool, func() { _ = c.StoragePoolDestroy(ctx, pool); removeWork() }, nil
}

// uploads times dense and sparse uploads by pkg/libvirt and by virsh, each in a child
// process whose peak RSS is reported, alternating tools for several rounds.
func (b *bench) uploads(denseSize, sparseSize, sparseData int64, rounds int) error {
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

	dense := filepath.Join(work, "dense.raw")
	sparse := filepath.Join(work, "sparse.raw")
	fmt.Printf("\npreparing %s dense and %s sparse (%s data) sources...\n", size(denseSize), size(sparseSize), size(sparseData))
	if err := writeDense(dense, denseSize); err != nil {
		return err
	}
	if err := writeSparse(sparse, sparseSize, sparseData); err != nil {
		return err
	}

	uri := b.uri()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	fmt.Printf("upload (%d alternating rounds, every round printed; best, median and spread of the times; peak RSS is the highest seen)\n", rounds)
	fmt.Printf("%-34s %10s %10s %12s\n", "", "seconds", "MiB/s", "peak RSS")
	for _, u := range []struct {
		name   string
		src    string
		length int64
		sparse bool
	}{
		{"dense " + size(denseSize), dense, denseSize, false},
		{"sparse " + size(sparseSize) + " (" + size(sparseData) + " data)", sparse, sparseSize, true},
	} {
		var results [2]result
		var times [2][]float64
		for round := range rounds {
			for i, tool := range []string{"pkg/libvirt", "virsh"} {
				_ = deleteVol(ctx, c, pool, "v")
				if _, err := c.StorageVolCreateXML(ctx, pool, fmt.Sprintf(`<volume><name>v</name><capacity unit='bytes'>%d</capacity><allocation>0</allocation><target><format type='raw'/></target></volume>`, u.length), 0); err != nil {
					return err
				}
				var cmd *exec.Cmd
				if tool == "virsh" {
					args := []string{"-q", "-c", uri, "vol-upload", "--pool", benchPool, "v", u.src}
					if u.sparse {
						args = append(args, "--sparse")
					}
					cmd = exec.Command("virsh", args...)
				} else {
					cmd = exec.Command(self, "upload", b.pki, u.src, strconv.FormatBool(u.sparse), strconv.Itoa(b.port))
				}
				r, err := run(cmd)
				if err != nil {
					return fmt.Errorf("%s %s: %w", tool, u.name, err)
				}
				if round == 0 || r.elapsed < results[i].elapsed {
					results[i].elapsed = r.elapsed
				}
				results[i].maxRSS = max(results[i].maxRSS, r.maxRSS)
				times[i] = append(times[i], r.elapsed.Seconds())
				fmt.Printf("%-34s %10.2f %10.0f %12s   %s, round %d\n", u.name, r.elapsed.Seconds(),
					float64(u.length)/(1<<20)/r.elapsed.Seconds(), size(r.maxRSS), tool, round+1)
			}
		}
		for i, tool := range []string{"pkg/libvirt", "virsh"} {
			r := results[i]
			fmt.Printf("%-34s %10.2f %10.0f %12s   %s, best (median %.2f s, spread %.2f–%.2f s)\n", u.name, r.elapsed.Seconds(),
				float64(u.length)/(1<<20)/r.elapsed.Seconds(), size(r.maxRSS), tool, median(times[i]), slices.Min(times[i]), slices.Max(times[i]))
		}
		fmt.Printf("%-34s pkg/libvirt takes %.2fx virsh's time (best), %.2fx (median)\n", "",
			results[0].elapsed.Seconds()/results[1].elapsed.Seconds(), median(times[0])/median(times[1]))
	}
	return deleteVol(ctx, c, pool, "v")
}

func deleteVol(ctx context.Context, c *libvirt.Client, pool libvirt.StoragePool, name string) error {
	v, err := c.StorageVolLookupByName(ctx, pool, name)
	if err != nil {
		return err
	}
	return c.StorageVolDelete(ctx, v)
}

type result struct {
	elapsed time.Duration
	maxRSS  int64
}

// run times cmd and samples its peak RSS (VmHWM) while it runs. getrusage's ru_maxrss is no
// use here: Go starts children with vfork, so the child's figure starts at the parent's.
func run(cmd *exec.Cmd) (result, error) {
	cmd.Stderr = os.Stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	status := fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)
	stop := make(chan struct{})
	peak := make(chan int64)
	go func() {
		var hwm int64
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			hwm = max(hwm, readHWM(status))
			select {
			case <-stop:
				peak <- hwm
				return
			case <-tick.C:
			}
		}
	}()
	err := cmd.Wait()
	elapsed := time.Since(start)
	close(stop)
	return result{elapsed: elapsed, maxRSS: <-peak}, err
}

// readHWM returns the VmHWM line of a /proc status file in bytes, 0 if unreadable.
func readHWM(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// childUpload is the measured process: dial, upload, exit.
func childUpload(args []string) error {
	pki, src, sparse := args[0], args[1], args[2] == "true"
	ctx := context.Background()
	port, err := strconv.Atoi(args[3])
	if err != nil {
		return err
	}
	c, err := (&bench{pki: pki, port: port}).dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	pool, err := c.StoragePoolLookupByName(ctx, benchPool)
	if err != nil {
		return err
	}
	vol, err := c.StorageVolLookupByName(ctx, pool, "v")
	if err != nil {
		return err
	}
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }() // read only: closing it loses nothing
	if sparse {
		return c.StorageVolUploadSparse(ctx, vol, f, nil)
	}
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	return c.StorageVolUpload(ctx, vol, f, fi.Size(), nil)
}

func writeDense(path string, n int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	rng := rand.NewChaCha8([32]byte{1})
	buf := make([]byte, 4<<20)
	for written := int64(0); written < n; written += int64(len(buf)) {
		_, _ = rng.Read(buf)
		if _, err := f.Write(buf[:min(int64(len(buf)), n-written)]); err != nil {
			_ = f.Close() // the write error is the one to report
			return err
		}
	}
	return f.Close()
}

// writeSparse spreads data over 16 equal extents of a file of size n.
func writeSparse(path string, n, data int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	const extents = 16
	rng := rand.NewChaCha8([32]byte{2})
	buf := make([]byte, data/extents)
	for i := int64(0); i < extents; i++ {
		_, _ = rng.Read(buf)
		if _, err := f.WriteAt(buf, i*(n/extents)); err != nil {
			_ = f.Close() // the write error is the one to report
			return err
		}
	}
	if err := f.Truncate(n); err != nil {
		_ = f.Close() // the truncate error is the one to report
		return err
	}
	return f.Close()
}

func size(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20:
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	default:
		return fmt.Sprintf("%d KiB", n>>10)
	}
}
