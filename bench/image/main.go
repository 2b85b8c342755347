//go:build bench

// Command image compares `banlieue provider libvirt import` (the real binary, against a real
// API server), verifying with the sha256 alone and with the extent digest too (ADR-0134), with
// `virsh vol-upload` and `virsh vol-upload --sparse`, importing one sparse raw image into a dir
// pool of the lab libvirtd (hack/libvirt-lab.sh).
//
//	go run -tags bench ./bench/image [-size 4GiB] [-data-percent 20] [-rounds 3] [-banlieue PATH] [-dense=false]
//
// Each contender runs as its own process; its peak RSS is the kernel's ru_maxrss for that
// process (what /usr/bin/time -v reports as "Maximum resident set size"). After every run the
// volume file on the host is hashed and compared with the source, and its allocated blocks are
// recorded. Everything the benchmark creates (a transient pool, its volumes, the API server) is
// removed at the end.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/bench/internal/program"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/pkg/extentdigest"
	"banlieue.io/banlieue/pkg/libvirt"
)

const ns = "banlieue-system"

func main() {
	lab := flag.String("lab", os.Getenv("BANLIEUE_LIBVIRT_LAB"), "lab directory (hack/libvirt-lab.sh)")
	size := byteSize(4 << 30)
	flag.Var(&size, "size", "image size: bytes, or with a unit (4GiB, 512MiB)")
	dataPct := flag.Float64("data-percent", 20, "percentage of the image that holds data")
	rounds := flag.Int("rounds", 3, "alternating rounds; medians are reported")
	bin := flag.String("banlieue", "", "banlieue binary (default: built from the repository)")
	work := flag.String("dir", "/var/tmp/banlieue-bench-image", "where the source image is kept between runs")
	dense := flag.Bool("dense", true, "also run the dense `virsh vol-upload` (the slowest contender by far)")
	flag.Parse()
	if *lab == "" {
		program.Fatal(errors.New("no lab: run hack/libvirt-lab.sh start and source /var/tmp/banlieue-lab/env"))
	}
	l := testenv.LabFromEnv(*lab)
	b := &bench{lab: l.Dir, pki: l.PKI, endpoint: l.Endpoint}
	b.uri = "qemu+tls://127.0.0.1/system?pkipath=" + b.pki
	program.OnSignal(b.cleanup)
	err := b.run(int64(size), *dataPct, *rounds, *bin, *work, *dense)
	b.cleanup()
	program.Fatal(err)
}

type bench struct {
	lab, pki, endpoint, uri string
	host                    *libvirt.Client
	env                     *testenv.Env
	pool                    libvirt.StoragePool
	poolDir                 string
	tmp                     string
}

type result struct {
	name         string
	wall, upload time.Duration // whole command(s); the upload alone
	rss          int64         // bytes
	cpu          time.Duration // user + system CPU of the import or vol-upload process
	allocated    int64         // bytes of the volume on the host
	contentOK    bool
}

