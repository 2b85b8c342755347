// Command labcluster runs a real kube-apiserver and etcd (the envtest binaries built by
// hack/envtest-assets.sh) with banlieue's CRDs installed, writes an administrator kubeconfig and
// keeps them running until it is signalled. hack/lab.sh uses it as the lab's control plane.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

func main() {
	kubeconfig := flag.String("write-kubeconfig", "", "where to write the administrator kubeconfig (required)")
	crds := flag.String("crds", "config/crd/bases", "directory of CRD manifests to install")
	flag.Parse()
	if *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "labcluster: --write-kubeconfig is required")
		os.Exit(2)
	}
	if err := run(*kubeconfig, *crds); err != nil {
		fmt.Fprintln(os.Stderr, "labcluster:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, crds string) error {
	env := &envtest.Environment{CRDDirectoryPaths: []string{crds}, ErrorIfCRDPathMissing: true}
	if _, err := env.Start(); err != nil {
		return fmt.Errorf("starting kube-apiserver and etcd: %w", err)
	}
	defer func() { _ = env.Stop() }()

	admin, err := env.AddUser(envtest.User{Name: "lab-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	data, err := admin.KubeConfig()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(kubeconfig), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(kubeconfig, data, 0o600); err != nil {
		return err
	}
	fmt.Println("ready")

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
	return nil
}
