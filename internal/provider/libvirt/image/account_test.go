package image

import (
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestAccountFor: only an account proven missing falls back to the build namespace's default.
func TestAccountFor(t *testing.T) {
	sa := schema.GroupResource{Resource: "serviceaccounts"}
	for _, tt := range []struct {
		name   string
		lookup error
		want   string
	}{
		{"the account exists", nil, "banlieue-provider-x-import"},
		{"the account does not exist", apierrors.NewNotFound(sa, "banlieue-provider-x-import"), fallbackAccount},
		{"the provider may not read it", apierrors.NewForbidden(sa, "banlieue-provider-x-import", errors.New("no")), "banlieue-provider-x-import"},
		{"the read failed otherwise", apierrors.NewServiceUnavailable("etcd"), "banlieue-provider-x-import"},
		{"the read timed out", errors.New("context deadline exceeded"), "banlieue-provider-x-import"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := accountFor("banlieue-provider-x-import", tt.lookup); got != tt.want {
				t.Errorf("accountFor = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestFallbackNote: a zone says so only of a Job that runs as the fallback instead of the
// provider's own account, and names both accounts and the grant.
func TestFallbackNote(t *testing.T) {
	for _, tt := range []struct {
		own, account, want string
	}{
		{"imp", "imp", ""},
		{"imp", fallbackAccount, "; ServiceAccount builds/imp does not exist, so the Job runs as builds/default, " +
			"which needs the import account's grant (get on the Provider, its credentials Secret and CA)"},
		// A provider configured to run as default has nothing to fall back from.
		{fallbackAccount, fallbackAccount, ""},
	} {
		if got := fallbackNote("builds", tt.own, tt.account); got != tt.want {
			t.Errorf("fallbackNote(%q, %q) = %q, want %q", tt.own, tt.account, got, tt.want)
		}
	}
}
