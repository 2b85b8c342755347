package testenv

import (
	"strings"
	"sync"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// LogSink sends lines to the test log (seen with -v or on failure). A manager's goroutines still
// log while it stops, after the test may have ended, and testing panics on a Log after its test
// completed: lines written after the end are dropped.
type LogSink struct {
	mu    sync.Mutex
	t     testing.TB
	ended bool
}

// NewLogSink is a LogSink for t.
func NewLogSink(t testing.TB) *LogSink {
	s := &LogSink{t: t}
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.ended = true
	})
	return s
}

func (s *LogSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// SetLogger makes controller-runtime's process-wide logger write to a LogSink of t.
func SetLogger(t testing.TB) *LogSink {
	s := NewLogSink(t)
	ctrl.SetLogger(zap.New(zap.WriteTo(s)))
	return s
}
