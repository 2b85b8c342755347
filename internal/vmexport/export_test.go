package vmexport

import (
	"banlieue.io/banlieue/internal/vmexport/exportjob"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	"banlieue.io/banlieue/pkg/libvirt"
)

func TestMaxFileSize(t *testing.T) {
	for _, c := range []uint64{0, 1, 24 << 20, 10 << 30, 1 << 40, 1 << 56, 1<<64 - 1} {
		m := MaxFileSize(c)
		if m <= 0 {
			t.Fatalf("MaxFileSize(%d) = %d, not a positive bound", c, m)
		}
		// At least the data plus its qcow2 metadata with 64 KiB clusters (10 bytes a cluster) and
		// a header's few clusters.
		if c <= 1<<56 && uint64(m) < c+c/6554+1<<20 {
			t.Errorf("MaxFileSize(%d) = %d leaves no room for the metadata", c, m)
		}
	}
	if MaxFileSize(1<<64-1) != MaxFileSize(1<<56) {
		t.Error("a capacity past any real disk is not clamped")
	}
}

func TestCopyName(t *testing.T) {
	if got := CopyName("vm-1-disk0.qcow2", "0f1e2d3c-aaaa-bbbb"); got != "vm-1-disk0.qcow2.export-0f1e2d3c-aaa" {
		t.Errorf("CopyName = %q", got)
	}
	if CopyName("d", "uid-1") == CopyName("d", "uid-2") {
		t.Error("two exports share a copy")
	}
}

func TestXMLEscape(t *testing.T) {
	if got := xmlEscape(`a<b>&'"`); got != "a&lt;b&gt;&amp;&apos;&quot;" {
		t.Errorf("xmlEscape = %q", got)
	}
}

// fakeHost is a host whose download sends data and whose failures are chosen: the orchestration
// around the host's calls (pure logic) is what it tests; the calls themselves are tested against
// a real libvirtd (roundtrip_lab_test.go).
type fakeHost struct {
	vols        map[string]bool
	data        []byte
	observed    []byte // what the observer is told, when it differs from data
	downloadErr error
	created     int
}

func (h *fakeHost) StorageVolGetInfo(context.Context, libvirt.StorageVol) (libvirt.StorageVolInfo, error) {
	return libvirt.StorageVolInfo{Capacity: 1 << 20}, nil
}

func (h *fakeHost) StorageVolLookupByName(_ context.Context, _ libvirt.StoragePool, name string) (libvirt.StorageVol, error) {
	if !h.vols[name] {
		return libvirt.StorageVol{}, &libvirt.Error{Code: libvirt.ErrNoStorageVol, Message: "Storage volume not found"}
	}
	return libvirt.StorageVol{Name: name}, nil
}

func (h *fakeHost) StorageVolCreateXMLFrom(_ context.Context, _ libvirt.StoragePool, _ string, _ libvirt.StorageVol, _ uint32) (libvirt.StorageVol, error) {
	h.created++
	h.vols["copy"] = true
	return libvirt.StorageVol{Name: "copy"}, nil
}

func (h *fakeHost) StorageVolDelete(_ context.Context, v libvirt.StorageVol) error {
	delete(h.vols, v.Name)
	return nil
}

func (h *fakeHost) StorageVolDownloadObserved(_ context.Context, _ libvirt.StorageVol, w io.Writer, o libvirt.DownloadOptions) (int64, error) {
	if h.downloadErr != nil {
		_, _ = w.Write(h.data[:len(h.data)/2])
		return int64(len(h.data) / 2), h.downloadErr
	}
	if _, err := w.Write(h.data); err != nil {
		return 0, err
	}
	seen := h.data
	if h.observed != nil {
		seen = h.observed
	}
	o.Observer.Data(seen)
	return int64(len(h.data)), nil
}

