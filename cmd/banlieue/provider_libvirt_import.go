package main

import (
	"github.com/spf13/cobra"

	"banlieue.io/banlieue/internal/provider/libvirt/image"
)

// newProviderLibvirtImportCommand returns `banlieue provider libvirt import`, the one-shot data
// path an import Job runs. The host's endpoint and keys are read from the Provider and its
// Secret, never from flags or the environment: a private key in argv is readable through /proc
// by anything sharing the pod's PID namespace.
func newProviderLibvirtImportCommand() *cobra.Command {
	var (
		o          image.ImportOptions
		kubeconfig string
	)
	cmd := &cobra.Command{
		Use:   "import --vmimage NAME --provider NAME --provider-namespace NS --pool POOL --source PATH",
		Short: "Stream a built image artifact into a libvirt storage volume of a Provider's host",
		Long: `import verifies --source (against --extent-digest when given, else --checksum), connects to the Provider's host with
the Provider's own credentials and uploads the file into --pool as a sparse raw volume. Before
the volume is created it writes a marker volume <volume>.sha256 recording the import as in
progress, and rewrites it as complete after the upload. An imported volume is never replaced:
a volume whose marker records this artifact as complete is left alone, one whose marker records
an interrupted import of this artifact is deleted and uploaded again, and every other volume of
that name (another artifact's, or one without a banlieue marker) is refused, untouched.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			kube, err := kubeClient(kubeconfig)
			if err != nil {
				return err
			}
			return image.Importer{Kube: kube, Out: cmd.OutOrStdout()}.Import(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.VMImage, "vmimage", "", "VMImage being imported")
	f.StringVar(&o.Provider, "provider", "", "Provider whose host receives the volume")
	f.StringVar(&o.ProviderNamespace, "provider-namespace", "", "namespace of the Provider")
	f.StringVar(&o.Pool, "pool", "", "storage pool on the host")
	f.StringVar(&o.Source, "source", "", "artifact file to upload (raw disk or ISO)")
	f.StringVar(&o.VolumeName, "volume-name", "", "volume name (default <vmimage>.raw, or <vmimage>.iso for an ISO)")
	f.StringVar(&o.Checksum, "checksum", "", "sha256:<hex> or sha512:<hex> the source must match")
	f.StringVar(&o.ExtentDigest, "extent-digest", "", "extents-sha256:<hex> the source must match, verified instead of --checksum (which must be a sha256) at the cost of the data only")
	kubeconfigFlag(f, &kubeconfig)
	for _, name := range []string{"vmimage", "provider", "provider-namespace", "pool", "source"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}
