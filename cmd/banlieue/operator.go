package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/jobbounds"
	"banlieue.io/banlieue/internal/operator"
)

func newOperatorCommand() *cobra.Command {
	var (
		watchNamespace string
		nodeSelector   []string
		tolerations    []string
		opOpts         = operator.Options{ImportBounds: jobbounds.DefaultImport()}
	)
	r := &role{name: "operator", leaderElectionID: "banlieue-operator", defaultNamespace: "banlieue-system",
		defaultWorkers: operator.DefaultWorkers}
	r.customize = func(o *manager.Options, _ app.Options) { o.Cache = operator.CacheOptions(opOpts) }
	cmd := r.command("operator", "Run each Provider's workload (Deployment, ServiceAccount, RBAC)")
	r.setup = func(mgr manager.Manager, opts app.Options) error {
		opOpts.Workers = opts.Workers
		return operator.Setup(mgr, opOpts)
	}
	// Flags are parsed before the manager exists, so the operator's options are completed in
	// PreRunE, where a bad value is still a usage error.
	cmd.PreRunE = func(cmd *cobra.Command, _ []string) error {
		ns, _ := cmd.Flags().GetString("namespace")
		opOpts.Namespace, opOpts.WatchNamespace = ns, watchNamespace
		opOpts.BuildNodeSelector = map[string]string{}
		for _, kv := range nodeSelector {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return fmt.Errorf("invalid --build-node-selector: %q: want KEY=VALUE", kv)
			}
			opOpts.BuildNodeSelector[k] = v
		}
		opOpts.BuildTolerations = nil
		for _, t := range tolerations {
			tol, err := operator.ParseToleration(t)
			if err != nil {
				return err
			}
			opOpts.BuildTolerations = append(opOpts.BuildTolerations, tol)
		}
		return opOpts.ImportBounds.Validate("import", jobbounds.RuntimeMemory)
	}
	cmd.Flags().StringVar(&watchNamespace, "watch-namespace", os.Getenv("BANLIEUE_WATCH_NAMESPACE"),
		"watch Providers in this namespace only (env BANLIEUE_WATCH_NAMESPACE); empty watches all")
	cmd.Flags().StringArrayVar(&nodeSelector, "build-node-selector", nil, "KEY=VALUE node selector for build workloads (repeatable)")
	cmd.Flags().StringArrayVar(&tolerations, "build-toleration", nil,
		"key[=value]:Effect toleration forwarded to provider workloads for import Jobs (repeatable)")
	opOpts.ImportBounds.AddFlags(cmd.Flags(), "import")
	return cmd
}
