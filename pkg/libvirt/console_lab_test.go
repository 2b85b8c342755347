package libvirt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// consoleDomainXML boots the tiny guest of hack/test-guest-image.sh from its disk with its
// serial port on a pty, the console libvirt's DOMAIN_OPEN_CONSOLE opens.
const consoleDomainXML = `<domain type='qemu'>
  <name>%s</name>
  <memory unit='MiB'>256</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type><boot dev='hd'/></os>
  <devices>
    <disk type='file' device='disk'><driver name='qemu' type='raw'/><source file='%s'/><target dev='vda' bus='virtio'/></disk>
    <serial type='pty'><target port='0'/></serial>
    <console type='pty'><target type='serial' port='0'/></console>
  </devices>
</domain>`

// A real guest's serial console through libvirtd: its output arrives, a typed line comes back
// (the guest's tty echoes it), a second session is refused unless it forces, a forced one takes
// over and the first ends with libvirtd's error, and the connection keeps serving calls.
func TestLabConsoleRoundTrip(t *testing.T) {
	l := needLab(t)
	c := l.dial(t, "qemu:///system")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // a TCG boot on a busy machine
	defer cancel()
	pool := testPool(t, l, c)

	out, err := exec.Command(filepath.Join("..", "..", "hack", "test-guest-image.sh")).Output()
	if err != nil {
		t.Fatalf("hack/test-guest-image.sh: %v", err)
	}
	src, err := os.Open(filepath.Join(strings.TrimSpace(string(out)), "guest.raw"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = src.Close() }() // read only
	st, err := src.Stat()
	if err != nil {
		t.Fatal(err)
	}
	disk := createVol(t, c, pool, "guest.raw", st.Size())
	if err := c.StorageVolUploadSparse(ctx, disk, src, nil); err != nil {
		t.Fatal(err)
	}

	name := uniqueName("console")
	dom, err := c.DomainDefineXML(ctx, fmt.Sprintf(consoleDomainXML, name, disk.Key), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.DomainDestroy(testContext(t), dom)
		_ = c.DomainUndefine(testContext(t), dom, UndefineManagedSave|UndefineNVRAM|UndefineTPM)
	})
	if _, err := c.OpenConsole(ctx, dom, "", 0); err == nil {
		t.Fatal("OpenConsole of a stopped domain succeeded")
	}
	if dom, err = c.DomainCreate(ctx, dom, 0); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	con, err := c.OpenConsole(ctx, dom, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = con.Close() }() // closed below; this is for an early failure
	r := &consoleReader{t: t, con: con}
	// The guest's init prints BANLIEUE-BOOT once it holds the serial port.
	r.until("BANLIEUE-BOOT", 150*time.Second)
	t.Logf("guest output on the console %v after DOMAIN_CREATE", time.Since(start).Round(time.Millisecond))
	r.echo("first")
	if _, err := c.LibVersion(ctx); err != nil {
		t.Fatalf("a call while the console is open: %v", err)
	}

	_, err = c.OpenConsole(ctx, dom, "", 0)
	var busy *Error
	if !errors.As(err, &busy) || busy.Code != ErrOperationFailed {
		t.Fatalf("a second session without ConsoleForce: %v, want libvirtd's error %d (a session holds the console)", err, ErrOperationFailed)
	}
	t.Logf("second session refused: %v", err)
	forced, err := c.OpenConsole(ctx, dom, "", ConsoleForce)
	if err != nil {
		t.Fatalf("forced console: %v", err)
	}
	// libvirtd ends the session it took the console from with an I/O error on its stream.
	ended := r.drain(10 * time.Second)
	if !errors.As(ended, new(*Error)) {
		t.Fatalf("the first session after a forced open: %v, want libvirtd's error", ended)
	}
	t.Logf("the first session ended with: %v", ended)
	if err := con.Close(); err != nil {
		t.Fatalf("closing the ended session: %v", err)
	}
	fr := &consoleReader{t: t, con: forced}
	fr.echo("forced")
	if err := forced.Close(); err != nil {
		t.Fatalf("closing the forced session: %v", err)
	}
	// Both sessions are gone on libvirtd's side: a new one opens without forcing. libvirtd frees
	// the console once it has handled the closed stream, which may come a moment after Close.
	deadline := time.Now().Add(10 * time.Second)
	for {
		again, err := c.OpenConsole(ctx, dom, "", 0)
		if err == nil {
			_ = again.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("console after both sessions closed: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// consoleReader reads a console in the background so a test waits for text with a deadline.
type consoleReader struct {
	t      *testing.T
	con    *Console
	seen   bytes.Buffer
	chunks chan []byte
	err    error
}

func (r *consoleReader) start() {
	if r.chunks != nil {
		return
	}
	r.chunks = make(chan []byte, 64)
	go func() {
		defer close(r.chunks)
		for {
			b := make([]byte, 4096)
			n, err := r.con.Read(b)
			if n > 0 {
				r.chunks <- b[:n]
			}
			if err != nil {
				r.err = err
				return
			}
		}
	}()
}

// until waits for s in the console output read since the last until.
func (r *consoleReader) until(s string, timeout time.Duration) {
	r.t.Helper()
	r.start()
	deadline := time.After(timeout)
	for !bytes.Contains(r.seen.Bytes(), []byte(s)) {
		select {
		case b, ok := <-r.chunks:
			if !ok {
				r.t.Fatalf("console ended (%v) before %q; read:\n%s", r.err, s, r.seen.String())
			}
			r.seen.Write(b)
		case <-deadline:
			r.t.Fatalf("no %q on the console within %v; read:\n%s", s, timeout, r.seen.String())
		}
	}
	i := bytes.Index(r.seen.Bytes(), []byte(s))
	r.seen.Next(i + len(s))
}

// echo types a unique line and waits for the guest's tty to echo it.
func (r *consoleReader) echo(prefix string) {
	r.t.Helper()
	line := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())
	start := time.Now()
	if _, err := r.con.Write([]byte(line + "\r")); err != nil {
		r.t.Fatal(err)
	}
	r.until(line, 10*time.Second)
	r.t.Logf("%s: typed line echoed in %v", prefix, time.Since(start).Round(time.Millisecond))
}

// drain reads until the console ends and returns why.
func (r *consoleReader) drain(timeout time.Duration) error {
	r.start()
	deadline := time.After(timeout)
	for {
		select {
		case _, ok := <-r.chunks:
			if !ok {
				return r.err
			}
		case <-deadline:
			return fmt.Errorf("still open after %v", timeout)
		}
	}
}
