package main

import (
	"os"

	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"banlieue.io/banlieue/internal/app"
)

// kubeconfigFlag registers the --kubeconfig flag of the one-shot commands that talk to the API
// server as whoever runs them (import, audit).
func kubeconfigFlag(f *pflag.FlagSet, kubeconfig *string) {
	f.StringVar(kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"),
		"kubeconfig file (env KUBECONFIG); default: in-cluster config, then ~/.kube/config")
}

// kubeClient is a client for the cluster kubeconfig names, with banlieue's types registered.
func kubeClient(kubeconfig string) (client.Client, error) {
	cfg, err := app.RESTConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: app.NewScheme()})
}
