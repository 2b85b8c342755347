//go:build bench || loadbench

// Package metric reads Prometheus series the benchmarks gather, from a registry or a scrape.
package metric

import (
	"slices"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// Label is the value of m's label name, empty when m has none.
func Label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// Histogram is a cumulative Prometheus histogram: counts[i] observations ≤ bounds[i].
type Histogram struct {
	bounds []float64
	counts []float64
	// N is how many observations there are.
	N float64
}

// Minus is h's observations since earlier.
func (h Histogram) Minus(earlier Histogram) Histogram {
	out := Histogram{bounds: h.bounds, counts: slices.Clone(h.counts), N: h.N - earlier.N}
	if len(earlier.counts) == len(h.counts) {
		for i := range out.counts {
			out.counts[i] -= earlier.counts[i]
		}
	}
	return out
}

// Add adds m's buckets and count.
func (h *Histogram) Add(m *dto.Histogram) {
	if h.bounds == nil {
		for _, b := range m.GetBucket() {
			h.bounds = append(h.bounds, b.GetUpperBound())
			h.counts = append(h.counts, 0)
		}
	}
	for i, b := range m.GetBucket() {
		if i < len(h.counts) {
			h.counts[i] += float64(b.GetCumulativeCount())
		}
	}
	h.N += float64(m.GetSampleCount())
}

// Quantile estimates the q-quantile as Prometheus' histogram_quantile does: linearly within the
// bucket that holds it. Beyond the last bound it is that bound.
func (h Histogram) Quantile(q float64) time.Duration {
	if h.N == 0 {
		return 0
	}
	rank := q * h.N
	lower, below := 0.0, 0.0
	for i, c := range h.counts {
		if c >= rank {
			frac := 0.0
			if c > below {
				frac = (rank - below) / (c - below)
			}
			return time.Duration((lower + (h.bounds[i]-lower)*frac) * float64(time.Second))
		}
		lower, below = h.bounds[i], c
	}
	return time.Duration(h.bounds[len(h.bounds)-1] * float64(time.Second))
}
