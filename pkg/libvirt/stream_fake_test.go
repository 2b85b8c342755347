package libvirt

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"banlieue.io/banlieue/pkg/libvirt/internal/wire"
)

// libvirtd failing a stream mid-upload (disk full, say) stops the upload at once with its
// error, and the session stays usable.
func TestUploadStopsAtServerStreamError(t *testing.T) {
	packets := make(chan int, 100)
	f := startFake(t, func(s *fakeSession) {
		call, _, err := s.read()
		if err != nil {
			return
		}
		s.reply(call, wire.OK, nil)
		failed := false
		for {
			h, p, err := s.read()
			if err != nil {
				return
			}
			switch {
			case h.Type == wire.Stream && h.Status == wire.Continue && !failed:
				packets <- len(p)
				failed = true
				e := call
				e.Type, e.Status = wire.Stream, wire.Error
				s.replyError(e, 38, "unable to write: No space left on device")
			case h.Type == wire.Call:
				s.reply(h, wire.OK, libVersionReply(1))
			}
		}
	})
	c := f.dial(t)
	const size = 64 * wire.MaxStreamData
	err := c.StorageVolUpload(testContext(t), StorageVol{Pool: "p", Name: "v", Key: "/v"}, bytes.NewReader(make([]byte, size)), size, nil)
	var le *Error
	if !errors.As(err, &le) || le.Code != 38 {
		t.Fatalf("err = %v, want the server's error", err)
	}
	if v, err := c.LibVersion(testContext(t)); err != nil || v != 1 {
		t.Fatalf("after a failed upload: %d, %v", v, err)
	}
	if got := <-packets; got != wire.MaxStreamData {
		t.Fatalf("first data packet carried %d bytes, want %d", got, wire.MaxStreamData)
	}
}

// libvirtd may start streaming a download before it sends the reply to the call; that data is
// the start of the volume, not a protocol violation.
func TestDownloadDataBeforeReply(t *testing.T) {
	f := startFake(t, func(s *fakeSession) {
		call, _, err := s.read()
		if err != nil {
			return
		}
		data := func(st wire.Status, payload []byte) {
			h := call
			h.Type, h.Status = wire.Stream, st
			b := make([]byte, wire.MinFrame+len(payload))
			copy(b[wire.MinFrame:], payload)
			wire.PutHeader(b, h)
			s.write(b)
		}
		data(wire.Continue, []byte("early "))
		s.reply(call, wire.OK, nil)
		data(wire.Continue, []byte("and late"))
		data(wire.Continue, nil) // end of data
		for {
			h, _, err := s.read()
			if err != nil {
				return
			}
			if h.Type == wire.Stream && h.Status == wire.OK {
				data(wire.OK, nil)
			}
		}
	})
	c := f.dial(t)
	var buf bytes.Buffer
	n, err := c.StorageVolDownload(testContext(t), StorageVol{Pool: "p", Name: "v", Key: "/v"}, &buf, nil)
	if err != nil || n != 14 || buf.String() != "early and late" {
		t.Fatalf("download = %q (%d bytes), %v", buf.String(), n, err)
	}
}

// A stream error that cannot be decoded is a protocol violation like any other: the download
// fails with it and the connection ends, even though the peer keeps it open.
func TestDownloadUndecodableStreamErrorIsFatal(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	f := startFake(t, func(s *fakeSession) {
		call, _, err := s.read()
		if err != nil {
			return
		}
		s.reply(call, wire.OK, nil)
		h := call
		h.Type, h.Status = wire.Stream, wire.Error
		b := make([]byte, wire.MinFrame+3)
		wire.PutHeader(b, h)
		s.write(b)
		<-release
	})
	c := f.dial(t)
	_, err := c.StorageVolDownload(testContext(t), StorageVol{Pool: "p", Name: "v", Key: "/v"}, io.Discard, nil)
	if !errors.As(err, new(*ProtocolError)) {
		t.Fatalf("err = %v, want a ProtocolError", err)
	}
	select {
	case <-c.Done():
	case <-time.After(time.Second):
		t.Fatal("the connection is still open after an undecodable stream error")
	}
}