func TestToDirFailures(t *testing.T) {
	for _, tc := range []struct {
		name string
		host *fakeHost
		step string
	}{
		{"download fails", &fakeHost{data: []byte("qcow2 data"), downloadErr: errors.New("connection reset")}, StepDownload},
		{"written bytes differ from the stream", &fakeHost{data: []byte("qcow2 data"), observed: []byte("qcow2 dat4")}, StepVerify},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.host.vols = map[string]bool{"copy": true} // left by an earlier attempt
			dir := t.TempDir()
			_, err := ToDir(context.Background(), tc.host, libvirt.StoragePool{}, libvirt.StorageVol{Name: "disk"}, "copy", dir, Options{})
			if StepOf(err) != tc.step {
				t.Fatalf("error %v at step %q, want step %s", err, StepOf(err), tc.step)
			}
			if tc.host.created != 1 || len(tc.host.vols) != 0 {
				t.Errorf("copies made %d, left on the host %v; want one made, none left", tc.host.created, tc.host.vols)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("the target holds %v after a failed export", entries)
			}
		})
	}
	t.Run("success", func(t *testing.T) {
		h := &fakeHost{vols: map[string]bool{}, data: []byte("qcow2 data")}
		dir := t.TempDir()
		res, err := ToDir(context.Background(), h, libvirt.StoragePool{}, libvirt.StorageVol{Name: "disk"}, "copy", dir, Options{})
		sum := sha256.Sum256([]byte("qcow2 data"))
		if err != nil || res.Size != 10 || res.Digest != "sha256:"+hex.EncodeToString(sum[:]) {
			t.Fatalf("export %+v, %v", res, err)
		}
		f, err := os.Open(filepath.Join(dir, DiskFile))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = f.Close() }()
		if d, _ := FileDigest(f); d != res.Digest || len(h.vols) != 0 {
			t.Errorf("disk digest %s, export %s; left on the host %v", d, res.Digest, h.vols)
		}
	})
}

func TestMachineVolume(t *testing.T) {
	m := func(domain string, disks []string, volumes ...string) *infrav1.LibvirtMachine {
		lm := &infrav1.LibvirtMachine{}
		lm.Namespace, lm.Name = "ns", "web"
		lm.Spec.DomainName = domain
		for _, d := range disks {
			lm.Spec.Disks = append(lm.Spec.Disks, infrav1.LibvirtDisk{Name: d})
		}
		lm.Status.Volumes = volumes
		return lm
	}
	for _, tc := range []struct {
		name    string
		m       *infrav1.LibvirtMachine
		disk    string
		want    string
		refusal string
	}{
		{"the first disk by default", m("ns-web", []string{"root", "data"}, "ns-web-root.qcow2", "ns-web-data.qcow2"), "", "ns-web-root.qcow2", ""},
		{"a named disk", m("ns-web", []string{"root", "data"}, "ns-web-root.qcow2", "ns-web-data.qcow2"), "data", "ns-web-data.qcow2", ""},
		{"a disk the machine has not", m("ns-web", []string{"root"}, "ns-web-root.qcow2"), "data", "", "invalid --disk"},
		{"a volume not recorded as the machine's", m("ns-web", []string{"root"}, "ns-web-cidata.iso"), "", "", "status.volumes"},
		{"no domain yet", m("", []string{"root"}), "", "", "no domain name"},
		{"no disks", m("ns-web", nil), "", "", "no disks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := exportjob.MachineVolume(tc.m, tc.disk)
			if tc.refusal != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refusal) {
					t.Fatalf("machineVolume = %q, %v; want a refusal containing %q", got, err, tc.refusal)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("machineVolume = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// Options that cannot work are refused before anything is read or dialled (kube is nil here).
func TestExportMachineRefusesOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    MachineOptions
		want string
	}{
		{"no target", MachineOptions{}, "exactly one of"},
		{"two targets", MachineOptions{OutputDir: "/x", Registry: "r.example/a"}, "exactly one of"},
		{"a digest to push to", MachineOptions{Registry: "r.example/a@sha256:" + strings.Repeat("0", 64)}, "the digest is the export's"},
		{"a bad reference", MachineOptions{Registry: "r.example/A B"}, "invalid --registry"},
		{"an unknown architecture", MachineOptions{OutputDir: "/x", Architecture: "mips"}, "invalid --architecture"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ExportMachine(context.Background(), nil, tc.o, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ExportMachine = %v, want a refusal containing %q", err, tc.want)
			}
		})
	}
}