func (b *bench) run(size int64, dataPct float64, rounds int, bin, work string, dense bool) error {
	ctx := context.Background()
	var err error
	if b.tmp, err = os.MkdirTemp("", "bench-image-"); err != nil {
		return err
	}
	if bin == "" {
		bin = filepath.Join(b.tmp, "banlieue")
		fmt.Println("building banlieue ...")
		if out, err := testenv.BuildBanlieue(bin); err != nil {
			return fmt.Errorf("building banlieue: %v\n%s", err, out)
		}
	}
	src, data, err := sourceImage(work, size, dataPct)
	if err != nil {
		return err
	}
	fmt.Printf("source %s: %d bytes, %d data bytes (%.1f %%)\n", src, size, data, 100*float64(data)/float64(size))
	sum, err := sha256File(src)
	if err != nil {
		return err
	}
	fmt.Println("source sha256:", sum)
	extent, err := extentDigestFile(src)
	if err != nil {
		return err
	}
	fmt.Println("source extent digest:", extent)

	creds, err := libvirt.ReadPKIDir(b.pki)
	if err != nil {
		return err
	}
	ep, err := libvirt.ParseEndpoint(b.endpoint)
	if err != nil {
		return err
	}
	if b.host, err = (libvirt.Dialer{Endpoint: ep, Credentials: creds}).Dial(ctx); err != nil {
		return err
	}
	name := "bench-image-" + randHex(3)
	b.poolDir = filepath.Join(b.lab, "pools", name)
	if err := os.MkdirAll(b.poolDir, 0o711); err != nil {
		return err
	}
	if b.pool, err = b.host.StoragePoolCreateXML(ctx,
		fmt.Sprintf(`<pool type='dir'><name>%s</name><target><path>%s</path></target></pool>`, name, b.poolDir), 0); err != nil {
		return err
	}
	kubeconfig, err := b.startAPIServer(ctx)
	if err != nil {
		return err
	}

	contenders := []struct {
		name string
		run  func() (result, error)
	}{
		{"banlieue import", func() (result, error) {
			return b.ours(bin, kubeconfig, src, sum, "")
		}},
		{"banlieue import, extent digest", func() (result, error) {
			return b.ours(bin, kubeconfig, src, sum, extent)
		}},
		{"virsh vol-upload", func() (result, error) { return b.virsh(src, sum, size, false) }},
		{"virsh vol-upload --sparse", func() (result, error) { return b.virsh(src, sum, size, true) }},
	}
	if !dense {
		contenders = slices.Delete(contenders, 2, 3)
	}
	all := map[string][]result{}
	for r := 0; r < rounds; r++ {
		for _, c := range contenders {
			res, err := c.run()
			for attempt := 1; err != nil && attempt < 3; attempt++ {
				// Other suites restart the shared lab libvirtd; start this run over on a fresh connection.
				fmt.Printf("round %d %s failed, retrying: %v\n", r+1, c.name, err)
				time.Sleep(3 * time.Second)
				if err = b.recover(ctx); err == nil {
					res, err = c.run()
				}
			}
			if err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			res.name = c.name
			fmt.Printf("round %d %-30s wall %7.2fs upload %7.2fs  CPU %6.2fs  peak RSS %6.1f MiB  allocated %7.1f MiB  content ok %v\n",
				r+1, c.name, res.wall.Seconds(), res.upload.Seconds(), res.cpu.Seconds(), mib(res.rss), mib(res.allocated), res.contentOK)
			all[c.name] = append(all[c.name], res)
			if !res.contentOK {
				return fmt.Errorf("%s: volume content differs from the source", c.name)
			}
		}
	}
	fmt.Println()
	fmt.Printf("medians over %d rounds (machine shared with other jobs):\n", rounds)
	fmt.Printf("| %-30s | %9s | %9s | %18s | %6s | %9s | %12s |\n", "tool", "wall s", "upload s", "÷ virsh --sparse", "CPU s", "peak RSS", "allocated")
	sparseWall := median(all[contenders[len(contenders)-1].name], func(r result) float64 { return r.wall.Seconds() })
	for _, c := range contenders {
		rs := all[c.name]
		w := median(rs, func(r result) float64 { return r.wall.Seconds() })
		u := median(rs, func(r result) float64 { return r.upload.Seconds() })
		rss := median(rs, func(r result) float64 { return mib(r.rss) })
		alloc := median(rs, func(r result) float64 { return mib(r.allocated) })
		cpu := median(rs, func(r result) float64 { return r.cpu.Seconds() })
		fmt.Printf("| %-30s | %9.2f | %9.2f | %17.2fx | %6.2f | %5.1f MiB | %8.0f MiB |\n", c.name, w, u, w/sparseWall, cpu, rss, alloc)
		var walls []string
		for _, r := range rs {
			walls = append(walls, fmt.Sprintf("%.2f", r.wall.Seconds()))
		}
		fmt.Printf("|   rounds (wall s): %s\n", strings.Join(walls, " / "))
	}
	return nil
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

func median(rs []result, f func(result) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

var importedRE = regexp.MustCompile(`imported .* in ([0-9.]+[a-zµ]+) \(`)

// ours runs the real binary the way an import Job does, with --checksum as the controller passes
// it and, when extent is set, --extent-digest as it passes an artifact's extent digest.
func (b *bench) ours(bin, kubeconfig, src, sum, extent string) (result, error) {
	args := []string{"provider", "libvirt", "import", "--kubeconfig", kubeconfig,
		"--vmimage", "bench", "--provider", "lab", "--provider-namespace", ns, "--pool", b.pool.Name,
		"--source", src, "--checksum", "sha256:" + sum}
	if extent != "" {
		args = append(args, "--extent-digest", extent)
	}
	cmd := timed(b.tmp, bin, args...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	wall := time.Since(start)
	if err != nil {
		return result{}, fmt.Errorf("%v\n%s", err, out)
	}
	rss, cpu, err := maxRSS(b.tmp)
	if err != nil {
		return result{}, err
	}
	res := result{wall: wall, rss: rss, cpu: cpu}
	if m := importedRE.FindSubmatch(out); m != nil {
		if d, err := time.ParseDuration(string(m[1])); err == nil {
			res.upload = d
		}
	}
	if err := b.verify(&res, "bench.raw", sum); err != nil {
		return res, err
	}
	return res, b.deleteVolumes("bench.raw", "bench.raw.sha256")
}

// virsh creates the volume as the import does (raw, allocation 0) and uploads into it; the wall
// time covers both commands, RSS is vol-upload's.
func (b *bench) virsh(src, sum string, size int64, sparse bool) (result, error) {
	vol := "virsh-dense.raw"
	if sparse {
		vol = "virsh-sparse.raw"
	}
	start := time.Now()
	create := exec.Command("virsh", "-q", "-c", b.uri, "vol-create-as", b.pool.Name, vol, fmt.Sprint(size),
		"--allocation", "0", "--format", "raw")
	if out, err := create.CombinedOutput(); err != nil {
		return result{}, fmt.Errorf("vol-create-as: %v\n%s", err, out)
	}
	args := []string{"-q", "-c", b.uri, "vol-upload", "--pool", b.pool.Name, vol, src}
	if sparse {
		args = append(args, "--sparse")
	}
	up := timed(b.tmp, "virsh", args...)
	upStart := time.Now()
	if out, err := up.CombinedOutput(); err != nil {
		return result{}, fmt.Errorf("vol-upload: %v\n%s", err, out)
	}
	res := result{upload: time.Since(upStart), wall: time.Since(start)}
	var err error
	if res.rss, res.cpu, err = maxRSS(b.tmp); err != nil {
		return res, err
	}
	if err := b.verify(&res, vol, sum); err != nil {
		return res, err
	}
	return res, b.deleteVolumes(vol)
}

// timed runs a command under /usr/bin/time, whose "Maximum resident set size" is the command's
// own peak. (The ru_maxrss of a child of this process would not do: a child forked by a large
// parent inherits the parent's high-water mark.)
func timed(dir, name string, args ...string) *exec.Cmd {
	return exec.Command("/usr/bin/time", append([]string{"-f", "%M %U %S", "-o", filepath.Join(dir, "rss"), name}, args...)...)
}

// maxRSS reads what /usr/bin/time wrote: the peak RSS, in KiB, as bytes, and the user plus
// system CPU time.
func maxRSS(dir string) (int64, time.Duration, error) {
	data, err := os.ReadFile(filepath.Join(dir, "rss"))
	if err != nil {
		return 0, 0, err
	}
	var kib int64
	var user, sys float64
	if _, err := fmt.Sscan(strings.TrimSpace(string(data)), &kib, &user, &sys); err != nil {
		return 0, 0, fmt.Errorf("reading /usr/bin/time output %q: %w", data, err)
	}
	return kib << 10, time.Duration((user + sys) * float64(time.Second)), nil
}

// verify hashes the volume file on the host and records its allocation.
func (b *bench) verify(res *result, vol, want string) error {
	path := filepath.Join(b.poolDir, vol)
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return err
	}
	res.allocated = st.Blocks * 512
	got, err := sha256File(path)
	if err != nil {
		return err
	}
	res.contentOK = got == want
	return nil
}

// recover redials the host, recreates the pool if a libvirtd restart lost it, and empties it.
func (b *bench) recover(ctx context.Context) error {
	_ = b.host.Close()
	creds, err := libvirt.ReadPKIDir(b.pki)
	if err != nil {
		return err
	}
	ep, err := libvirt.ParseEndpoint(b.endpoint)
	if err != nil {
		return err
	}
	if b.host, err = (libvirt.Dialer{Endpoint: ep, Credentials: creds}).Dial(ctx); err != nil {
		return err
	}
	name := b.pool.Name
	if b.pool, err = b.host.StoragePoolLookupByName(ctx, name); err != nil {
		b.pool.Name = name
		if b.pool, err = b.host.StoragePoolCreateXML(ctx,
			fmt.Sprintf(`<pool type='dir'><name>%s</name><target><path>%s</path></target></pool>`, name, b.poolDir), 0); err != nil {
			b.pool.Name = name
			return err
		}
	}
	if err := b.host.StoragePoolRefresh(ctx, b.pool); err != nil {
		return err
	}
	vols, err := b.host.StoragePoolListAllVolumes(ctx, b.pool)
	if err != nil {
		return err
	}
	for _, v := range vols {
		if err := b.host.StorageVolDelete(ctx, v); err != nil {
			return err
		}
	}
	return nil
}

func (b *bench) deleteVolumes(names ...string) error {
	ctx := context.Background()
	if err := b.host.StoragePoolRefresh(ctx, b.pool); err != nil {
		return err
	}
	for _, n := range names {
		v, err := b.host.StorageVolLookupByName(ctx, b.pool, n)
		if err != nil {
			return fmt.Errorf("looking up %s: %w", n, err)
		}
		if err := b.host.StorageVolDelete(ctx, v); err != nil {
			return err
		}
	}
	return nil
}

func (b *bench) cleanup() {
	ctx := context.Background()
	if b.host != nil && b.pool.Name != "" {
		_ = b.host.StoragePoolRefresh(ctx, b.pool)
		if vols, err := b.host.StoragePoolListAllVolumes(ctx, b.pool); err == nil {
			for _, v := range vols {
				_ = b.host.StorageVolDelete(ctx, v)
			}
		}
		_ = b.host.StoragePoolDestroy(ctx, b.pool)
		_ = os.RemoveAll(b.poolDir)
	}
	if b.host != nil {
		_ = b.host.Close()
	}
	if b.env != nil {
		_ = b.env.Stop()
	}
	if b.tmp != "" {
		_ = os.RemoveAll(b.tmp)
	}
}

// startAPIServer runs envtest with banlieue's CRDs, creates the lab Provider with its Secret and
// CA ConfigMap, and writes a kubeconfig for the import binary.
func (b *bench) startAPIServer(ctx context.Context) (string, error) {
	var err error
	if b.env, err = testenv.StartProgram(); err != nil {
		return "", fmt.Errorf("starting envtest (hack/envtest-assets.sh builds its binaries): %w", err)
	}
	lab := testenv.LibvirtLab{Dir: b.lab, Endpoint: b.endpoint, PKI: b.pki}
	creds, err := lab.Credentials(ns, "lab-creds", "lab-ca")
	if err != nil {
		return "", err
	}
	for _, obj := range append(append([]client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}}, creds...),
		lab.Provider(ns, "lab", "lab-creds", "lab-ca", banlieuev1.ProviderCapabilities{StorageClasses: []banlieuev1.StorageClassMapping{
			{Name: "standard", Target: map[string]string{"pool": b.pool.Name}}}})) {
		if err := b.env.Client.Create(ctx, obj); err != nil {
			return "", err
		}
	}
	path := filepath.Join(b.tmp, "kubeconfig")
	return path, b.env.WriteKubeconfig(path)
}

