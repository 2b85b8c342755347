package testenv

import (
	"maps"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// RegistrySample is the series name{labels} of controller-runtime's registry, which every role
// serves on /metrics: a counter's or a gauge's value, or a histogram's observation count. labels
// must be the series' whole label set; ok is false when there is no such series.
func RegistrySample(t testing.TB, name string, labels map[string]string) (value float64, ok bool) {
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
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if !maps.Equal(got, labels) {
				continue
			}
			switch {
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount()), true
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue(), true
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// RegistrySeries counts the series of the family name in controller-runtime's registry.
func RegistrySeries(t testing.TB, name string) int {
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

// RegistryHistogramSum is the sum of all observations of the histogram family name, over its
// series, in controller-runtime's registry.
func RegistryHistogramSum(t testing.TB, name string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				total += m.GetHistogram().GetSampleSum()
			}
		}
	}
	return total
}
