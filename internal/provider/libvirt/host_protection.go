package libvirt

import (
	"errors"
	"time"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	"banlieue.io/banlieue/internal/provider/libvirt/hostconn"
)

// hostReason is the Ready reason of a pass refused by its host's circuit breaker (ADR-0133).
func hostReason(err error) string {
	var u *hostconn.HostUnavailableError
	if errors.As(err, &u) {
		return infrav1.ReasonHostUnavailable
	}
	return ""
}

// hostRetry is when to look again at a pass refused by its host's circuit breaker: when the
// breaker lets a dial through, not every ErrorRetry, which would only be refused again. Zero
// for any other error.
func hostRetry(err error) time.Duration {
	var u *hostconn.HostUnavailableError
	if errors.As(err, &u) {
		return max(u.RetryAfter, time.Second)
	}
	return 0
}
