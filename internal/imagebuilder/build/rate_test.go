package build

import (
	"io"
	"strings"
	"testing"
	"time"
)

// A body that sends nothing is idle (cut and resumed); one that sends too little is refused.
func TestWatchTellsIdleFromSlow(t *testing.T) {
	for _, tt := range []struct {
		name    string
		send    int // bytes sent at once, then nothing
		refused bool
		want    string
	}{
		{"nothing", 0, false, "no data for 200ms"},
		{"too little", 10, true, "source refused by --min-transfer-rate 1Ki/s: 10 bytes in the last 200ms"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, w := io.Pipe()
			cancelled := make(chan struct{})
			b := watch(r, 1<<10, 200*time.Millisecond, func() { close(cancelled) })
			defer b.stop()
			go func() { _, _ = w.Write(make([]byte, tt.send)) }()
			if tt.send > 0 {
				if _, err := io.ReadFull(b, make([]byte, tt.send)); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case <-cancelled:
			case <-time.After(5 * time.Second):
				t.Fatal("the watch never cancelled")
			}
			err := b.stalled()
			if err == nil || isRefused(err) != tt.refused || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("stalled() = %v, want %q (refused %v)", err, tt.want, tt.refused)
			}
			_ = w.Close()
		})
	}
}
