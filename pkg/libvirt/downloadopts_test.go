package libvirt

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"banlieue.io/banlieue/pkg/libvirt/internal/wire"
	"banlieue.io/banlieue/pkg/libvirt/internal/xdr"
)

// recordingObserver writes down a download's messages as the observer saw them.
type recordingObserver struct{ log []string }

func (r *recordingObserver) Data(p []byte) { r.log = append(r.log, "data:"+string(p)) }
func (r *recordingObserver) Hole(n int64)  { r.log = append(r.log, fmt.Sprintf("hole:%d", n)) }

// downloadPeer answers one STORAGE_VOL_DOWNLOAD with msgs (a string is data, an int64 a hole),
// then the end of data, and records the call's arguments.
func downloadPeer(t *testing.T, args chan<- []byte, msgs ...any) *fakeLibvirtd {
	return startFake(t, func(s *fakeSession) {
		call, payload, err := s.read()
		if err != nil {
			return
		}
		if procedure(call.Procedure) != procStorageVolDownload {
			s.replyError(call, 1, "unexpected procedure")
			return
		}
		args <- payload
		s.reply(call, wire.OK, nil)
		send := func(typ wire.Type, payload []byte) {
			h := call
			h.Type, h.Status = typ, wire.Continue
			b := make([]byte, wire.MinFrame+len(payload))
			copy(b[wire.MinFrame:], payload)
			wire.PutHeader(b, h)
			s.write(b)
		}
		for _, m := range msgs {
			switch m := m.(type) {
			case string:
				send(wire.Stream, []byte(m))
			case int64:
				e := xdr.NewEncoder(nil)
				e.Int64(m) // virNetStreamHole: hyper length; unsigned int flags
				e.Uint32(0)
				send(wire.StreamHole, e.Bytes())
			}
		}
		send(wire.Stream, nil) // end of data
		for {
			h, _, err := s.read()
			if err != nil {
				return
			}
			if h.Type == wire.Stream && (h.Status == wire.OK || h.Status == wire.Error) {
				if h.Status == wire.OK {
					hh := h
					hh.Status = wire.OK
					b := make([]byte, wire.MinFrame)
					wire.PutHeader(b, hh)
					s.write(b)
				}
			}
		}
	})
}

