package libvirt

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"banlieue.io/banlieue/pkg/libvirt"
)

// What the relay tells the user when libvirtd refuses a console: a stopped domain or a console
// in use is something the user can resolve (409), anything else is the host's (502).
func TestConsoleErrorCode(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{&libvirt.Error{Code: libvirt.ErrOperationFailed, Message: "Active console session exists for this domain"}, http.StatusConflict},
		{fmt.Errorf("wrapped: %w", &libvirt.Error{Code: libvirt.ErrOperationInvalid, Message: "domain is not running"}), http.StatusConflict},
		{&libvirt.Error{Code: 1, Message: "internal error"}, http.StatusBadGateway},
		{errors.New("connection closed"), http.StatusBadGateway},
	} {
		if got := consoleErrorCode(c.err); got != c.want {
			t.Errorf("%v: %d, want %d", c.err, got, c.want)
		}
	}
}
