package libvirt

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/metrics"

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
	if got, ok := sample(t, "banlieue_libvirt_rpc_errors_total", "DOMAIN_CREATE_WITH_FLAGS", "transport"); !ok || got != 0 {
		t.Fatalf("pre-created error counter = %v (present %v), want 0", got, ok)
	}
	value := func(name, code string) float64 {
		v, _ := sample(t, name, proc, code)
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
	if n := series(t, errs); n != 2*len(libvirt.Procedures()) {
		t.Errorf("%d error series, want 2 per procedure (%d): only the table's names and two codes", n, 2*len(libvirt.Procedures()))
	}
}

// sample is the value of a counter, or the observation count of a histogram, with labels
// procedure and code in the controller-runtime registry the roles serve.
func sample(t *testing.T, name, procedure, code string) (float64, bool) {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["procedure"] != procedure || labels["code"] != code {
				continue
			}
			if h := m.GetHistogram(); h != nil {
				return float64(h.GetSampleCount()), true
			}
			return m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}

// series counts the series of one metric family.
func series(t *testing.T, name string) int {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return len(f.GetMetric())
		}
	}
	return 0
}
