package monitoring

import (
	"slices"
	"strings"
	"testing"
)

// metricNames are the metric names a PromQL expression selects: every identifier that is not a
// function or aggregation (followed by "("), a keyword, a label inside {…} or a grouping list
// (by, without, on, ignoring, group_left, group_right), a duration inside […], a number or a
// Grafana variable ($name). It is a scanner, not a parser: enough for the kit's own queries,
// whose every name the series test then looks up.
func metricNames(expr string) []string {
	var names []string
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			i = skipString(expr, i)
		case c == '{':
			i = skipPast(expr, i, '}')
		case c == '[':
			i = skipPast(expr, i, ']')
		case c == '$' || c >= '0' && c <= '9' || c == '.':
			// A variable, a number (0.99, 1e3) or a duration (5m) is one run of word characters.
			i++
			for i < len(expr) && (isIdent(expr[i]) || expr[i] == '.') {
				i++
			}
		case isIdentStart(c):
			j := i
			for j < len(expr) && isIdent(expr[j]) {
				j++
			}
			word := expr[i:j]
			k := j
			for k < len(expr) && (expr[k] == ' ' || expr[k] == '\t' || expr[k] == '\n') {
				k++
			}
			call := k < len(expr) && expr[k] == '('
			switch {
			case groupings[word] && call:
				j = skipPast(expr, k, ')')
			case call, keywords[word], aggregations[word]:
			default:
				if !slices.Contains(names, word) {
					names = append(names, word)
				}
			}
			i = j
		default:
			i++
		}
	}
	return names
}

var (
	groupings    = set("by", "without", "on", "ignoring", "group_left", "group_right")
	keywords     = set("and", "or", "unless", "bool", "offset", "inf", "nan", "atan2")
	aggregations = set("sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
		"bottomk", "topk", "quantile", "limitk", "limit_ratio")
)

func set(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
func isIdent(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

// skipString returns the index just past the string literal opening at i (backslash escapes
// count in "…" and '…', not in `…`).
func skipString(expr string, i int) int {
	q := expr[i]
	for j := i + 1; j < len(expr); j++ {
		switch {
		case expr[j] == '\\' && q != '`':
			j++
		case expr[j] == q:
			return j + 1
		}
	}
	return len(expr)
}

// skipPast returns the index just past the first close at or after i outside string literals.
func skipPast(expr string, i int, close byte) int {
	for j := i + 1; j < len(expr); {
		switch expr[j] {
		case close:
			return j + 1
		case '"', '\'', '`':
			j = skipString(expr, j)
		default:
			j++
		}
	}
	return len(expr)
}

// sampleNames are the metric names of the samples in a Prometheus text exposition: what a
// query can select (a histogram's _bucket, _sum and _count, not its family name).
func sampleNames(body string) map[string]bool {
	names := map[string]bool{}
	for _, line := range strings.Split(body, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		if end := strings.IndexAny(line, "{ "); end > 0 {
			names[line[:end]] = true
		}
	}
	return names
}

func TestMetricNames(t *testing.T) {
	for _, tt := range []struct {
		expr string
		want []string
	}{
		{`banlieue_leader`, []string{"banlieue_leader"}},
		{`sum by (namespace, role) (banlieue_leader) == 0`, []string{"banlieue_leader"}},
		{`sum(rate(a_total{result="error", x=~"}{[b]"}[5m])) / sum without(le) (rate(b_total[$__rate_interval]))`, []string{"a_total", "b_total"}},
		{`histogram_quantile(0.99, sum by (controller, le) (rate(d_bucket[5m])))`, []string{"d_bucket"}},
		{`absent(up{job="x"}) or absent(c) unless on(pod) group_left(node) kube_pod_info offset 1h`, []string{"up", "c", "kube_pod_info"}},
		{`max_over_time(x[1h:5m]) > bool 1e3 and y`, []string{"x", "y"}},
		{`{__name__="z"}`, nil},
		{`topk (3, m) * on (a) n`, []string{"m", "n"}},
		{`"a string naming not_a_metric"`, nil},
	} {
		if got := metricNames(tt.expr); !slices.Equal(got, tt.want) {
			t.Errorf("metricNames(%q) = %q, want %q", tt.expr, got, tt.want)
		}
	}
}

func TestSampleNames(t *testing.T) {
	body := "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 0\nh_sum 0\nh_count 0\ng{a=\"b c\"} 1\n"
	got := sampleNames(body)
	for _, n := range []string{"h_bucket", "h_sum", "h_count", "g"} {
		if !got[n] {
			t.Errorf("sampleNames lacks %s: %v", n, got)
		}
	}
	if got["h"] || len(got) != 4 {
		t.Errorf("sampleNames = %v, want exactly h_bucket, h_sum, h_count, g", got)
	}
}
