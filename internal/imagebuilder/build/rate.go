package build

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// idleTimeout cancels a body that delivers nothing at all; rateWindow catches one that
	// delivers too little to ever finish (a byte every few seconds).
	idleTimeout = 60 * time.Second
	rateWindow  = time.Minute
)

// watchedBody is a response body under both watches: it cancels the request when nothing
// arrives for idleTimeout, and when fewer than minRate bytes per second arrived over a
// window. stalled says which one fired.
type watchedBody struct {
	r      io.Reader
	idle   *time.Timer
	window *time.Timer
	n      atomic.Int64 // bytes in the current window

	mu      sync.Mutex
	reason  error
	stopped bool
}

// watch starts both watches on r; cancel aborts the request. A minRate of 0 only watches for
// idleness. stop must run when the body is done.
func watch(r io.Reader, minRate int64, window time.Duration, cancel func()) *watchedBody {
	b := &watchedBody{r: r}
	b.idle = time.AfterFunc(idleTimeout, func() {
		b.stall(fmt.Errorf("no data for %s", idleTimeout))
		cancel()
	})
	if minRate > 0 {
		need := minRate * window.Milliseconds() / 1000
		check := func() {
			got := b.n.Swap(0)
			if got == 0 {
				// Nothing at all is the idle watch's case, whichever timer fires first: the
				// server stalled, and a resume may find it moving again.
				b.stall(fmt.Errorf("no data for %s", window))
				cancel()
				return
			}
			if got < need {
				b.stall(&RefusedError{Rule: "--" + FlagMinTransferRate + " " + quantityString(minRate) + minTransferRateSuffix,
					Seen: fmt.Sprintf("%d bytes in the last %s", got, window)})
				cancel()
				return
			}
			b.mu.Lock()
			defer b.mu.Unlock()
			if !b.stopped {
				b.window.Reset(window)
			}
		}
		b.mu.Lock() // check may not run before b.window is set
		b.window = time.AfterFunc(window, check)
		b.mu.Unlock()
	}
	return b
}

func (b *watchedBody) stall(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.reason == nil {
		b.reason = err
	}
}

// stalled is why a watch cancelled the request, or nil.
func (b *watchedBody) stalled() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.reason
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.n.Add(int64(n))
	b.idle.Reset(idleTimeout)
	return n, err
}

func (b *watchedBody) stop() {
	b.idle.Stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stopped = true
	if b.window != nil {
		b.window.Stop()
	}
}