// sourceImage writes (once; it is reused while its parameters match) a sparse raw image whose
// data is random bytes in extents of 64 KiB to 4 MiB scattered over the file, holes elsewhere.
func sourceImage(dir string, size int64, pct float64) (string, int64, error) {
	path := filepath.Join(dir, fmt.Sprintf("source-%d-%g.raw", size, pct))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", 0, err
	}
	if fi, err := os.Stat(path); err == nil && fi.Size() == size {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			return path, dataBytes(path, size, st), nil
		}
	}
	f, err := os.Create(path + ".tmp")
	if err != nil {
		return "", 0, err
	}
	defer func() { _ = f.Close() }() // written data is made durable by the Sync below
	if err := f.Truncate(size); err != nil {
		return "", 0, err
	}
	// One extent per 16 MiB segment, at a random 4 KiB-aligned offset inside it; extent lengths
	// vary around the mean that gives pct.
	const seg = 16 << 20
	rng := mrand.New(mrand.NewPCG(1, 2))
	mean := int64(float64(seg) * pct / 100)
	buf := make([]byte, 1<<20)
	var total int64
	for off := int64(0); off < size; off += seg {
		n := mean/2 + rng.Int64N(mean+1) // mean/2 .. 3*mean/2
		n &^= 4095
		if left := size*int64(pct)/100 - total; off+seg >= size && left > 0 {
			n = min(left&^4095, seg)
		}
		n = min(n, seg, size-off)
		start := off + (rng.Int64N(seg-n+1) &^ 4095)
		for w := int64(0); w < n; {
			k := min(int64(len(buf)), n-w)
			_, _ = rand.Read(buf[:k])
			if _, err := f.WriteAt(buf[:k], start+w); err != nil {
				return "", 0, err
			}
			w += k
		}
		total += n
	}
	if err := f.Sync(); err != nil {
		return "", 0, err
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return "", 0, err
	}
	return path, total, nil
}

// dataBytes counts the data extents of a file with SEEK_DATA/SEEK_HOLE.
func dataBytes(path string, size int64, _ *syscall.Stat_t) int64 {
	f, err := os.Open(path)
	if err != nil {
		return -1
	}
	defer func() { _ = f.Close() }() // read only: closing it loses nothing
	var total, off int64
	for off < size {
		d, err := f.Seek(off, 3) // SEEK_DATA
		if err != nil {
			break
		}
		h, err := f.Seek(d, 4) // SEEK_HOLE
		if err != nil {
			break
		}
		total += h - d
		off = h
	}
	return total
}

func sha256File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }() // read only: closing it loses nothing
	h := sha256.New()
	if _, err := io.CopyBuffer(h, bufio.NewReaderSize(f, 1<<20), make([]byte, 1<<20)); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// extentDigestFile is the extent digest of path, read whole as the builder reads its artifact.
func extentDigestFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }() // read only: closing it loses nothing
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	x := extentdigest.New(fi.Size())
	if _, err := io.CopyBuffer(x, f, make([]byte, 1<<20)); err != nil {
		return "", err
	}
	return x.Sum()
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
