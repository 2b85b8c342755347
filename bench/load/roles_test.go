//go:build loadbench

package load

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/controller"
	providerlibvirt "banlieue.io/banlieue/internal/provider/libvirt"
	"banlieue.io/banlieue/internal/provider/libvirt/hostconn"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/test/jobrunner"
)

// startInProcess runs the controller role and the libvirt machine controller in this process
// until the test ends. Its memory report is this process's.
func startInProcess(t *testing.T, env *testenv.Env) (memory func() string) {
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: app.NewScheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	must(t, err)
	conns := hostconn.NewPool()
	must(t, controller.Setup(mgr, controller.Options{}))
	must(t, (&providerlibvirt.MachineReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Connections: conns}).SetupWithManager(mgr))
	mctx, mcancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = mgr.Start(mctx) }()
	t.Cleanup(func() { mcancel(); <-done; conns.Close() })
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
	controllerPID := startRole(t, bin, kubeconfig, "controller")
	providerPID := startRole(t, bin, kubeconfig, "provider", "libvirt", "--provider-name", "lab", "--namespace", ns)
	return func() string {
		return fmt.Sprintf("controller VmHWM=%s VmRSS=%s, provider VmHWM=%s VmRSS=%s",
			procStatus(t, controllerPID, "VmHWM"), procStatus(t, controllerPID, "VmRSS"),
			procStatus(t, providerPID, "VmHWM"), procStatus(t, providerPID, "VmRSS"))
	}
}

// startRole starts one role with errors-only logging and stops it with SIGINT when the test ends.
func startRole(t *testing.T, bin, kubeconfig string, args ...string) (pid string) {
	args = append(args, "--kubeconfig", kubeconfig, "--no-leader-elect", "--log-level", "error",
		"--health-port", "0", "--metrics-port", "0")
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	must(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return strconv.Itoa(cmd.Process.Pid)
}

// waitProviderAndImage waits until the provider role has probed the host (Provider Ready) and
// resolved the image for it, so the timing that follows is the machines' alone.
func waitProviderAndImage(ctx context.Context, t *testing.T, c client.Client, p *banlieuev1.Provider, img *banlieuev1.VMImage) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var gotP banlieuev1.Provider
		var gotImg banlieuev1.VMImage
		must(t, c.Get(ctx, client.ObjectKeyFromObject(p), &gotP))
		must(t, c.Get(ctx, client.ObjectKeyFromObject(img), &gotImg))
		ready := meta.IsStatusConditionTrue(gotP.Status.Conditions, "Ready")
		for _, row := range gotImg.Status.PerProvider {
			ready = ready && row.Ready
		}
		if ready && len(gotImg.Status.PerProvider) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Provider %s not Ready or image %s not resolved: %+v / %+v", p.Name, img.Name, gotP.Status.Conditions, gotImg.Status.PerProvider)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