// The arguments are laid out by hand, byte by byte, as remote_protocol.x declares them:
//
//	struct remote_storage_vol_download_args { remote_nonnull_storage_vol vol;
//	    unsigned hyper offset; unsigned hyper length; unsigned int flags; };
//	struct remote_nonnull_storage_vol { remote_nonnull_string pool; remote_nonnull_string name;
//	    remote_nonnull_string key; };
//
// with VIR_STORAGE_VOL_DOWNLOAD_SPARSE_STREAM = 1 << 0 for a file destination, and a hole as
// virnetprotocol.x's struct virNetStreamHole { hyper length; unsigned int flags; }.
func TestDownloadObservedWire(t *testing.T) {
	wantArgs := func(flags byte) []byte {
		return []byte{
			0, 0, 0, 1, 'p', 0, 0, 0, // pool "p", padded to 4
			0, 0, 0, 5, 'd', 'i', 's', 'k', '1', 0, 0, 0, // name "disk1"
			0, 0, 0, 4, '/', 'k', '/', 'd', // key "/k/d", no padding
			0, 0, 0, 0, 0, 0, 0, 0, // offset 0
			0, 0, 0, 0, 0, 0, 0, 0, // length 0: to the end
			0, 0, 0, flags,
		}
	}
	vol := StorageVol{Pool: "p", Name: "disk1", Key: "/k/d"}

	t.Run("file: sparse", func(t *testing.T) {
		args := make(chan []byte, 1)
		c := downloadPeer(t, args, "abc", int64(4096), "de", int64(10)).dial(t)
		dst, err := os.Create(filepath.Join(t.TempDir(), "out"))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = dst.Close() }()
		obs := &recordingObserver{}
		var last int64
		n, err := c.StorageVolDownloadObserved(testContext(t), vol, dst,
			DownloadOptions{Limit: 3 + 4096 + 2 + 10, Observer: obs, Progress: func(d int64) { last = d }})
		if err != nil || n != 4111 || last != 4111 {
			t.Fatalf("download = %d (progress %d), %v; want 4111 bytes", n, last, err)
		}
		if got := <-args; !bytes.Equal(got, wantArgs(1)) {
			t.Errorf("arguments\n got %x\nwant %x", got, wantArgs(1))
		}
		if got, want := strings.Join(obs.log, " "), "data:abc hole:4096 data:de hole:10"; got != want {
			t.Errorf("observer saw %q, want %q", got, want)
		}
		got, err := os.ReadFile(dst.Name())
		if err != nil {
			t.Fatal(err)
		}
		want := append(append(append([]byte("abc"), make([]byte, 4096)...), "de"...), make([]byte, 10)...)
		if !bytes.Equal(got, want) {
			t.Errorf("file holds %d bytes, not the stream's %d (trailing hole kept: %v)", len(got), len(want), len(got) == len(want))
		}
	})

	t.Run("writer: dense", func(t *testing.T) {
		args := make(chan []byte, 1)
		c := downloadPeer(t, args, "abc", "de").dial(t)
		var buf bytes.Buffer
		obs := &recordingObserver{}
		n, err := c.StorageVolDownloadObserved(testContext(t), vol, &buf, DownloadOptions{Limit: 5, Observer: obs})
		if err != nil || n != 5 || buf.String() != "abcde" {
			t.Fatalf("download = %q (%d), %v", buf.String(), n, err)
		}
		if got := <-args; !bytes.Equal(got, wantArgs(0)) {
			t.Errorf("arguments\n got %x\nwant %x", got, wantArgs(0))
		}
		if got := strings.Join(obs.log, " "); got != "data:abc data:de" {
			t.Errorf("observer saw %q", got)
		}
	})
}

// A peer that sends more than the limit (the volume's capacity) is cut off before the excess is
// written or observed, whether the excess comes as data or as a hole.
func TestDownloadOverLimit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		msgs    []any
		written int64
		saw     string
	}{
		{"data", []any{"abcd", "efghi"}, 4, "data:abcd"},
		{"hole", []any{"abcd", int64(5)}, 4, "data:abcd"},
		{"huge hole", []any{int64(maxHole)}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := downloadPeer(t, make(chan []byte, 1), tc.msgs...).dial(t)
			dst, err := os.Create(filepath.Join(t.TempDir(), "out"))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = dst.Close() }()
			obs := &recordingObserver{}
			n, err := c.StorageVolDownloadObserved(testContext(t), StorageVol{Pool: "p", Name: "v", Key: "/v"}, dst,
				DownloadOptions{Limit: 8, Observer: obs})
			if !errors.Is(err, ErrDownloadOverLimit) {
				t.Fatalf("download = %d, %v; want ErrDownloadOverLimit", n, err)
			}
			if n != tc.written || strings.Join(obs.log, " ") != tc.saw {
				t.Errorf("covered %d bytes, observer saw %q; want %d and %q", n, obs.log, tc.written, tc.saw)
			}
			if fi, err := dst.Stat(); err != nil || fi.Size() != tc.written {
				t.Errorf("destination holds %v bytes (%v), want %d", fi.Size(), err, tc.written)
			}
		})
	}
}

func TestDownloadOptionsAdmit(t *testing.T) {
	for _, tc := range []struct {
		limit, done, n int64
		ok             bool
	}{
		{0, 1 << 62, 1 << 62, true}, // no limit
		{10, 0, 10, true},
		{10, 5, 5, true},
		{10, 5, 6, false},
		{10, 0, 11, false},
		{10, 10, 1, false},
		{1 << 62, 1 << 62, 1 << 62, false}, // no overflow on the way
	} {
		err := DownloadOptions{Limit: tc.limit}.admit(tc.done, tc.n)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrDownloadOverLimit)) {
			t.Errorf("limit %d, done %d, +%d: %v, want ok=%v", tc.limit, tc.done, tc.n, err, tc.ok)
		}
	}
}
