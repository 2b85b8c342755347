package main

import (
	"fmt"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/controller"
	"banlieue.io/banlieue/internal/controller/pool"
	"banlieue.io/banlieue/internal/jobbounds"
)

// role describes one long-running subcommand: its lease, its default namespace, how it narrows
// its caches and the controllers it registers with the manager.
type role struct {
	name             string
	leaderElectionID string
	defaultNamespace string
	// defaultWorkers is the role's default --workers (docs/operations.md, "Common flags").
	defaultWorkers int
	customize      func(*manager.Options, app.Options)
	setup          func(mgr manager.Manager, opts app.Options) error
}

func (r *role) run(cmd *cobra.Command, opts app.Options) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	logger, err := app.NewLogger(opts.LogFormat, opts.LogLevel)
	if err != nil {
		return err
	}
	ctrl.SetLogger(logger)
	cfg, err := app.RESTConfig(opts.Kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = float32(opts.KubeAPIQPS), opts.KubeAPIBurst
	var customize func(*manager.Options)
	if r.customize != nil {
		customize = func(o *manager.Options) { r.customize(o, opts) }
	}
	mgr, err := app.NewManager(cfg, opts, r.name, app.NewScheme(), customize)
	if err != nil {
		return err
	}
	if r.setup != nil {
		if err := r.setup(mgr, opts); err != nil {
			return fmt.Errorf("setting up %s: %w", r.name, err)
		}
	}
	logger.Info("starting", "role", r.name, "version", version, "namespace", opts.Namespace,
		"leaderElection", !opts.NoLeaderElect)
	return mgr.Start(cmd.Context())
}

// command builds the role's cobra command with the common flags; the caller adds its own.
func (r *role) command(use, short string) *cobra.Command {
	var opts app.Options
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return r.run(cmd, opts)
		},
	}
	opts.AddFlags(cmd.Flags(), r.leaderElectionID, r.defaultNamespace, r.defaultWorkers)
	return cmd
}

func newControllerCommand() *cobra.Command {
	r := &role{name: "controller", leaderElectionID: "banlieue-controller", defaultWorkers: controller.DefaultWorkers}
	var co consoleRelayOptions
	export := controller.ExportJobs{Bounds: jobbounds.DefaultImport()}
	r.customize = func(o *manager.Options, _ app.Options) { o.Cache.ByObject = controller.CacheByObject() }
	r.setup = func(mgr manager.Manager, opts app.Options) error {
		if export.Image != "" {
			if err := export.Bounds.Validate("export", jobbounds.RuntimeMemory); err != nil {
				return err
			}
		}
		if err := controller.Setup(mgr, controller.Options{Namespace: opts.Namespace, Workers: opts.Workers, Export: export}); err != nil {
			return err
		}
		if err := pool.Setup(mgr, pool.Options{Namespace: opts.Namespace, Workers: opts.Workers}); err != nil {
			return err
		}
		return co.setup(mgr)
	}
	cmd := r.command("controller", "Schedule VirtualMachines, build their infrastructure machines and mirror their status")
	co.addFlags(cmd)
	f := cmd.Flags()
	f.StringVar(&export.Image, "export-image", envOr("BANLIEUE_EXPORT_IMAGE", ""), "image of the VirtualMachineExport Jobs (banlieue's own); empty: no export Job, exports of stopped VMs wait (env BANLIEUE_EXPORT_IMAGE)")
	f.StringVar(&export.Namespace, "build-namespace", "banlieue-imagebuild", "namespace of the export Jobs and of the Providers' export accounts")
	f.StringArrayVar(&export.InsecureRegistries, "export-insecure-registry", nil, "registry (host or host:port) export Jobs may push to over plain HTTP (repeatable)")
	export.Bounds.AddFlags(f, "export")
	export.Pull.AddFlags(f, "export")
	return cmd
}

func newProviderCommand() *cobra.Command {
	provider := &cobra.Command{
		Use:   "provider",
		Short: "Run a provider backend",
	}
	provider.AddCommand(newProviderLibvirtCommand(), newProviderVSphereCommand())
	return provider
}
