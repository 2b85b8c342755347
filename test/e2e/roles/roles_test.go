// Package roles runs the real banlieue binary's long-running roles against a real API server and
// checks what every role promises from outside: health endpoints, metrics, leader election with
// the lease timings of docs/operations.md ("Leader election"), and log formats.
package roles

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"banlieue.io/banlieue/internal/testenv"
)

type process struct {
	*testenv.Process
	health string
}

// start runs `banlieue <args> --kubeconfig … --health-port … --metrics-port …`.
func start(t *testing.T, bin, kubeconfig string, args ...string) (*process, int) {
	t.Helper()
	health, metrics := testenv.FreePort(t), testenv.FreePort(t)
	args = append(args, "--health-port", strconv.Itoa(health), "--metrics-port", strconv.Itoa(metrics))
	return &process{Process: testenv.StartRole(t, bin, kubeconfig, args...), health: fmt.Sprintf("http://127.0.0.1:%d", health)}, metrics
}

func get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func waitStatus(t *testing.T, url string, want int, timeout time.Duration) string {
	t.Helper()
	var body string
	testenv.Eventually(t, timeout, fmt.Sprintf("%s answering %d", url, want), func() error {
		var code int
		code, body = get(url)
		return testenv.Unmet(code == want, fmt.Sprintf("got %d (%s)", code, strings.TrimSpace(body)))
	})
	return body
}

