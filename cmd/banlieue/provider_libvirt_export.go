package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"banlieue.io/banlieue/internal/vmexport"
)

// newProviderLibvirtExportCommand returns `banlieue provider libvirt export`: one disk of a
// stopped LibvirtMachine taken off its host into a directory or a registry. Like the import, the
// host's endpoint and keys are the Provider's, read from the API; registry credentials come from
// the Docker config (DOCKER_CONFIG), never from a flag.
func newProviderLibvirtExportCommand() *cobra.Command {
	var (
		o          vmexport.MachineOptions
		kubeconfig string
		deadline   time.Duration
		resultFile string
		vol        vmexport.VolumeRef
	)
	cmd := &cobra.Command{
		Use:   "export (--machine NAME --namespace NS | --volume V --pool P --domain D --provider P --provider-namespace N --id ID) (--output-dir DIR | --registry REPOSITORY[:TAG])",
		Short: "Take a stopped machine's disk off its libvirt host into a directory or an OCI registry",
		Long: `export copies one disk of a LibvirtMachine (its first, the OS disk, unless --disk names another)
off the machine's host. The machine's domain must be shut off, before and after the host's copy:
a running VM is refused. The host flattens the disk's qcow2 chain into a temporary volume
<volume>.export-<id> in the machine's pool, which is downloaded sparse, bounded by the disk's
size, hashed as it arrives, read back and compared, and deleted whatever happens. With
--output-dir the disk lands as disk.qcow2 with disk.qcow2.sha256 beside it; with --registry it is
pushed as a containerDisk (disk/disk.qcow2) and the image is printed by digest, ready for a
VMImage source's importFrom. The result is printed as one JSON line on standard output.

--volume (with --pool, --domain, --provider, --provider-namespace and --id) names the volume
instead of --machine: the export controller's Job, which resolved it from the machine, runs so
and reads nothing but the Provider and its credentials.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if vol.Volume != "" {
				o.Volume = &vol
			}
			kube, err := kubeClient(kubeconfig)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, deadline)
				defer cancel()
			}
			res, err := vmexport.ExportMachine(ctx, kube, o, cmd.ErrOrStderr())
			if resultFile != "" {
				// A Job's termination message: the outcome for whoever reads the pod, failed or not.
				if werr := os.WriteFile(resultFile, vmexport.EncodeReport(res, err), 0o644); werr != nil && err == nil {
					return fmt.Errorf("writing --result-file: %w", werr)
				}
			}
			if err != nil {
				return err
			}
			return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Machine, "machine", "", "LibvirtMachine whose disk is exported (a VirtualMachine's has the VM's name)")
	f.StringVar(&o.Namespace, "namespace", "", "namespace of the machine")
	f.StringVar(&vol.Volume, "volume", "", "volume to export, as the export controller resolved it from the machine (instead of --machine)")
	f.StringVar(&vol.Pool, "pool", "", "pool of --volume")
	f.StringVar(&vol.Domain, "domain", "", "domain of --volume, which must be shut off")
	f.StringVar(&vol.Provider, "provider", "", "Provider whose host holds --volume")
	f.StringVar(&vol.ProviderNamespace, "provider-namespace", "", "namespace of --provider")
	f.StringVar(&o.Disk, "disk", "", "disk of the machine's spec.disks (default: the first)")
	f.StringVar(&o.ID, "id", "", "identity of this export, naming the host's temporary copy so a retry replaces its own (default: the machine's UID)")
	f.StringVar(&o.OutputDir, "output-dir", "", "directory that receives disk.qcow2 and disk.qcow2.sha256")
	f.StringVar(&o.Registry, "registry", "", "repository, with an optional tag, the containerDisk is pushed to")
	f.BoolVar(&o.InsecureRegistry, "insecure-registry", false, "reach --registry over plain HTTP")
	f.StringVar(&o.Architecture, "architecture", "amd64", "guest architecture recorded in the pushed image (amd64 or arm64)")
	f.StringVar(&o.ScratchDir, "scratch-dir", "", "where the disk waits before a push (default: the temporary directory)")
	f.DurationVar(&o.Options.Flatten, "flatten-timeout", vmexport.DefaultFlattenTimeout, "longest the host's copy of the disk may take")
	f.StringVar(&resultFile, "result-file", "", "file that receives the outcome as one JSON document, also on failure (a Job's /dev/termination-log)")
	f.DurationVar(&deadline, "deadline", 0, "longest the whole export may take (default: no limit beyond each step's)")
	kubeconfigFlag(f, &kubeconfig)
	cmd.MarkFlagsRequiredTogether("machine", "namespace")
	cmd.MarkFlagsMutuallyExclusive("machine", "volume")
	return cmd
}
