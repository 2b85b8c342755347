package install

import (
	"fmt"
	"slices"
	"testing"

	"banlieue.io/banlieue/internal/controller"
	"banlieue.io/banlieue/internal/imagebuilder"
	"banlieue.io/banlieue/internal/operator"
)

// TestChartWorkers: each role's --workers comes from its chart value, and left at the defaults
// the chart and config/default pass the binary's own defaults.
func TestChartWorkers(t *testing.T) {
	helm := helmBinary(t)
	defaults := map[string]int{"controller": controller.DefaultWorkers, "operator": operator.DefaultWorkers,
		"imagebuilder": imagebuilder.DefaultWorkers}
	for _, tt := range []struct {
		name      string
		rendering []byte
		want      map[string]int
	}{
		{"helm template (default values)", renderChart(t, helm), defaults},
		{"kubectl kustomize config/default", renderKustomize(t), defaults},
		{"helm template (workers set)", renderChart(t, helm, "--set", "controller.workers=12", "--set", "operator.workers=1",
			"--set", "imagebuilder.workers=64"), map[string]int{"controller": 12, "operator": 1, "imagebuilder": 64}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			objs := parseObjects(t, tt.rendering)
			for role, n := range tt.want {
				args := deploymentArgs(t, objs, "banlieue-"+role)
				if want := fmt.Sprintf("--workers=%d", n); !slices.Contains(args, want) {
					t.Errorf("%s args %q lack %s", role, args, want)
				}
			}
		})
	}
}
