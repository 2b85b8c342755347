package image

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"

	"banlieue.io/banlieue/pkg/libvirt"
)

// Intervals between progress reports. Job logs get a line every few seconds, enough to see a
// transfer move without flooding the log of a multi-gigabyte import; a terminal gets a bar
// redrawn in place.
const (
	logInterval = 5 * time.Second
	barInterval = 200 * time.Millisecond
	barWidth    = 30
)

// progress turns byte counts into human reports.
type progress struct {
	out      io.Writer
	total    int64
	terminal bool
	now      func() time.Time
	start    time.Time
	last     time.Time
}

// NewProgress reports an upload of total bytes to out: a bar when out is a terminal, otherwise
// one line every few seconds with bytes, percent, MB/s and ETA. The report is advisory: a failed
// write to out is ignored and never fails the upload.
func NewProgress(out io.Writer, total int64) libvirt.Progress {
	f, ok := out.(*os.File)
	p := &progress{out: out, total: total, terminal: ok && term.IsTerminal(int(f.Fd())), now: time.Now}
	p.start, p.last = p.now(), p.now()
	return p.report
}

func (p *progress) report(done int64) {
	now := p.now()
	interval := logInterval
	if p.terminal {
		interval = barInterval
	}
	final := done >= p.total
	if !final && now.Sub(p.last) < interval {
		return
	}
	p.last = now
	line := progressLine(done, p.total, now.Sub(p.start))
	switch {
	case p.terminal && final:
		_, _ = fmt.Fprintf(p.out, "\r%s %s\n", bar(done, p.total), line)
	case p.terminal:
		_, _ = fmt.Fprintf(p.out, "\r%s %s", bar(done, p.total), line)
	case !final:
		_, _ = fmt.Fprintln(p.out, line)
	}
}

// progressLine is e.g. "1.5 GiB / 4.0 GiB (37%), 210.3 MB/s, ETA 12s". Holes count as done:
// they are part of the image and move at the speed of a message.
func progressLine(done, total int64, elapsed time.Duration) string {
	pct := 0
	if total > 0 {
		pct = int(done * 100 / total)
	}
	line := fmt.Sprintf("%s / %s (%d%%), %s", formatBytes(done), formatBytes(total), pct, formatRate(done, elapsed))
	if eta, ok := remaining(done, total, elapsed); ok {
		line += ", ETA " + eta.String()
	}
	return line
}

func remaining(done, total int64, elapsed time.Duration) (time.Duration, bool) {
	if done <= 0 || done >= total || elapsed <= 0 {
		return 0, false
	}
	eta := time.Duration(float64(elapsed) * float64(total-done) / float64(done))
	return eta.Round(time.Second), true
}

func bar(done, total int64) string {
	n := barWidth
	if total > 0 {
		n = int(done * barWidth / total)
	}
	return "[" + strings.Repeat("=", n) + strings.Repeat(" ", barWidth-n) + "]"
}

// formatRate is decimal megabytes per second, the unit disks and links are sold in.
func formatRate(n int64, elapsed time.Duration) string {
	if elapsed <= 0 {
		return "- MB/s"
	}
	return fmt.Sprintf("%.1f MB/s", float64(n)/1e6/elapsed.Seconds())
}

// formatBytes is binary units, the ones image and volume sizes are given in.
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
