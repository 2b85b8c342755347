//go:build loadbench

package load

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/controller"
	providerlibvirt "banlieue.io/banlieue/internal/provider/libvirt"
	"banlieue.io/banlieue/internal/provider/libvirt/hostconn"
	libvirtrole "banlieue.io/banlieue/internal/provider/libvirt/role"
	"banlieue.io/banlieue/internal/testenv"
)

// startInProcess runs the controller role and the libvirt machine controller in this process
// until the test ends. Its memory report is this process's.
func startInProcess(t *testing.T, env *testenv.Env) (memory func() string) {
	mgr := env.NewManager(t)
	conns := hostconn.NewConnections()
	t.Cleanup(conns.Close)
	must(t, controller.Setup(mgr, controller.Options{Workers: cmp.Or(*controllerWorkers, controller.DefaultWorkers)}))
	must(t, (&providerlibvirt.MachineReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Connections: conns,
		Workers: cmp.Or(*providerWorkers, libvirtrole.DefaultWorkers)}).SetupWithManager(mgr))
	testenv.StartManager(t, mgr)
	return func() string {
		return fmt.Sprintf("test process (controller + provider) VmHWM=%s VmRSS=%s", procStatus(t, "self", "VmHWM"), procStatus(t, "self", "VmRSS"))
	}
}

// startRoles runs `banlieue controller` and `banlieue provider libvirt` for Provider lab in ns,
// one process each, as a Deployment would (leader election off: one replica each). The provider
// probes the host and resolves the image itself. Its memory report is per process.
func startRoles(ctx context.Context, t *testing.T, env *testenv.Env, ns string) (memory func() string) {
	bin := testenv.Banlieue(t)
	kubeconfig := env.Kubeconfig(t)
	controllerPID := startRole(t, bin, kubeconfig, append([]string{"controller"}, workersArg(*controllerWorkers)...)...)
	providerPID := startRole(t, bin, kubeconfig, append([]string{"provider", "libvirt", "--provider-name", "lab", "--namespace", ns,
		"--import-service-account", "load-import"}, workersArg(*providerWorkers)...)...)
	return func() string {
		return fmt.Sprintf("controller VmHWM=%s VmRSS=%s, provider VmHWM=%s VmRSS=%s",
			procStatus(t, controllerPID, "VmHWM"), procStatus(t, controllerPID, "VmRSS"),
			procStatus(t, providerPID, "VmHWM"), procStatus(t, providerPID, "VmRSS"))
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

// startRole starts one role with errors-only logging, its output on stderr, until the test ends.
func startRole(t *testing.T, bin, kubeconfig string, args ...string) (pid string) {
	cmd := exec.Command(bin, append(args, "--kubeconfig", kubeconfig, "--no-leader-elect", "--log-level", "error",
		"--health-port", "0", "--metrics-port", "0")...)
	cmd.Stdout = os.Stderr
	testenv.StartProcess(t, cmd)
	return strconv.Itoa(cmd.Process.Pid)
}

// waitProviderAndImage waits until the provider role has probed the host (Provider Ready) and
// resolved the image for it, so the timing that follows is the machines' alone.
func waitProviderAndImage(ctx context.Context, t *testing.T, c client.Client, p *banlieuev1.Provider, img *banlieuev1.VMImage) {
	testenv.Eventually(t, 2*time.Minute, fmt.Sprintf("Provider %s Ready and image %s resolved", p.Name, img.Name), func() error {
		var gotP banlieuev1.Provider
		var gotImg banlieuev1.VMImage
		must(t, c.Get(ctx, client.ObjectKeyFromObject(p), &gotP))
		must(t, c.Get(ctx, client.ObjectKeyFromObject(img), &gotImg))
		ready := meta.IsStatusConditionTrue(gotP.Status.Conditions, banlieuev1.ConditionReady)
		for _, row := range gotImg.Status.PerProvider {
			ready = ready && row.Ready
		}
		return testenv.Unmet(ready && len(gotImg.Status.PerProvider) > 0, fmt.Sprintf("%+v / %+v", gotP.Status.Conditions, gotImg.Status.PerProvider))
	})
}
