package testenv

import (
	"os"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"banlieue.io/banlieue/internal/app"
)

// Attach is an Env on the running API server of kubeconfig (the real node's control plane,
// hack/node-test.sh), for suites whose Jobs must run as pods. Nothing is started or stopped:
// what a suite creates there outlives it unless the suite deletes it.
func Attach(t testing.TB, kubeconfig string) *Env {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("reading %s: %v", kubeconfig, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: app.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return &Env{Config: cfg, Client: c}
}

// RealNode is where hack/node.sh keeps the real node: its state directory, which holds the
// kubeconfig of its control plane (BANLIEUE_NODE_DIR, default /var/tmp/banlieue-node), and its
// Node name (BANLIEUE_NODE_NAME, default banlieue-node).
func RealNode() (dir, name string) {
	dir, name = os.Getenv("BANLIEUE_NODE_DIR"), os.Getenv("BANLIEUE_NODE_NAME")
	if dir == "" {
		dir = "/var/tmp/banlieue-node"
	}
	if name == "" {
		name = "banlieue-node"
	}
	return dir, name
}
