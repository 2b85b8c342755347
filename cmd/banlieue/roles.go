package main

import (
	"fmt"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"banlieue.io/banlieue/internal/app"
)

// role describes one long-running subcommand: its lease, its default namespace and the
// controllers it registers with the manager.
type role struct {
	name             string
	leaderElectionID string
	defaultNamespace string
	setup            func(mgr manager.Manager, opts app.Options) error
}

// command builds the role's cobra command. extraFlags lets a role add its own flags.
func (r role) command(use, short string, extraFlags func(*cobra.Command)) *cobra.Command {
	var opts app.Options
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return r.run(cmd, opts)
		},
	}
	opts.AddFlags(cmd.Flags(), r.leaderElectionID, r.defaultNamespace)
	if extraFlags != nil {
		extraFlags(cmd)
	}
	return cmd
}

func (r role) run(cmd *cobra.Command, opts app.Options) error {
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
	mgr, err := app.NewManager(cfg, opts, r.name, app.NewScheme())
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

func newControllerCommand() *cobra.Command {
	return role{name: "controller", leaderElectionID: "banlieue-controller"}.command("controller",
		"Schedule VirtualMachines, build their infrastructure machines and mirror their status", nil)
}

func newOperatorCommand() *cobra.Command {
	return role{name: "operator", leaderElectionID: "banlieue-operator", defaultNamespace: "banlieue-system"}.
		command("operator", "Run each Provider's workload (Deployment, ServiceAccount, RBAC)", nil)
}

func newImagebuilderCommand() *cobra.Command {
	return role{name: "imagebuilder", leaderElectionID: "banlieue-imagebuilder"}.command("imagebuilder",
		"Build raw guest images from VMImage Url sources onto the artifacts volume", nil)
}

func newProviderCommand() *cobra.Command {
	provider := &cobra.Command{
		Use:   "provider",
		Short: "Run a provider backend",
	}
	libvirt := role{name: "provider-libvirt", leaderElectionID: "banlieue-provider-libvirt"}.command("libvirt",
		"Probe libvirt hosts, import images and realise LibvirtMachines as libvirt domains", nil)
	provider.AddCommand(libvirt)
	return provider
}
