// Command jobrunner runs banlieue's Jobs as local processes against a cluster that has no
// kubelet (the local lab's bare API server), the way the test suites do with envtest:
//
//	go run ./hack/jobrunner --kubeconfig K --binary bin/banlieue \
//	    --volume banlieue-artifacts=/var/tmp/banlieue-lab-cluster/artifacts
//
// It runs until SIGINT or SIGTERM, then waits for the pods it started; a second signal exits
// at once (the pods die with it).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"banlieue.io/banlieue/test/jobrunner"
)

// repeated is a flag that may be given more than once.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

func main() {
	log.SetFlags(log.LstdFlags | log.Lmsgprefix)
	log.SetPrefix("jobrunner: ")
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	var volumes, env repeated
	// A FlagSet of its own: controller-runtime registers --kubeconfig on the global one.
	fs := flag.NewFlagSet(os.Args[0], flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster, also given to the Jobs' processes")
	binary := fs.String("binary", "bin/banlieue", "banlieue binary that stands for every Job's image")
	fs.Var(&volumes, "volume", "PVC=DIR: the local directory standing for a PVC (repeatable)")
	fs.Var(&env, "env", "KEY=VALUE added to every Job's environment (repeatable)")
	quiet := fs.Bool("quiet", false, "do not print each finished pod's output")
	_ = fs.Parse(os.Args[1:]) // ExitOnError: Parse never returns an error.

	if *kubeconfig == "" {
		return fmt.Errorf("--kubeconfig (or KUBECONFIG) is required")
	}
	// The processes run from this directory too, but absolute paths survive a cd in a wrapper.
	kc, err := filepath.Abs(*kubeconfig)
	if err != nil {
		return err
	}
	bin, err := filepath.Abs(*binary)
	if err != nil {
		return err
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("--binary: %w", err)
	}
	vols := map[string]string{}
	for _, v := range volumes {
		pvc, dir, ok := strings.Cut(v, "=")
		if !ok || pvc == "" || dir == "" {
			return fmt.Errorf("--volume %q: want PVC=DIR", v)
		}
		if dir, err = filepath.Abs(dir); err != nil {
			return err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		vols[pvc] = dir
	}
	for _, e := range env {
		if !strings.Contains(e, "=") {
			return fmt.Errorf("--env %q: want KEY=VALUE", e)
		}
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		// Restore the default disposition: the next signal kills the process (and, through
		// Pdeathsig, the pods) instead of waiting for them.
		stop()
		log.Print("stopping; waiting for running pods (signal again to exit now)")
	}()
	r := &jobrunner.Runner{Client: c, Binary: bin, Kubeconfig: kc, Volumes: vols, Env: env, Errorf: log.Printf}
	if !*quiet {
		r.Logf = log.Printf
	}
	log.Printf("running Jobs labelled app.kubernetes.io/name=banlieue with %s; volumes %v", bin, vols)
	return r.Run(ctx)
}
