package main

import (
	"cmp"
	"errors"
	"os"

	"github.com/spf13/cobra"

	"banlieue.io/banlieue/internal/imagebuilder/build"
)

// terminationLog is where the kubelet collects a container's termination message; the build
// reports its artifact there. BANLIEUE_TERMINATION_LOG overrides it where no kubelet runs.
const terminationLog = "/dev/termination-log"

// newImagebuilderBuildCommand returns `banlieue imagebuilder build`, the build Job's command.
func newImagebuilderBuildCommand() *cobra.Command {
	o := build.Options{Limits: build.DefaultLimits()}
	cmd := &cobra.Command{
		Use:   "build --vmimage NAME [--from URL|OCI-REF] --output PATH",
		Short: "Fetch, verify and convert an image source into a raw disk (or ISO) artifact",
		Long: `build downloads an https:// image (resuming interrupted transfers) or pulls a containerDisk
OCI image, verifies --checksum over the fetched bytes, decompresses gzip, xz or zstd, converts
qcow2 to a sparse raw disk, keeps an ISO as is, and publishes --output atomically with
<output>.sha256 beside it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// A build Job gets its source from the build Secret through the environment, so
			// a URL's credential is in no argv; --from stays for runs by hand.
			o.From = cmp.Or(o.From, os.Getenv(build.FromEnv))
			if o.From == "" {
				return errors.New("invalid --from: required (or env " + build.FromEnv + ")")
			}
			logPath := cmp.Or(os.Getenv("BANLIEUE_TERMINATION_LOG"), terminationLog)
			res, err := build.Build(cmd.Context(), o, cmd.OutOrStdout())
			if err != nil {
				// The controller mirrors the termination message into buildArtifact.
				_ = build.WriteFailure(logPath, err)
				return err
			}
			return build.WriteResult(logPath, res)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.VMImage, "vmimage", "", "VMImage being built")
	f.StringVar(&o.From, "from", "", "https:// URL of a disk image or ISO, or an OCI reference of a containerDisk image (default env "+build.FromEnv+")")
	f.StringVar(&o.Output, "output", "", "artifact path on the PVC, e.g. /artifacts/<vmimage>.raw")
	f.StringVar(&o.Checksum, "checksum", "", "sha256:<hex> or sha512:<hex> of the fetched bytes")
	f.StringVar(&o.Format, "format", "auto", "source format: auto, raw, qcow2 or iso")
	f.BoolVar(&o.AllowUnverifiedTag, build.FlagAllowUnverifiedTag, false, "accept an OCI reference by tag with neither a digest nor --checksum (the VMImage source's allowUnverifiedTag)")
	f.StringVar(&build.Architecture, "architecture", build.Architecture, "platform architecture of an OCI index (amd64 or arm64)")
	o.Limits.AddFlags(f)
	for _, name := range []string{"vmimage", "output"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}
