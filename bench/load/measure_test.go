//go:build loadbench

package load

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"banlieue.io/banlieue/bench/internal/metric"
	"banlieue.io/banlieue/internal/testenv"
)

// sample is what the bench reads off the roles and the API server at one instant: each
// controller's reconcile-time histogram (summed over every process that runs it), the API
// server's requests by verb and resource, and the CPU time of each group of processes.
type sample struct {
	reconcile map[string]metric.Histogram // controller → its histogram
	requests  map[string]float64          // "VERB resource[/subresource]" → count
	cpu       map[string]time.Duration
}

// take reads the reconcile histograms of the given families (one set per role process, or this
// process's registry) and the API server's request counters.
func take(t *testing.T, cfg *rest.Config, roles []map[string]*dto.MetricFamily, procs map[string][]int) sample {
	s := sample{reconcile: map[string]metric.Histogram{}, requests: map[string]float64{}, cpu: map[string]time.Duration{}}
	for group, pids := range procs {
		for _, pid := range pids {
			s.cpu[group] += cpuOf(t, pid)
		}
	}
	for _, families := range roles {
		f := families["controller_runtime_reconcile_time_seconds"]
		for _, m := range f.GetMetric() {
			name := metric.Label(m, "controller")
			h := s.reconcile[name]
			h.Add(m.GetHistogram())
			s.reconcile[name] = h
		}
	}
	for _, m := range apiServerMetrics(t, cfg)["apiserver_request_total"].GetMetric() {
		res := metric.Label(m, "resource")
		if sub := metric.Label(m, "subresource"); sub != "" {
			res += "/" + sub
		}
		s.requests[metric.Label(m, "verb")+" "+res] += m.GetCounter().GetValue()
	}
	return s
}

// cpuOf is a process's CPU time, user and system, with that of the children it has reaped (a
// libvirtd's qemu-img), from /proc/<pid>/stat.
func cpuOf(t *testing.T, pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	must(t, err)
	// The fields after the command's closing parenthesis, from the state (field 3) on.
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	var ticks int64
	for _, i := range []int{11, 12, 13, 14} { // utime, stime, cutime, cstime: fields 14 to 17
		v, err := strconv.ParseInt(f[i], 10, 64)
		must(t, err)
		ticks += v
	}
	return time.Duration(ticks) * time.Second / clockTicks
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on every Linux this runs on.
const clockTicks = 100

// controlPlane is the API server and etcd that envtest started for this process, by group.
func controlPlane(t *testing.T) map[string][]int {
	out := map[string][]int{}
	dirs, err := os.ReadDir("/proc")
	must(t, err)
	self := os.Getpid()
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue // gone since the listing
		}
		comm := string(data[bytes.IndexByte(data, '(')+1 : bytes.LastIndexByte(data, ')')])
		f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
		if ppid, _ := strconv.Atoi(f[1]); ppid == self && (comm == "kube-apiserver" || comm == "etcd") {
			out[comm] = append(out[comm], pid)
		}
	}
	return out
}

// inProcess is this process's registry: the roles' metrics when they run in the test process.
func inProcess(t *testing.T) map[string]*dto.MetricFamily {
	families, err := metrics.Registry.Gather()
	must(t, err)
	out := map[string]*dto.MetricFamily{}
	for _, f := range families {
		out[f.GetName()] = f
	}
	return out
}

// scrape reads a role process's /metrics as the metrics reader a cluster's monitoring uses.
func scrape(t *testing.T, s *testenv.Scraper, port int) map[string]*dto.MetricFamily {
	var code int
	var body string
	for range 10 { // a process that is still starting its listener
		if code, body = s.Get(port); code == http.StatusOK {
			return parse(t, strings.NewReader(body))
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("scraping :%d: %d %s", port, code, body)
	return nil
}

// apiServerMetrics is the API server's own /metrics, read as the administrator.
func apiServerMetrics(t *testing.T, cfg *rest.Config) map[string]*dto.MetricFamily {
	hc, err := rest.HTTPClientFor(cfg)
	must(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/metrics", nil)
	must(t, err)
	resp, err := hc.Do(req)
	must(t, err)
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		t.Fatalf("API server /metrics: %s: %s", resp.Status, body)
	}
	return parse(t, resp.Body)
}

func parse(t *testing.T, r io.Reader) map[string]*dto.MetricFamily {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	must(t, err)
	return families
}

// phase is what happened between two samples: the reconcile latency of each controller and the
// API server's requests per VM. LIST and WATCH are left out (informers list once and the bench
// polls by listing), and so are the bench's own requests: one of kind benchOwn per VM (its
// CREATEs, or its DELETEs when paced) and its DELETECOLLECTIONs.
func phase(from, to sample, vms int, benchOwn string) string {
	var lat []string
	for _, name := range slices.Sorted(maps.Keys(to.reconcile)) {
		h := to.reconcile[name].Minus(from.reconcile[name])
		if h.N == 0 {
			continue
		}
		lat = append(lat, fmt.Sprintf("%s %.0f passes p50 %s p99 %s", name, h.N,
			h.Quantile(0.50).Round(time.Millisecond), h.Quantile(0.99).Round(time.Millisecond)))
	}
	type req struct {
		key string
		n   float64
	}
	var reqs []req
	total := 0.0
	for k, v := range to.requests {
		verb, _, _ := strings.Cut(k, " ")
		d := v - from.requests[k]
		if k == benchOwn {
			d -= float64(vms)
		}
		if verb == "LIST" || verb == "WATCH" || verb == "DELETECOLLECTION" || d <= 0 {
			continue
		}
		total += d
		reqs = append(reqs, req{k, d})
	}
	slices.SortFunc(reqs, func(a, b req) int {
		if a.n != b.n {
			return int(math.Copysign(1, b.n-a.n))
		}
		return strings.Compare(a.key, b.key)
	})
	var top []string
	for _, r := range reqs[:min(len(reqs), 16)] {
		top = append(top, fmt.Sprintf("%s %.2f (%.0f)", r.key, r.n/float64(vms), r.n))
	}
	var cpu []string
	for _, g := range slices.Sorted(maps.Keys(to.cpu)) {
		cpu = append(cpu, fmt.Sprintf("%s %.1f", g, float64((to.cpu[g]-from.cpu[g]).Microseconds())/1000/float64(vms)))
	}
	return fmt.Sprintf("reconcile: %s; API requests per VM %.1f (%s); CPU ms per VM: %s", strings.Join(lat, ", "), total/float64(vms),
		strings.Join(top, ", "), strings.Join(cpu, ", "))
}