func TestRolesFromOutside(t *testing.T) {
	env := testenv.Start(t)
	bin := testenv.Banlieue(t)
	kubeconfig := env.Kubeconfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "banlieue-system"}}); err != nil {
		t.Fatal(err)
	}

	reader := env.MetricsReader(t)

	t.Run("leader and standby", func(t *testing.T) {
		leader, metricsPort := start(t, bin, kubeconfig, "controller", "--leader-election-identity", "first", "--log-format", "json")
		waitStatus(t, leader.health+"/livez", 200, 30*time.Second)
		waitStatus(t, leader.health+"/readyz", 200, 60*time.Second)

		var lease coordinationv1.Lease
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := env.Client.Get(ctx, client.ObjectKey{Namespace: "banlieue-system", Name: "banlieue-controller"}, &lease)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("lease banlieue-system/banlieue-controller: %v", err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if *lease.Spec.HolderIdentity != "first" || *lease.Spec.LeaseDurationSeconds != 15 {
			t.Errorf("lease holder %q duration %d, want first and 15 s", *lease.Spec.HolderIdentity, *lease.Spec.LeaseDurationSeconds)
		}
		var metrics string
		testenv.Eventually(t, 10*time.Second, "the reader's /metrics answering 200", func() error {
			var code int
			code, metrics = reader.Get(metricsPort)
			return testenv.Unmet(code == 200, fmt.Sprintf("got %d (%s)", code, strings.TrimSpace(metrics)))
		})
		// controller-runtime creates a controller's reconcile counts at 0 when the leader starts it.
		for _, series := range []string{`banlieue_leader{role="controller"} 1`,
			`controller_runtime_reconcile_total{controller="virtualmachine",result="success"}`, `banlieue_virtualmachines{phase="Pending"}`} {
			if !strings.Contains(metrics, series) {
				t.Errorf("/metrics lacks %s", series)
			}
		}

		// A second replica is a ready standby: it reads the lease but does not lead.
		standby, standbyMetrics := start(t, bin, kubeconfig, "controller", "--leader-election-identity", "second")
		waitStatus(t, standby.health+"/readyz", 200, 60*time.Second)
		// /readyz answers before the manager starts its runnables, the one that sets
		// banlieue_leader among them (internal/app/metrics.go), so the gauge may need a moment.
		testenv.Eventually(t, 10*time.Second, "standby must report banlieue_leader 0", func() error {
			code, m := reader.Get(standbyMetrics)
			return testenv.Unmet(code == 200 && strings.Contains(m, `banlieue_leader{role="controller"} 0`), fmt.Sprintf("/metrics %d", code))
		})

		// JSON logs: one object per line.
		deadline = time.Now().Add(10 * time.Second)
		for !strings.Contains(string(leader.Output()), `"msg":"starting"`) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(leader.Output())), "\n") {
			var v map[string]any
			if err := json.Unmarshal([]byte(line), &v); err != nil {
				t.Errorf("--log-format json printed a non-JSON line: %q", line)
				break
			}
		}
	})

	// docs/security.md, "Metrics": the default /metrics answers only a token whose subject may
	// get /metrics. The tokens are real ServiceAccount tokens from the TokenRequest API, checked
	// by the role with a TokenReview and a SubjectAccessReview against the API server.
	t.Run("metrics need a token allowed to get /metrics", func(t *testing.T) {
		p, metricsPort := start(t, bin, kubeconfig, "controller", "--no-leader-elect")
		waitStatus(t, p.health+"/readyz", 200, 60*time.Second)
		unbound := env.ServiceAccountScraper(t, "banlieue-test-no-role")
		for _, tt := range []struct {
			name     string
			scraper  *testenv.Scraper
			code     int
			contains string
		}{
			{"no token", reader.Anonymous(), 401, "Unauthorized"},
			{"a token without banlieue-metrics-reader", unbound, 403, "Authorization denied for user system:serviceaccount:default:banlieue-test-no-role"},
			{"a token bound to banlieue-metrics-reader", reader, 200, `banlieue_leader{role="controller"} 1`},
		} {
			testenv.Eventually(t, 10*time.Second, tt.name+" answered "+strconv.Itoa(tt.code), func() error {
				code, body := tt.scraper.Get(metricsPort)
				return testenv.Unmet(code == tt.code && strings.Contains(body, tt.contains),
					fmt.Sprintf("got %d (%.200s)", code, strings.TrimSpace(body)))
			})
		}
		// What the checks cost once the reviews are cached (docs/reliability.md, "Metrics").
		begin := time.Now()
		for range 20 {
			if code, body := reader.Get(metricsPort); code != 200 {
				t.Fatalf("reader scrape: %d %.200s", code, body)
			}
		}
		t.Logf("20 authorized scrapes, reviews cached: %s each", (time.Since(begin) / 20).Round(10*time.Microsecond))
		// Plain HTTP on the secure port is refused by the TLS server, not served.
		if code, body := get(fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)); code != 400 || !strings.Contains(body, "HTTPS server") {
			t.Errorf("plain HTTP on the secure port answered %d %.200s, want 400 (an HTTPS server)", code, body)
		}
	})

	t.Run("metrics-secure=false serves plain HTTP on loopback only", func(t *testing.T) {
		p, metricsPort := start(t, bin, kubeconfig, "controller", "--no-leader-elect", "--metrics-secure=false")
		waitStatus(t, p.health+"/readyz", 200, 60*time.Second)
		plain := fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)
		waitStatus(t, plain, 200, 10*time.Second)
		begin := time.Now()
		for range 20 {
			if code, body := get(plain); code != 200 {
				t.Fatalf("plain scrape: %d %.200s", code, body)
			}
		}
		t.Logf("20 plain scrapes: %s each", (time.Since(begin) / 20).Round(10*time.Microsecond))
		ip := nonLoopbackIP(t)
		if ip == "" {
			t.Log("no non-loopback IPv4 address on this machine: the loopback-only bind is not checked")
			return
		}
		if conn, err := net.DialTimeout("tcp", net.JoinHostPort(ip, strconv.Itoa(metricsPort)), 2*time.Second); err == nil {
			conn.Close()
			t.Errorf("plain /metrics accepted a connection on %s; it must listen on 127.0.0.1 only", ip)
		}
	})

	t.Run("bad flags are refused before starting", func(t *testing.T) {
		for _, args := range [][]string{
			{"controller", "--log-format", "xml"},
			{"operator", "--build-toleration", "no-effect"},
			{"provider", "libvirt", "--build-toleration", "k=v"},
		} {
			out, err := exec.Command(bin, append(args, "--kubeconfig", kubeconfig)...).CombinedOutput()
			if err == nil || !strings.Contains(string(out), "invalid --") {
				t.Errorf("%v: want a clear invalid-flag error, got %v: %s", args, err, out)
			}
		}
	})
}

// nonLoopbackIP is an IPv4 address of this machine other than loopback, or "".
func nonLoopbackIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	return ""
}
