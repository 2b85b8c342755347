package image

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"banlieue.io/banlieue/internal/imagebuilder/checksum"
	providerlibvirt "banlieue.io/banlieue/internal/provider/libvirt"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/pkg/libvirt"
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

	denseSum, err := checksum.File(dense, "sha256")
	if err != nil {
		t.Fatal(err)
	}

	t.Run("an interrupted import of this artifact is redone", func(t *testing.T) {
		// What a kill right after the upload started leaves: the in-progress marker, then a
		// partial volume.
		s.writeVolume(ctx, t, pool, "partial.raw.sha256", markerContent(importing, denseSum))
		s.writeVolume(ctx, t, pool, "partial.raw", []byte("half an image"))
		out, err := run(ImportOptions{VMImage: "partial", Source: dense})
		if err != nil || !strings.Contains(out, "deleted partial.raw: no completion marker for "+denseSum.String()) {
			t.Fatalf("import: %v\n%s", err, out)
		}
		s.assertImported(ctx, t, pool, "partial.raw", dense)
		// A kill before the volume was created leaves the marker alone.
		s.deleteVolume(ctx, t, pool, "partial.raw")
		s.rewriteVolume(ctx, t, pool, "partial.raw.sha256", markerContent(importing, denseSum))
		if out, err := run(ImportOptions{VMImage: "partial", Source: dense}); err != nil || strings.Contains(out, "deleted") {
			t.Fatalf("import after a marker-only leftover: %v\n%s", err, out)
		}
		s.assertImported(ctx, t, pool, "partial.raw", dense)
	})

	t.Run("a volume deleted by hand is imported again from its marker", func(t *testing.T) {
		if out, err := run(ImportOptions{VMImage: "gone", Source: dense}); err != nil {
			t.Fatalf("import: %v\n%s", err, out)
		}
		s.deleteVolume(ctx, t, pool, "gone.raw")
		out, err := run(ImportOptions{VMImage: "gone", Source: dense})
		if err != nil || !strings.Contains(out, "volume gone.raw is gone but its marker gone.raw.sha256 records "+denseSum.String()) {
			t.Fatalf("import: %v\n%s", err, out)
		}
		s.assertImported(ctx, t, pool, "gone.raw", dense)
	})

	t.Run("a marker written by an earlier version proves completion", func(t *testing.T) {
		if out, err := run(ImportOptions{VMImage: "legacy", Source: dense}); err != nil {
			t.Fatalf("import: %v\n%s", err, out)
		}
		s.deleteVolume(ctx, t, pool, "legacy.raw.sha256")
		s.writeVolume(ctx, t, pool, "legacy.raw.sha256", []byte(denseSum.String()+"\n"))
		if out, err := run(ImportOptions{VMImage: "legacy", Source: dense}); err != nil || !strings.Contains(out, "nothing to do") {
			t.Fatalf("re-run: %v\n%s", err, out)
		}
	})

	t.Run("another artifact under an imported name is refused, the base untouched", func(t *testing.T) {
		// The guide's by-hand import run again with another --source: the base that machines'
		// overlays back onto must not change under them.
		if out, err := run(ImportOptions{VMImage: "base", Source: dense}); err != nil {
			t.Fatalf("import: %v\n%s", err, out)
		}
		before := s.volumeState(ctx, t, pool, "base.raw")
		_, err := run(ImportOptions{VMImage: "base", Source: sparse})
		sparseSum, _ := checksum.File(sparse, "sha256")
		want := "volume base.raw in pool " + pool.Name + " was imported with " + denseSum.String() +
			" (its marker base.raw.sha256 says so); an imported base image is never replaced, since the overlays of machines " +
			"built on it back onto it: import " + sparseSum.String() + " under another --volume-name"
		if err == nil || err.Error() != want {
			t.Fatalf("error = %v\nwant    %s", err, want)
		}
		if after := s.volumeState(ctx, t, pool, "base.raw"); after != before {
			t.Errorf("the refused import changed the base: %s, then %s", before, after)
		}
		// Under a name of its own the new artifact is imported beside the old one.
		if out, err := run(ImportOptions{VMImage: "base", Source: sparse, VolumeName: "base-2.raw"}); err != nil {
			t.Fatalf("import: %v\n%s", err, out)
		}
		s.assertImported(ctx, t, pool, "base-2.raw", sparse)
		s.assertImported(ctx, t, pool, "base.raw", dense)
	})

	t.Run("another artifact's interrupted import is refused, untouched", func(t *testing.T) {
		other := checksumDigest(t, "sha256:"+strings.Repeat("ab", 32))
		s.writeVolume(ctx, t, pool, "busy.raw.sha256", markerContent(importing, other))
		s.writeVolume(ctx, t, pool, "busy.raw", []byte("someone else's upload"))
		before := s.volumeState(ctx, t, pool, "busy.raw")
		_, err := run(ImportOptions{VMImage: "busy", Source: dense})
		if err == nil || !strings.HasPrefix(err.Error(), "volume busy.raw in pool "+pool.Name+" is being imported with "+other.String()) {
			t.Fatalf("error = %v", err)
		}
		if after := s.volumeState(ctx, t, pool, "busy.raw"); after != before {
			t.Errorf("the refused import changed the volume: %s, then %s", before, after)
		}
	})

	t.Run("a stranger's volume at the computed name is refused and untouched", func(t *testing.T) {
		// The name an import Job would be given for this artifact.
		name := providerlibvirt.ArtifactVolumeName("stranger", denseSum.Hex, false)
		s.writeVolume(ctx, t, pool, name, []byte("not banlieue's"))
		before := s.volumeState(ctx, t, pool, name)
		_, err := run(ImportOptions{VMImage: "stranger", Source: dense, VolumeName: name, Checksum: denseSum.String()})
		want := "volume " + name + " in pool " + pool.Name + " was not created by a banlieue import (there is no marker volume " +
			name + ".sha256); it is left untouched: remove it by hand if nothing uses it, or import under another --volume-name"
		if err == nil || err.Error() != want {
			t.Fatalf("error = %v\nwant    %s", err, want)
		}
		if after := s.volumeState(ctx, t, pool, name); after != before {
			t.Errorf("the refused import changed the volume: %s, then %s", before, after)
		}
		if _, ok := s.volumes(ctx, t, pool)[name+".sha256"]; ok {
			t.Error("the refused import left a marker")
		}

		// A file put into the pool behind libvirt's back is not listed, yet not overwritten.
		hidden := providerlibvirt.ArtifactVolumeName("hidden", denseSum.Hex, false)
		path := filepath.Join(s.lab.Dir, "pools", pool.Name, hidden)
		if err := os.WriteFile(path, []byte("copied in by hand"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err = run(ImportOptions{VMImage: "hidden", Source: dense, VolumeName: hidden})
		if err == nil || !strings.HasPrefix(err.Error(), "creating volume "+hidden+" in pool "+pool.Name+": ") {
			t.Fatalf("error = %v", err)
		}
		if got, _ := os.ReadFile(path); string(got) != "copied in by hand" {
			t.Errorf("the file was overwritten: %q", got)
		}
		if _, err := os.Stat(path + ".sha256"); !os.IsNotExist(err) {
			t.Errorf("the failed import left its marker: %v", err)
		}

		// A volume named like a marker that holds anything but banlieue's format.
		s.writeVolume(ctx, t, pool, "sums.raw.sha256", []byte(denseSum.Hex+"  sums.raw\n"))
		_, err = run(ImportOptions{VMImage: "sums", Source: dense})
		if err == nil || !strings.HasPrefix(err.Error(), "volume sums.raw.sha256 in pool "+pool.Name+" is not a banlieue import marker") {
			t.Fatalf("error = %v", err)
		}
		if _, ok := s.volumes(ctx, t, pool)["sums.raw"]; ok {
			t.Error("an import went ahead under a marker that is not banlieue's")
		}
	})

	t.Run("a matching sha256 --checksum imports; a re-run is a no-op", func(t *testing.T) {
		// What an import Job passes. A re-run reads nothing: the marker proves the volume.
		o := ImportOptions{VMImage: "job", Source: sparse, Checksum: checksumOf(t, sparse, "sha256").String()}
		if out, err := run(o); err != nil {
			t.Fatalf("import: %v\n%s", err, out)
		}
		s.assertImported(ctx, t, pool, "job.raw", sparse)
		before := s.volumeState(ctx, t, pool, "job.raw")
		if out, err := run(o); err != nil || !strings.Contains(out, "nothing to do") {
			t.Fatalf("re-run: %v\n%s", err, out)
		}
		if after := s.volumeState(ctx, t, pool, "job.raw"); after != before {
			t.Errorf("the re-run changed the volume: %s, then %s", before, after)
		}
	})

	t.Run("a wrong checksum deletes the volume and its marker", func(t *testing.T) {
		for _, sum := range []string{"sha256:" + strings.Repeat("ab", 32), "sha512:" + strings.Repeat("cd", 64)} {
			_, err := run(ImportOptions{VMImage: "wrong", Source: dense, Checksum: sum})
			if err == nil || !strings.HasPrefix(err.Error(), "invalid --checksum: checksum mismatch for "+dense+": expected "+sum+", computed ") {
				t.Fatalf("error = %v", err)
			}
			s.assertNoVolume(ctx, t, pool, "wrong.raw")
		}
		_, err = run(ImportOptions{VMImage: "wrong", Source: dense, Checksum: "md5:00"})
		if err == nil || !strings.HasPrefix(err.Error(), `invalid --checksum: unsupported algorithm "md5"`) {
			t.Fatalf("error = %v", err)
		}
		s.assertNoVolume(ctx, t, pool, "wrong.raw")
	})

	t.Run("a source rewritten in place during the upload is not imported", func(t *testing.T) {
		// The source is opened and its first packet sent; then, from the upload's own progress
		// callback, its tail is rewritten in place, before the uploader has read it. The
		// verification must cover the bytes uploaded, not another read of the path.
		for _, tc := range []struct{ name, vmimage, checksum, want string }{
			{"import Job (sha256 --checksum)", "rewritten-job", "sha256", "invalid --checksum: checksum mismatch for "},
			{"import Job with an extent digest", "rewritten-extent", "extent", "invalid --extent-digest: extent digest mismatch for "},
			{"sha512 --checksum", "rewritten-sha512", "sha512", "invalid --checksum: checksum mismatch for "},
			{"by hand (no --checksum)", "rewritten-by-hand", "", "invalid --source: "},
		} {
			t.Run(tc.name, func(t *testing.T) {
				src := writeFile(t, filepath.Join(t.TempDir(), "rewritten.raw"), 64<<20, []int64{0, 60 << 20}, 4<<20)
				o := ImportOptions{VMImage: tc.vmimage, Source: src, Pool: pool.Name, Provider: "lab", ProviderNamespace: providerNamespace}
				switch tc.checksum {
				case "extent":
					o.Checksum, o.ExtentDigest = checksumOf(t, src, "sha256").String(), extentDigestOf(t, src)
				case "sha256", "sha512":
					o.Checksum = checksumOf(t, src, tc.checksum).String()
				}
				rewritten := false
				progress := func(int64) libvirt.Progress {
					return func(done int64) {
						if rewritten || done >= 60<<20 {
							return
						}
						rewritten = true
						f, err := os.OpenFile(src, os.O_WRONLY, 0)
						if err != nil {
							t.Error(err)
							return
						}
						defer func() { _ = f.Close() }()
						if _, err := f.WriteAt([]byte("rewritten in place"), 62<<20); err != nil {
							t.Error(err)
						}
					}
				}
				var out bytes.Buffer
				err := Importer{Kube: s.env.Client, Out: &out, Progress: progress}.Import(ctx, o)
				if !rewritten {
					t.Fatalf("the source was never rewritten during the upload; the test proves nothing (%v)\n%s", err, out.String())
				}
				if err == nil || !strings.HasPrefix(err.Error(), tc.want+src) || !strings.Contains(err.Error(), " over the bytes uploaded") ||
					!strings.HasSuffix(err.Error(), "; nothing was imported: volume "+tc.vmimage+".raw and its marker "+tc.vmimage+".raw.sha256 were deleted from pool "+pool.Name) {
					t.Errorf("error = %v\n%s", err, out.String())
				}
				t.Log(err)
				s.assertNoVolume(ctx, t, pool, tc.vmimage+".raw")
			})
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
	bin := testenv.Banlieue(t)
	kubeconfig := s.env.Kubeconfig(t)
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
			t.Fatalf("the upload never started (import killed: %v):\n%s", <-exited, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	t.Logf("import killed: %v", <-exited) // "signal: killed"
	vols := s.volumes(ctx, t, pool)
	if state, _, ok := s.marker(ctx, t, vols["big.raw.sha256"]); !ok || state != importing {
		t.Fatalf("after the kill the marker must record an import in progress; the test killed too late:\n%s", out.String())
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
	if !strings.Contains(string(combined), "deleted big.raw: no completion marker for sha256:") {
		t.Error("the re-run did not say it deleted the partial volume")
	}
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
	if got, want := testenv.FileSHA256(t, vol.Key), testenv.FileSHA256(t, src); got != want {
		t.Fatalf("volume %s content differs from %s", volume, src)
	}
	marker, ok := vols[volume+".sha256"]
	if !ok {
		t.Fatalf("marker volume %s.sha256 missing", volume)
	}
	sum, err := checksum.File(src, "sha256")
	if err != nil {
		t.Fatal(err)
	}
	if state, d, ok := s.marker(ctx, t, marker); !ok || state != complete || d != sum {
		t.Errorf("marker of %s: state %v digest %v (ok %v), want complete %s", volume, state, d, ok, sum)
	}
	return vol
}

// assertNoVolume checks that neither the volume nor its marker exists in the pool.
func (s *labSuite) assertNoVolume(ctx context.Context, t *testing.T, pool libvirt.StoragePool, volume string) {
	t.Helper()
	vols := s.volumes(ctx, t, pool)
	for _, name := range []string{volume, volume + ".sha256"} {
		if _, ok := vols[name]; ok {
			t.Errorf("volume %s is in pool %s", name, pool.Name)
		}
	}
}

func checksumOf(t *testing.T, path, alg string) checksum.Digest {
	t.Helper()
	d, err := checksum.File(path, alg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// marker reads and parses a marker volume.
func (s *labSuite) marker(ctx context.Context, t *testing.T, v libvirt.StorageVol) (markerState, checksum.Digest, bool) {
	t.Helper()
	if v.Name == "" {
		return 0, checksum.Digest{}, false
	}
	var buf bytes.Buffer
	if _, err := s.host.StorageVolDownload(ctx, v, &buf, nil); err != nil {
		t.Fatal(err)
	}
	return parseMarker(buf.String())
}

// writeVolume creates a raw volume holding content, as another tool (or an earlier run) would.
func (s *labSuite) writeVolume(ctx context.Context, t *testing.T, pool libvirt.StoragePool, name string, content []byte) {
	t.Helper()
	v, err := s.host.StorageVolCreateXML(ctx, pool, volumeXML(name, int64(len(content))), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.host.StorageVolUpload(ctx, v, bytes.NewReader(content), int64(len(content)), nil); err != nil {
		t.Fatal(err)
	}
}

// rewriteVolume replaces a volume with one holding content.
func (s *labSuite) rewriteVolume(ctx context.Context, t *testing.T, pool libvirt.StoragePool, name string, content []byte) {
	t.Helper()
	s.deleteVolume(ctx, t, pool, name)
	s.writeVolume(ctx, t, pool, name, content)
}

func (s *labSuite) deleteVolume(ctx context.Context, t *testing.T, pool libvirt.StoragePool, name string) {
	t.Helper()
	v, ok := s.volumes(ctx, t, pool)[name]
	if !ok {
		t.Fatalf("volume %s not in pool %s", name, pool.Name)
	}
	if err := s.host.StorageVolDelete(ctx, v); err != nil {
		t.Fatal(err)
	}
}

// volumeState is a volume's content hash and modification time, read through its path.
func (s *labSuite) volumeState(ctx context.Context, t *testing.T, pool libvirt.StoragePool, name string) string {
	t.Helper()
	v, ok := s.volumes(ctx, t, pool)[name]
	if !ok {
		t.Fatalf("volume %s not in pool %s", name, pool.Name)
	}
	fi, err := os.Stat(v.Key)
	if err != nil {
		t.Fatal(err)
	}
	return testenv.FileSHA256(t, v.Key) + " " + fi.ModTime().String()
}

// writeFile makes a file of size bytes whose only data are n-byte random blocks at offsets;
// the rest are holes.
func writeFile(t testing.TB, path string, size int64, offsets []int64, n int64) string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
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
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
