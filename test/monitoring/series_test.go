// Package monitoring holds the monitoring kit (charts/banlieue/files: the PrometheusRule's
// alerts and the Grafana dashboard, docs/guides/monitoring.md) to what the binary exports: every
// metric name a query selects must be a series one of the real roles serves on its /metrics,
// scraped as the ServiceMonitor does (HTTPS, a token bound to banlieue-metrics-reader) after the
// roles have reconciled against a real API server (envtest). A renamed or dropped series, or a
// query with a typo, fails here instead of silently showing "No data" or never firing.
package monitoring

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
)

// query is one PromQL expression of the kit and where it comes from.
type query struct{ where, expr string }

func kitFile(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "charts", "banlieue", "files", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// kitQueries are the alert expressions of the PrometheusRule and the dashboard's panel queries.
func kitQueries(t *testing.T) []query {
	t.Helper()
	var rules struct {
		Groups []struct {
			Rules []struct{ Alert, Expr string }
		}
	}
	if err := yaml.Unmarshal(kitFile(t, "prometheus/rules.yaml"), &rules); err != nil {
		t.Fatalf("files/prometheus/rules.yaml: %v", err)
	}
	var qs []query
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			qs = append(qs, query{"alert " + r.Alert, r.Expr})
		}
	}
	var dashboard struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(kitFile(t, "dashboards/banlieue.json"), &dashboard); err != nil {
		t.Fatalf("files/dashboards/banlieue.json: %v", err)
	}
	for _, p := range dashboard.Panels {
		for _, tg := range p.Targets {
			qs = append(qs, query{"panel " + strconv.Quote(p.Title), tg.Expr})
		}
	}
	return qs
}

// roles are the long-running subcommands and a series each exports only once it has done its
// work, which the scrape waits for.
var roles = []struct {
	name  string
	args  []string
	ready string
}{
	{"controller", []string{"controller"}, `controller_runtime_reconcile_time_seconds_count{controller="virtualmachine"}`},
	{"operator", []string{"operator"}, `controller_runtime_reconcile_time_seconds_count{controller="operator-provider"}`},
	{"imagebuilder", []string{"imagebuilder"}, `controller_runtime_reconcile_time_seconds_count{controller="imagebuilder"}`},
	{"provider-libvirt", []string{"provider", "libvirt", "--provider-name", "x", "--import-service-account", "x-import"},
		`banlieue_provider_failure_domains{backend="libvirt",name="x",namespace="banlieue-system"} 0`},
	// The libvirt RPC histogram has a series only once a call was made: this provider talks to
	// the lab host, and its probe's calls (the session's CONNECT_OPEN among them) produce them.
	{"provider-libvirt (lab host)", []string{"provider", "libvirt", "--provider-name", labProvider, "--import-service-account", "lab-import"},
		`banlieue_libvirt_rpc_duration_seconds_count{code="ok",procedure="CONNECT_OPEN"}`},
}

// labProvider is the Provider, in banlieue-system, of the lab host.
const labProvider = "lab"

// TestKitNamesExportedSeries: every metric name in the kit's queries is a sample one of the
// running roles exports. It needs the libvirt lab (hack/libvirt-lab.sh) for the RPC series.
func TestKitNamesExportedSeries(t *testing.T) {
	queries := kitQueries(t)
	if len(queries) < 5 {
		t.Fatalf("only %d queries in the kit; the files were not read as expected", len(queries))
	}
	lab := testenv.RequireLibvirtLab(t)
	env := testenv.Start(t)
	bin := testenv.Banlieue(t)
	kubeconfig := env.Kubeconfig(t)
	env.ApplyRoleFixture(t)
	creds, err := lab.Credentials("banlieue-system", "lab-creds", "lab-ca")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	env.Create(ctx, t, append(creds, lab.Provider("banlieue-system", labProvider, "lab-creds", "lab-ca", banlieuev1.ProviderCapabilities{}))...)
	reader := env.MetricsReader(t)

	start := time.Now()
	ports := make([]int, len(roles))
	procs := make([]*testenv.Process, len(roles))
	for i, r := range roles {
		ports[i] = testenv.FreePort(t)
		args := append(slices.Clone(r.args), "--no-leader-elect", "--health-port", strconv.Itoa(testenv.FreePort(t)),
			"--metrics-port", strconv.Itoa(ports[i]))
		procs[i] = testenv.StartRole(t, bin, kubeconfig, args...)
	}
	exported := map[string]string{} // sample name -> the first role serving it
	for i, r := range roles {
		var body string
		testenv.Eventually(t, 90*time.Second, r.name+" exporting "+r.ready, func() error {
			var code int
			code, body = reader.Get(ports[i])
			return testenv.Unmet(code == 200 && strings.Contains(body, r.ready),
				fmt.Sprintf("/metrics answered %d; output:\n%s", code, procs[i].Output()))
		})
		for name := range sampleNames(body) {
			if _, ok := exported[name]; !ok {
				exported[name] = r.name
			}
		}
	}
	t.Logf("%d roles reconciled and scraped in %v: %d sample names", len(roles), time.Since(start).Round(time.Millisecond), len(exported))

	checked := 0
	for _, q := range queries {
		names := metricNames(q.expr)
		if len(names) == 0 {
			t.Errorf("%s: no metric name found in %q; write the query with metric names the check can see", q.where, q.expr)
		}
		for _, n := range names {
			role, ok := exported[n]
			if !ok {
				t.Errorf("%s names %s, which no role exports (query %q)", q.where, n, q.expr)
				continue
			}
			checked++
			t.Logf("%s: %s (from %s)", q.where, n, role)
		}
	}
	t.Logf("%d queries, %d metric names checked", len(queries), checked)
}
