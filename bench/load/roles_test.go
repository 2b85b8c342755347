//go:build loadbench

package load

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/controller"
	providerlibvirt "banlieue.io/banlieue/internal/provider/libvirt"
	"banlieue.io/banlieue/internal/provider/libvirt/hostconn"
	libvirtrole "banlieue.io/banlieue/internal/provider/libvirt/role"
	"banlieue.io/banlieue/internal/testenv"
)

// roles are the controller and provider roles under test: what they weigh, and their metrics.
type roles struct {
	// memory reports each role's peak and current RSS.
	memory func() string
	// families are the metrics of every role process (one set in process).
	families func() []map[string]*dto.MetricFamily
	// pids are the role processes by role; the test process when the roles run in it.
	pids map[string][]int
}

// startInProcess runs the controller role and the libvirt machine controller in this process
// until the test ends. Its memory report is this process's.
func startInProcess(t *testing.T, env *testenv.Env) roles {
	mgr := env.NewManager(t)
	conns := hostconn.NewConnections()
	t.Cleanup(conns.Close)
	must(t, controller.Setup(mgr, controller.Options{Workers: cmp.Or(*controllerWorkers, controller.DefaultWorkers)}))
	must(t, (&providerlibvirt.MachineReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Connections: conns,
		Workers: cmp.Or(*providerWorkers, libvirtrole.DefaultWorkers)}).SetupWithManager(mgr))
	testenv.StartManager(t, mgr)
	return roles{
		memory: func() string {
			return fmt.Sprintf("test process (controller + provider) VmHWM=%s VmRSS=%s", procStatus(t, "self", "VmHWM"), procStatus(t, "self", "VmRSS"))
		},
		families: func() []map[string]*dto.MetricFamily { return []map[string]*dto.MetricFamily{inProcess(t)} },
		pids:     map[string][]int{"test process (controller + provider)": {os.Getpid()}},
	}
}

// startRoles runs `banlieue controller` and, per host, `banlieue provider libvirt` for that
// host's Provider, one process each, as a Deployment and the operator's workloads would
// (leader election off: one replica each). Each provider probes its host and resolves the image
// itself. Memory is reported per role: the controller's, and the providers' largest and sum.
func startRoles(t *testing.T, env *testenv.Env, hosts []*benchHost) roles {
	bin := testenv.Banlieue(t)
	kubeconfig := env.Kubeconfig(t)
	scraper := env.MetricsReader(t)
	controllerPID, controllerPort := startRole(t, bin, kubeconfig, append([]string{"controller"}, workersArg(*controllerWorkers)...)...)
	type proc struct {
		pid  string
		port int
	}
	providers := make([]proc, len(hosts))
	for i, h := range hosts {
		pid, port := startRole(t, bin, kubeconfig, append([]string{"provider", "libvirt", "--provider-name", h.provider, "--namespace", h.ns,
			"--import-service-account", "load-import"}, workersArg(*providerWorkers)...)...)
		providers[i] = proc{pid, port}
	}
	pids := map[string][]int{}
	for role, ps := range map[string][]proc{"controller": {{controllerPID, controllerPort}}, "provider": providers} {
		for _, p := range ps {
			pid, err := strconv.Atoi(p.pid)
			must(t, err)
			pids[role] = append(pids[role], pid)
		}
	}
	kb := func(v string) int {
		var n int
		_, _ = fmt.Sscanf(v, "%d kB", &n)
		return n
	}
	return roles{
		memory: func() string {
			maxHWM, sumRSS := 0, 0
			for _, p := range providers {
				maxHWM = max(maxHWM, kb(procStatus(t, p.pid, "VmHWM")))
				sumRSS += kb(procStatus(t, p.pid, "VmRSS"))
			}
			return fmt.Sprintf("controller VmHWM=%s VmRSS=%s, %d providers: largest VmHWM=%d kB, VmRSS together %d kB",
				procStatus(t, controllerPID, "VmHWM"), procStatus(t, controllerPID, "VmRSS"), len(providers), maxHWM, sumRSS)
		},
		families: func() []map[string]*dto.MetricFamily {
			out := []map[string]*dto.MetricFamily{scrape(t, scraper, controllerPort)}
			for _, p := range providers {
				out = append(out, scrape(t, scraper, p.port))
			}
			return out
		},
		pids: pids,
	}
}

// workers are the roles' effective --workers.
func workers() (controllerN, providerN int) {
	return cmp.Or(*controllerWorkers, controller.DefaultWorkers), cmp.Or(*providerWorkers, libvirtrole.DefaultWorkers)
}

// workersArg is --workers n, or nothing for the role's default.
func workersArg(n int) []string {
	if n == 0 {
		return nil
	}
	return []string{"--workers", strconv.Itoa(n)}
}

// nextMetricsPort is where the search for the next role's metrics port starts: below the
// kernel's ephemeral range (32768 on), where a hundred processes' connections take ports, so a
// port found free is still free when the role binds it (a port from :0 was taken in between once).
var nextMetricsPort = 18100

// metricsPort is the next port from nextMetricsPort that nothing listens on.
func metricsPort(t *testing.T) int {
	for ; nextMetricsPort < 32768; nextMetricsPort++ {
		if l, err := net.Listen("tcp", fmt.Sprintf(":%d", nextMetricsPort)); err == nil {
			_ = l.Close()
			nextMetricsPort++
			return nextMetricsPort - 1
		}
	}
	t.Fatal("no free port below 32768 for a role's metrics")
	return 0
}

// startRole starts one role with errors-only logging, its output on stderr, until the test ends;
// its metrics are served on a free port.
func startRole(t *testing.T, bin, kubeconfig string, args ...string) (pid string, port int) {
	port = metricsPort(t)
	cmd := exec.Command(bin, append(args, "--kubeconfig", kubeconfig, "--no-leader-elect", "--log-level", "error",
		"--health-port", "0", "--metrics-port", strconv.Itoa(port))...)
	cmd.Stdout = os.Stderr
	testenv.StartProcess(t, cmd)
	return strconv.Itoa(cmd.Process.Pid), port
}

// waitProvidersAndImage waits until every provider has probed its host (Provider Ready) and
// resolved the image for it, so the timing that follows is the machines' alone.
// It logs how long that took: with a hundred providers, each writing its row of the one VMImage's
// status, that is minutes (docs/performance.md, "The fleet bench").
func waitProvidersAndImage(ctx context.Context, t *testing.T, c client.Client, hosts []*benchHost, img *banlieuev1.VMImage) {
	start := time.Now()
	testenv.Eventually(t, 20*time.Minute, fmt.Sprintf("%d Providers Ready and image %s resolved for each", len(hosts), img.Name), func() error {
		ready := 0
		for _, h := range hosts {
			var p banlieuev1.Provider
			must(t, c.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: h.provider}, &p))
			if meta.IsStatusConditionTrue(p.Status.Conditions, banlieuev1.ConditionReady) {
				ready++
			}
		}
		var got banlieuev1.VMImage
		must(t, c.Get(ctx, client.ObjectKeyFromObject(img), &got))
		resolved := 0
		for _, row := range got.Status.PerProvider {
			if row.Ready {
				resolved++
			}
		}
		return testenv.Unmet(ready == len(hosts) && resolved == len(hosts),
			fmt.Sprintf("%d of %d Providers Ready, image resolved for %d", ready, len(hosts), resolved))
	})
	t.Logf("%d Providers Ready and image resolved for each %s after the roles started", len(hosts), time.Since(start).Round(time.Second))
}
