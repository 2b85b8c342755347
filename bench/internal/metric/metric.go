//go:build bench || loadbench

// Package metric reads Prometheus series the benchmarks gather, from a registry or a scrape.
package metric

import dto "github.com/prometheus/client_model/go"

// Label is the value of m's label name, empty when m has none.
func Label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
