package testenv

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Allowed fails t unless err is nil: the request what was meant to be granted.
func Allowed(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: want allowed, got %v", what, err)
	}
}

// Forbidden fails t unless err is the API server's 403: the request what was meant to be
// refused by authorization, not by anything else (a 404 would prove nothing).
func Forbidden(t testing.TB, what string, err error) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Errorf("%s: want 403 Forbidden, got %v", what, err)
	}
}
