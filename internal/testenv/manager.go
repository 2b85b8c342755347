package testenv

import (
	"context"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"banlieue.io/banlieue/internal/app"
)

// NewManager is a manager on the API server with banlieue's scheme, no metrics or health
// listener (suites run side by side), and controller names that may repeat: a suite starts
// several managers with the same controllers in one process.
func (e *Env) NewManager(t testing.TB) ctrl.Manager {
	t.Helper()
	return NewManagerWith(t, e.Config, ManagerOptions())
}

// NewManagerWith is a manager on cfg (an impersonating copy of Env.Config, to run a role as its
// installed account) with opts: ManagerOptions, changed where a role's own cache options apply.
func NewManagerWith(t testing.TB, cfg *rest.Config, opts ctrl.Options) ctrl.Manager {
	t.Helper()
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		t.Fatalf("creating a manager: %v", err)
	}
	return mgr
}

// Impersonating is a copy of cfg acting as user; for "system:serviceaccount:<ns>:<name>" the API
// server adds the ServiceAccount groups, exactly as for a token of that account.
func Impersonating(cfg *rest.Config, user string) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	return cfg
}

// ManagerOptions are NewManager's options, for a program (bench/) that builds its own manager.
func ManagerOptions() ctrl.Options {
	return ctrl.Options{
		Scheme:                 app.NewScheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	}
}

// StartManager runs mgr until stop is called or t ends, whichever comes first. stop cancels the
// manager, waits for Start to return and returns its error, so no reconcile of it outlives the
// call (a manager left running would write into the next test's objects, or log after its test
// ended). A Start error is also logged to t while t runs; a suite that counts it as a failure
// checks stop's result itself.
func StartManager(t testing.TB, mgr ctrl.Manager) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	sink := NewLogSink(t)
	var err error
	go func() {
		defer close(done)
		if err = mgr.Start(ctx); err != nil {
			_, _ = sink.Write([]byte("manager: " + err.Error())) // LogSink.Write never fails
		}
	}()
	var once sync.Once
	stop = func() error {
		once.Do(func() { cancel(); <-done })
		return err
	}
	t.Cleanup(func() { _ = stop() }) // logged above
	return stop
}

// ServiceAccountUser is the user name the API server gives a ServiceAccount's token.
func ServiceAccountUser(ns, name string) string {
	return "system:serviceaccount:" + ns + ":" + name
}

// ClientAs is a client with banlieue's scheme on cfg acting as user.
func ClientAs(t testing.TB, cfg *rest.Config, user string) client.Client {
	t.Helper()
	c, err := client.New(Impersonating(cfg, user), client.Options{Scheme: app.NewScheme()})
	if err != nil {
		t.Fatalf("a client acting as %s: %v", user, err)
	}
	return c
}
