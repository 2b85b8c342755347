package libvirt

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/pkg/libvirt"
)

func TestRPCCode(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"success", nil, "ok"},
		{"no such domain", &libvirt.Error{Code: libvirt.ErrNoDomain, Procedure: "DOMAIN_LOOKUP_BY_NAME"}, "not_found"},
		{"no such volume, wrapped", fmt.Errorf("step: %w", &libvirt.Error{Code: libvirt.ErrNoStorageVol}), "not_found"},
		{"libvirtd refused (operation failed)", &libvirt.Error{Code: 9, Message: "operation failed"}, "libvirt_error"},
		{"connection lost", &libvirt.ConnError{Op: "read", Addr: "h:16514", Err: errors.New("EOF")}, "transport"},
		{"protocol violation", &libvirt.ProtocolError{Msg: "x"}, "transport"},
		{"client timeout", &libvirt.TimeoutError{Op: "DOMAIN_GET_STATE", After: time.Second}, "transport"},
		{"caller gave up", fmt.Errorf("libvirt DOMAIN_GET_STATE: %w", context.Canceled), "transport"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rpcCode(tt.err); got != tt.want {
				t.Errorf("rpcCode(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}

// Each call is one histogram observation under its outcome, and one error only when it failed:
// a not-found answer is timed but is no error.
func TestObserveRPC(t *testing.T) {
	observe := RPCObserver()
	const proc = "STORAGE_VOL_LOOKUP_BY_NAME"
	if got, ok := testenv.RegistrySample(t, "banlieue_libvirt_rpc_errors_total", map[string]string{"procedure": "DOMAIN_CREATE_WITH_FLAGS", "code": "transport"}); !ok || got != 0 {
		t.Fatalf("pre-created error counter = %v (present %v), want 0", got, ok)
	}
	value := func(name, code string) float64 {
		v, _ := testenv.RegistrySample(t, name, map[string]string{"procedure": proc, "code": code})
		return v
	}
	const hist, errs = "banlieue_libvirt_rpc_duration_seconds", "banlieue_libvirt_rpc_errors_total"
	before := map[string]float64{}
	for _, code := range []string{"ok", "not_found", "libvirt_error"} {
		before[hist+code], before[errs+code] = value(hist, code), value(errs, code)
	}

	observe(proc, 3*time.Millisecond, nil)
	observe(proc, 2*time.Millisecond, &libvirt.Error{Code: libvirt.ErrNoStorageVol})
	observe(proc, 4*time.Millisecond, &libvirt.Error{Code: 1})

	for _, tt := range []struct {
		name, code string
		want       float64
	}{
		{hist, "ok", 1}, {hist, "not_found", 1}, {hist, "libvirt_error", 1},
		{errs, "ok", 0}, {errs, "not_found", 0}, {errs, "libvirt_error", 1},
	} {
		if d := value(tt.name, tt.code) - before[tt.name+tt.code]; d != tt.want {
			t.Errorf("%s{code=%q} grew by %v, want %v", tt.name, tt.code, d, tt.want)
		}
	}
	if n := testenv.RegistrySeries(t, errs); n != 2*len(libvirt.Procedures()) {
		t.Errorf("%d error series, want 2 per procedure (%d): only the table's names and two codes", n, 2*len(libvirt.Procedures()))
	}
}
