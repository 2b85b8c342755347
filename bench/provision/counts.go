//go:build bench

package main

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"banlieue.io/banlieue/bench/internal/metric"
)

// apiCounter counts the manager's API requests by verb and resource (resource[/subresource]):
// it wraps the manager's transport, so the bench's own reads and watches are not counted.
// Watches are not requests per VM and are left out.
type apiCounter struct {
	mu sync.Mutex
	n  map[string]int // "PATCH libvirtmachines/status" → count
}

func newAPICounter() *apiCounter { return &apiCounter{n: map[string]int{}} }

func (a *apiCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		if req.URL.Query().Get("watch") != "true" {
			a.mu.Lock()
			a.n[req.Method+" "+resourceOf(req.URL.Path)]++
			a.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// resourceOf is the resource[/subresource] an API path names: /api/v1/namespaces/x/secrets/y is
// secrets, /apis/g/v/namespaces/x/libvirtmachines/y/status is libvirtmachines/status.
func resourceOf(path string) string {
	seg := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(seg) > 2 && seg[0] == "api":
		seg = seg[2:]
	case len(seg) > 3 && seg[0] == "apis":
		seg = seg[3:]
	default:
		return path
	}
	if len(seg) > 2 && seg[0] == "namespaces" {
		seg = seg[2:]
	}
	if len(seg) >= 3 {
		return seg[0] + "/" + seg[2]
	}
	return seg[0]
}

func (a *apiCounter) snapshot() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]int, len(a.n))
	for k, v := range a.n {
		out[k] = v
	}
	return out
}

// work is what one round cost: the manager's API requests, LibvirtMachine reconciles and libvirt
// RPCs (the provider's banlieue_libvirt_rpc_duration_seconds, by procedure).
type work struct {
	api    map[string]int
	passes float64
	rpcs   map[string]float64 // calls by procedure
	rpcMS  map[string]float64 // their summed time, ms
}

func (b *bench) work() work {
	w := work{api: b.api.snapshot(), rpcs: map[string]float64{}, rpcMS: map[string]float64{}}
	families, err := metrics.Registry.Gather()
	if err != nil {
		return w
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			switch f.GetName() {
			case "controller_runtime_reconcile_total":
				if metric.Label(m, "controller") == "libvirtmachine" {
					w.passes += m.GetCounter().GetValue()
				}
			case "banlieue_libvirt_rpc_duration_seconds":
				w.rpcs[metric.Label(m, "procedure")] += float64(m.GetHistogram().GetSampleCount())
				w.rpcMS[metric.Label(m, "procedure")] += m.GetHistogram().GetSampleSum() * 1000
			}
		}
	}
	return w
}

// printWork prints, per VM, what the provider and the controller spent between two snapshots:
// API writes (every verb but GET) in all and on LibvirtMachines, Secret and ConfigMap GETs,
// LibvirtMachine passes and libvirt RPCs, the procedures by count with their mean time.
func printWork(phase string, vms int, from, to work) {
	per := func(v float64) float64 { return v / float64(vms) }
	var writes, lmWrites, credReads float64
	var lm []string
	for k, v := range to.api {
		d := float64(v - from.api[k])
		if d == 0 {
			continue
		}
		verb, res, _ := strings.Cut(k, " ")
		switch {
		case verb != http.MethodGet:
			writes += d
			if strings.HasPrefix(res, "libvirtmachines") {
				lmWrites += d
				lm = append(lm, fmt.Sprintf("%s %.1f", k, per(d)))
			}
		case res == "secrets" || res == "configmaps":
			credReads += d
		}
	}
	slices.Sort(lm)
	var rpcs float64
	type proc struct {
		name  string
		n, ms float64
	}
	var procs []proc
	for p, v := range to.rpcs {
		if d := v - from.rpcs[p]; d > 0 {
			rpcs += d
			procs = append(procs, proc{p, d, to.rpcMS[p] - from.rpcMS[p]})
		}
	}
	slices.SortFunc(procs, func(a, b proc) int {
		if a.n != b.n {
			return int(b.n - a.n)
		}
		return strings.Compare(a.name, b.name)
	})
	var top []string
	for _, p := range procs {
		top = append(top, fmt.Sprintf("%s %.1f × %.1f ms", p.name, per(p.n), p.ms/p.n))
	}
	fmt.Printf("    %s per VM: API writes %.1f (LibvirtMachine %.1f: %s), Secret/ConfigMap GETs %.1f, LibvirtMachine passes %.1f, libvirt RPCs %.1f (%s)\n",
		phase, per(writes), per(lmWrites), strings.Join(lm, ", "), per(credReads), per(to.passes-from.passes), per(rpcs), strings.Join(top, ", "))
}
