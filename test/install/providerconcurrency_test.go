package install

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"banlieue.io/banlieue/internal/provider/libvirt/hostconn"
	libvirtrole "banlieue.io/banlieue/internal/provider/libvirt/role"
)

// TestChartProviderConcurrency: the shipped ProviderClass spells out the provider binary's own
// defaults for its workers and host limits (so the operator passes what the binary would do
// anyway), in the chart and in config/default alike, and the chart's values replace them.
func TestChartProviderConcurrency(t *testing.T) {
	helm := helmBinary(t)
	// JSON numbers.
	defaults := map[string]any{"workers": float64(libvirtrole.DefaultWorkers),
		"hostDomainOperations": float64(hostconn.DefaultLimits.DomainOperations), "hostVolumeUploads": float64(hostconn.DefaultLimits.VolumeUploads)}
	for _, tt := range []struct {
		name      string
		rendering []byte
		want      map[string]any
	}{
		{"helm template (default values)", renderChart(t, helm, "--api-versions", providerClassAPI), defaults},
		{"kubectl kustomize config/default", renderKustomize(t), defaults},
		{"helm template (concurrency set)", renderChart(t, helm, "--api-versions", providerClassAPI,
			"--set", "providerClass.concurrency.workers=32", "--set", "providerClass.concurrency.hostDomainOperations=2",
			"--set", "providerClass.concurrency.hostVolumeUploads=1"),
			map[string]any{"workers": float64(32), "hostDomainOperations": float64(2), "hostVolumeUploads": float64(1)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var found bool
			for _, o := range parseObjects(t, tt.rendering) {
				if o.GetKind() != "ProviderClass" {
					continue
				}
				found = true
				got, _, err := unstructured.NestedMap(o.Object, "spec", "concurrency")
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("ProviderClass %s concurrency %v, want %v", o.GetName(), got, tt.want)
				}
			}
			if !found {
				t.Fatal("no ProviderClass rendered")
			}
		})
	}
}
