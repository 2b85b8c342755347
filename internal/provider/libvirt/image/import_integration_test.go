package image

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"banlieue.io/banlieue/internal/imagebuilder/checksum"
	"banlieue.io/banlieue/pkg/libvirt"
	"banlieue.io/banlieue/test/jobrunner"
)

func TestImportAgainstLabHost(t *testing.T) {
	s := newLabSuite(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s.createProvider(ctx, t, "lab")
	pool := s.createPool(ctx, t, "imp")
	dir := t.TempDir()
	dense := writeFile(t, filepath.Join(dir, "dense.raw"), 8<<20, []int64{0}, 8<<20)
	sparse := writeFile(t, filepath.Join(dir, "sparse.raw"), 256<<20, []int64{0, 100 << 20, 255 << 20}, 1<<20)

	run := func(o ImportOptions) (string, error) {
		var out bytes.Buffer
		o.Provider, o.ProviderNamespace, o.Pool = "lab", providerNamespace, cmpOr(o.Pool, pool.Name)
		err := Importer{Kube: s.env.Client, Out: &out}.Import(ctx, o)
		return out.String(), err
	}

	t.Run("dense raw file", func(t *testing.T) {
		if out, err := run(ImportOptions{VMImage: "dense", Source: dense}); err != nil {
			t.Fatalf("import: %v\n%s", err, out)
		}
		s.assertImported(ctx, t, pool, "dense.raw", dense)
	})

	t.Run("sparse raw file keeps its holes and a re-run is a no-op", func(t *testing.T) {
		sum, err := checksum.File(sparse, "sha512")
		if err != nil {
			t.Fatal(err)
		}
		o := ImportOptions{VMImage: "sparse", Source: sparse, Checksum: strings.ToUpper(sum.String()[:7]) + sum.String()[7:]}
		start := time.Now()
		if out, err := run(o); err != nil {
			t.Fatalf("import: %v\n%s", err, out)
		}
		t.Logf("sparse import of 256 MiB (3 MiB data): %s", time.Since(start))
		vol := s.assertImported(ctx, t, pool, "sparse.raw", sparse)
		var st syscall.Stat_t
		if err := syscall.Stat(vol.Key, &st); err != nil {
			t.Fatal(err)
		}
		if allocated := st.Blocks * 512; allocated > 16<<20 {
			t.Errorf("volume allocates %d bytes for 3 MiB of data: holes were written", allocated)
		}
		before, _ := os.Stat(vol.Key)
		out, err := run(o)
		if err != nil || !strings.Contains(out, "nothing to do") {
			t.Fatalf("re-run: %v\n%s", err, out)
		}
		if after, _ := os.Stat(vol.Key); !after.ModTime().Equal(before.ModTime()) {
			t.Error("re-run rewrote the volume")
		}
	})

	t.Run("a volume without a valid marker is replaced", func(t *testing.T) {
		tg := target{host: s.host, pool: pool, volume: "leftover.raw", marker: "leftover.raw.sha256",
			digest: checksum.Digest{Alg: "sha256", Hex: strings.Repeat("0", 64)}}
		// A partial upload: the volume exists, its content is wrong and no marker proves it.
		if _, err := tg.create(ctx, tg.volume, 4096); err != nil {
			t.Fatal(err)
		}
		if out, err := run(ImportOptions{VMImage: "leftover", Source: dense}); err != nil {
			t.Fatalf("import: %v\n%s", err, out)
		}
		s.assertImported(ctx, t, pool, "leftover.raw", dense)
		// A marker for another artifact (the image was rebuilt) does not prove it either.
		if err := tg.writeMarkerReplacing(ctx); err != nil {
			t.Fatal(err)
		}
		if out, err := run(ImportOptions{VMImage: "leftover", Source: dense}); err != nil || strings.Contains(out, "nothing to do") {
			t.Fatalf("import over a stale marker: %v\n%s", err, out)
		}
		s.assertImported(ctx, t, pool, "leftover.raw", dense)
	})

	t.Run("wrong checksum fails before touching the host", func(t *testing.T) {
		_, err := run(ImportOptions{VMImage: "wrong", Source: dense, Checksum: "sha256:" + strings.Repeat("ab", 32)})
		if err == nil || !strings.HasPrefix(err.Error(), "invalid --checksum: checksum mismatch for "+dense+": expected sha256:abab") ||
			!strings.Contains(err.Error(), "computed sha256:") {
			t.Fatalf("error = %v", err)
		}
		_, err = run(ImportOptions{VMImage: "wrong", Source: dense, Checksum: "md5:00"})
		if err == nil || !strings.HasPrefix(err.Error(), `invalid --checksum: unsupported algorithm "md5"`) {
			t.Fatalf("error = %v", err)
		}
		for name := range s.volumes(ctx, t, pool) {
			if strings.HasPrefix(name, "wrong") {
				t.Errorf("volume %s created despite the bad checksum", name)
			}
		}
	})

	t.Run("bad source", func(t *testing.T) {
		empty := filepath.Join(dir, "empty.raw")
		if err := os.WriteFile(empty, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := run(ImportOptions{VMImage: "e", Source: empty}); err == nil ||
			err.Error() != "invalid --source: "+empty+" is empty; the build produced no disk" {
			t.Errorf("empty source: %v", err)
		}
		missing := filepath.Join(dir, "missing.raw")
		if _, err := run(ImportOptions{VMImage: "m", Source: missing}); err == nil ||
			err.Error() != "invalid --source: cannot read "+missing+": no such file or directory" {
			t.Errorf("missing source: %v", err)
		}
	})

	t.Run("missing pool lists the available ones", func(t *testing.T) {
		_, err := run(ImportOptions{VMImage: "x", Source: dense, Pool: "no-such-pool"})
		if err == nil || !strings.HasPrefix(err.Error(), `invalid --pool: pool "no-such-pool" does not exist on this host; available: [`) ||
			!strings.Contains(err.Error(), pool.Name) {
			t.Fatalf("error = %v", err)
		}
	})
}

// TestImportKilledMidStream SIGKILLs the real binary while it uploads and checks that the next
// run replaces the partial volume instead of adopting it.
func TestImportKilledMidStream(t *testing.T) {
	s := newLabSuite(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s.createProvider(ctx, t, "lab")
	pool := s.createPool(ctx, t, "kill")
	bin := jobrunner.BuildBanlieue(t)
	kubeconfig := jobrunner.WriteKubeconfig(t, s.env.Config)
	src := writeFile(t, filepath.Join(t.TempDir(), "big.raw"), 1<<30, []int64{0}, 1<<30)
	args := []string{"provider", "libvirt", "import", "--kubeconfig", kubeconfig, "--vmimage", "big",
		"--provider", "lab", "--provider-namespace", providerNamespace, "--pool", pool.Name, "--source", src}

	cmd := exec.Command(bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case err := <-exited:
			t.Fatalf("the import ended (%v) before it could be killed:\n%s", err, out.String())
		default:
		}
		if v, ok := s.volumes(ctx, t, pool)["big.raw"]; ok {
			if fi, err := os.Stat(v.Key); err == nil && fi.Size() > 0 {
				if st := fi.Sys().(*syscall.Stat_t); st.Blocks > 0 {
					break
				}
			}
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			t.Fatalf("the upload never started:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited
	vols := s.volumes(ctx, t, pool)
	if _, ok := vols["big.raw.sha256"]; ok {
		t.Fatalf("a marker exists after the kill; the test killed too late:\n%s", out.String())
	}
	if _, ok := vols["big.raw"]; !ok {
		t.Fatal("the partial volume vanished; the test proves nothing")
	}

	rerun := exec.CommandContext(ctx, bin, args...)
	combined, err := rerun.CombinedOutput()
	if err != nil {
		t.Fatalf("re-run: %v\n%s", err, combined)
	}
	t.Logf("re-run output:\n%s", combined)
	s.assertImported(ctx, t, pool, "big.raw", src)
}

// assertImported checks that the volume holds exactly the file and its marker names the file's
// sha256. The lab host is this machine, so the volume is read through its path.
func (s *labSuite) assertImported(ctx context.Context, t *testing.T, pool libvirt.StoragePool, volume, src string) libvirt.StorageVol {
	t.Helper()
	vols := s.volumes(ctx, t, pool)
	vol, ok := vols[volume]
	if !ok {
		t.Fatalf("volume %s not in pool %s", volume, pool.Name)
	}
	if got, want := fileSHA256(t, vol.Key), fileSHA256(t, src); got != want {
		t.Fatalf("volume %s content differs from %s", volume, src)
	}
	marker, ok := vols[volume+".sha256"]
	if !ok {
		t.Fatalf("marker volume %s.sha256 missing", volume)
	}
	var buf bytes.Buffer
	if _, err := s.host.StorageVolDownload(ctx, marker, &buf, nil); err != nil {
		t.Fatal(err)
	}
	sum, err := checksum.File(src, "sha256")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(buf.String()) != sum.String() && !strings.HasPrefix(strings.TrimSpace(buf.String()), "sha512:") {
		t.Errorf("marker holds %q, want %s", buf.String(), sum)
	}
	return vol
}

// writeFile makes a file of size bytes whose only data are n-byte random blocks at offsets;
// the rest are holes.
func writeFile(t testing.TB, path string, size int64, offsets []int64, n int64) string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	block := make([]byte, min(n, 1<<20))
	_, _ = rand.Read(block)
	for _, off := range offsets {
		for done := int64(0); done < n; done += int64(len(block)) {
			if _, err := f.WriteAt(block[:min(int64(len(block)), n-done)], off+done); err != nil {
				t.Fatal(err)
			}
		}
	}
	return path
}

func fileSHA256(t testing.TB, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// writeMarkerReplacing overwrites the marker with t's (deliberately different) digest.
func (tg *target) writeMarkerReplacing(ctx context.Context) error {
	found, err := tg.lookup(ctx)
	if err != nil {
		return err
	}
	if v, ok := found[tg.marker]; ok {
		if err := tg.delete(ctx, v); err != nil {
			return err
		}
	}
	return tg.writeMarker(ctx)
}
