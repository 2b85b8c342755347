package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/jobbounds"
	"banlieue.io/banlieue/internal/jobimage"
	"banlieue.io/banlieue/internal/provider/vsphere"
)

// providerVSphereOptions are the flags of `banlieue provider vsphere` beyond the common ones
// (docs/operations.md, "Role-specific flags").
type providerVSphereOptions struct {
	providerName    string
	folder          string
	clones, powerOp int
	// Passed by the operator to every provider workload; the vsphere provider imports no images
	// and serves no console yet, so it accepts them and leaves them unused.
	unused struct {
		importImage, importServiceAccount, consoleRelay string
		consolePort, domainOps, volumeUploads           int
		buildTolerations                                []string
		importBounds                                    jobbounds.Bounds
		importPull                                      jobimage.Pull
	}
}

func newProviderVSphereCommand() *cobra.Command {
	po := providerVSphereOptions{clones: 4, powerOp: 16}
	po.unused.importBounds = jobbounds.DefaultImport()
	r := &role{name: "provider-vsphere", leaderElectionID: "banlieue-provider-vsphere", defaultWorkers: vsphere.DefaultWorkers}
	r.setup = func(mgr manager.Manager, opts app.Options) error {
		return vsphere.Setup(mgr, vsphere.Options{ProviderName: po.providerName, ProviderNamespace: opts.Namespace,
			Folder: po.folder, Workers: opts.Workers, Clones: po.clones, PowerOperations: po.powerOp})
	}
	cmd := r.command("vsphere", "Realise VSphereMachines as virtual machines cloned in vCenter")
	cmd.PreRunE = func(*cobra.Command, []string) error {
		for flag, n := range map[string]int{"--vcenter-clones": po.clones, "--vcenter-power-operations": po.powerOp} {
			if n < 1 || n > maxHostSetting {
				return fmt.Errorf("invalid %s: %d: want 1 to %d", flag, n, maxHostSetting)
			}
		}
		return nil
	}
	f := cmd.Flags()
	f.StringVar(&po.providerName, "provider-name", os.Getenv("BANLIEUE_PROVIDER_NAME"),
		"serve only the Provider of this name (env BANLIEUE_PROVIDER_NAME); the operator always sets it")
	f.StringVar(&po.folder, "vm-folder", "",
		"folder below each datacenter's VM folder that machines are cloned into and watched in; empty is the root VM folder")
	f.IntVar(&po.clones, "vcenter-clones", po.clones, "clones the Provider's vCenter session runs at once (1 to 256)")
	f.IntVar(&po.powerOp, "vcenter-power-operations", po.powerOp, "power operations the Provider's vCenter session runs at once (1 to 256)")
	u := &po.unused
	const unused = "; passed by the operator to every provider workload, not used by the vsphere provider yet"
	f.StringVar(&u.importImage, "import-image", "", "image of import Jobs"+unused)
	f.StringVar(&u.importServiceAccount, "import-service-account", "", "account of import Jobs"+unused)
	f.IntVar(&u.consolePort, "console-port", 0, "port of the console endpoint"+unused)
	f.StringVar(&u.consoleRelay, "console-relay", "", "the console relay's user"+unused)
	f.StringArrayVar(&u.buildTolerations, "build-toleration", nil, "toleration of import Jobs"+unused)
	f.IntVar(&u.domainOps, "host-domain-operations", 0, "machine passes talking to one libvirt host at once"+unused)
	f.IntVar(&u.volumeUploads, "host-volume-uploads", 0, "volume uploads to one libvirt host at once"+unused)
	u.importBounds.AddFlags(f, "import")
	u.importPull.AddFlags(f, "import")
	return cmd
}
