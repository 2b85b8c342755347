package testenv

import (
	"errors"
	"testing"
	"time"
)

// Eventually calls f every 100 ms until it returns nil, and fails t with what and f's last error
// once timeout has passed. It is the one poll loop of every suite.
func Eventually(t testing.TB, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached in %s; last: %v", what, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Unmet is nil when ok, and otherwise an error saying last: for Eventually conditions that
// compute whether they hold and, apart, a description of what they saw.
func Unmet(ok bool, last string) error {
	if ok {
		return nil
	}
	return errors.New(last)
}
