package main

import (
	"os"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
	providerlibvirt "banlieue.io/banlieue/internal/provider/libvirt"
	"banlieue.io/banlieue/internal/provider/libvirt/hostconn"
)

// providerLibvirtOptions are the flags of `banlieue provider libvirt` beyond the common ones.
type providerLibvirtOptions struct {
	providerName string
}

func newProviderLibvirtCommand() *cobra.Command {
	var po providerLibvirtOptions
	r := &role{name: "provider-libvirt", leaderElectionID: "banlieue-provider-libvirt"}
	r.customize = func(o *manager.Options) {
		if po.providerName == "" {
			return
		}
		// One process per Provider: the watch is narrowed server-side to that Provider.
		o.Cache.ByObject = map[client.Object]cache.ByObject{
			&banlieuev1.Provider{}: {Field: providerlibvirt.ProviderFieldSelector(po.providerName)},
		}
	}
	r.setup = func(mgr manager.Manager, _ app.Options) error {
		conns := hostconn.NewPool()
		if err := mgr.Add(runOnStop(conns.Close)); err != nil {
			return err
		}
		if err := (&providerlibvirt.ProviderReconciler{
			Client:      mgr.GetClient(),
			APIReader:   mgr.GetAPIReader(),
			Connections: conns,
		}).SetupWithManager(mgr); err != nil {
			return err
		}
		return (&providerlibvirt.MachineReconciler{
			Client:       mgr.GetClient(),
			APIReader:    mgr.GetAPIReader(),
			Connections:  conns,
			ProviderName: po.providerName,
		}).SetupWithManager(mgr)
	}
	cmd := r.command("libvirt", "Probe libvirt hosts, import images and realise LibvirtMachines as libvirt domains")
	cmd.Flags().StringVar(&po.providerName, "provider-name", os.Getenv("BANLIEUE_PROVIDER_NAME"),
		"serve only the Provider of this name (env BANLIEUE_PROVIDER_NAME); the operator always sets it")
	cmd.AddCommand(newProviderLibvirtCheckCommand())
	return cmd
}
