package vmexport

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestEncodeReport(t *testing.T) {
	ok := MachineResult{Result: Result{Size: 1 << 20, Digest: "sha256:" + strings.Repeat("a", 64), Capacity: 10 << 30},
		Volume: "team-a-web-01-root.qcow2", Image: "registry.example/web@sha256:" + strings.Repeat("b", 64)}
	for _, tc := range []struct {
		name string
		res  MachineResult
		err  error
		want Report
	}{
		{"published", ok, nil, Report{MachineResult: &ok}},
		{"flatten failed", ok, &StepError{StepFlatten, errors.New("no space left in pool default")},
			Report{Step: StepFlatten, Error: "export Flatten: no space left in pool default"}},
		{"running VM", MachineResult{}, &StepError{StepFlatten, fmt.Errorf("domain d is Running: %w", ErrVMRunning)},
			Report{Step: StepFlatten, Error: "export Flatten: domain d is Running: " + ErrVMRunning.Error(), VMRunning: true}},
		{"no step", MachineResult{}, errors.New("reading LibvirtMachine team-a/web-01: forbidden"),
			Report{Error: "reading LibvirtMachine team-a/web-01: forbidden"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got Report
			if err := json.Unmarshal(EncodeReport(tc.res, tc.err), &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("report %+v, want %+v", got, tc.want)
			}
		})
	}
	// A huge error (a host's message, full of characters JSON escapes) is cut to fit, the step kept.
	huge := &StepError{StepPublish, errors.New(strings.Repeat("<\"é\">", 5000))}
	out := EncodeReport(MachineResult{}, huge)
	var got Report
	if strings.Contains(string(out), `"Digest"`) {
		t.Errorf("a failure's report carries the result's fields: %.200s", out)
	}
	if err := json.Unmarshal(out, &got); err != nil || len(out) > maxReport || got.Step != StepPublish ||
		!strings.HasPrefix(got.Error, "export Publish: <") || !strings.HasSuffix(got.Error, "…") {
		t.Errorf("huge error: %d bytes (max %d), step %q, error starts %.40q: %v", len(out), maxReport, got.Step, got.Error, err)
	}
}

// TestResolveVolumeGiven: the Job's form (--volume and its fields) reads no machine and needs
// every field, --id included, and exactly one of --machine and --volume.
func TestResolveVolumeGiven(t *testing.T) {
	full := VolumeRef{ProviderNamespace: "infra", Provider: "host-a", Domain: "team-a-web-01", Pool: "default", Volume: "team-a-web-01-root.qcow2"}
	for _, tc := range []struct {
		name    string
		o       MachineOptions
		wantErr string
	}{
		{"given", MachineOptions{Volume: &full, ID: "uid-1"}, ""},
		{"no id", MachineOptions{Volume: &full}, "--volume needs --id"},
		{"no pool", MachineOptions{Volume: &VolumeRef{ProviderNamespace: "infra", Provider: "host-a", Domain: "d", Volume: "v"}, ID: "u"}, "--volume needs --pool"},
		{"both", MachineOptions{Volume: &full, Machine: "web-01", ID: "u"}, "exactly one of --machine and --volume"},
		{"neither", MachineOptions{ID: "u"}, "exactly one of --machine and --volume"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			got, err := resolveVolume(t.Context(), nil, &o) // a nil reader: the Job's form reads nothing
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != full {
				t.Errorf("resolveVolume = %+v, %v; want %+v", got, err, full)
			}
		})
	}
}
