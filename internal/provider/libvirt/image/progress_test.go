package image

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestProgressLine(t *testing.T) {
	got := progressLine(1<<30, 4<<30, 10*time.Second)
	if want := "1.0 GiB / 4.0 GiB (25%), 107.4 MB/s, ETA 30s"; got != want {
		t.Errorf("progressLine = %q, want %q", got, want)
	}
	if got := progressLine(4<<30, 4<<30, 10*time.Second); strings.Contains(got, "ETA") {
		t.Errorf("a finished transfer has no ETA: %q", got)
	}
	if formatBytes(512) != "512 B" || formatBytes(1536) != "1.5 KiB" {
		t.Errorf("formatBytes: %s %s", formatBytes(512), formatBytes(1536))
	}
}

func TestProgressLogsEveryFewSeconds(t *testing.T) {
	var out bytes.Buffer
	now := time.Unix(0, 0)
	p := &progress{out: &out, total: 100 << 20, now: func() time.Time { return now }, start: now, last: now}
	for i := int64(1); i <= 100; i++ {
		now = now.Add(200 * time.Millisecond) // 20 s in all
		p.report(i << 20)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 { // at 5, 10 and 15 s; the importer prints the final summary itself
		t.Fatalf("want a line every 5 s, got %d:\n%s", len(lines), out.String())
	}
	if !strings.HasPrefix(lines[0], "25.0 MiB / 100.0 MiB (25%), 5.2 MB/s, ETA 15s") {
		t.Errorf("line = %q", lines[0])
	}
}
