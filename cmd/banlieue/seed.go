package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"banlieue.io/banlieue/pkg/nocloud"
)

// newSeedCommand returns "banlieue seed", which groups the NoCloud seed
// tools.
func newSeedCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "seed",
		Short: "Work with NoCloud (CIDATA) seed images",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newSeedBuildCommand())
	return cmd
}

// seedBuildOptions are the flags of "banlieue seed build".
type seedBuildOptions struct {
	instanceID    string
	hostname      string
	userData      string
	networkConfig string
	output        string
}

func newSeedBuildCommand() *cobra.Command {
	var o seedBuildOptions
	cmd := &cobra.Command{
		Use:   "build --instance-id UUID --hostname NAME [--user-data FILE] [--network-config FILE] -o seed.iso",
		Short: "Build the NoCloud seed ISO the libvirt provider would attach",
		Long: `Build the NoCloud seed ISO the libvirt provider would attach, with the same
code: meta-data from --instance-id and --hostname, and user-data and
network-config copied byte for byte from the given files. The output is
deterministic and is written with mode 0600, since user-data often holds
credentials.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error { return buildSeed(o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.instanceID, "instance-id", "", "instance ID, normally the domain UUID (required)")
	f.StringVar(&o.hostname, "hostname", "", "local-hostname, normally the domain name (required)")
	f.StringVar(&o.userData, "user-data", "", "file copied to user-data; without it the seed has none")
	f.StringVar(&o.networkConfig, "network-config", "", "file copied to network-config; without it the seed has none")
	f.StringVarP(&o.output, "output", "o", "", "path of the ISO to write (required)")
	for _, name := range []string{"instance-id", "hostname", "output"} {
		if err := cmd.MarkFlagRequired(name); err != nil {
			panic(err) // the flag is defined just above
		}
	}
	return cmd
}

// buildSeed builds the seed described by o and writes it to o.output.
func buildSeed(o seedBuildOptions) error {
	s := nocloud.Seed{InstanceID: o.instanceID, Hostname: o.hostname}
	var err error
	if o.userData != "" {
		if s.UserData, err = readPayload(o.userData); err != nil {
			return err
		}
	}
	if o.networkConfig != "" {
		if s.NetworkConfig, err = readPayload(o.networkConfig); err != nil {
			return err
		}
	}
	im, err := s.Build()
	if err != nil {
		return err
	}
	return writeOutput(o.output, im)
}

// writeOutput writes a regular file (or a new one) atomically. A target that exists and is not a
// regular file, such as /dev/stdout, a pipe or a device, is written in place: there is nothing to
// replace atomically, and a temporary file beside it would need a writable /dev, then be renamed
// over the /dev/stdout symlink itself.
func writeOutput(path string, w io.WriterTo) error {
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		if _, err := w.WriteTo(f); err != nil {
			_ = f.Close() // the write's error is the one to report
			return fmt.Errorf("write %s: %w", path, err)
		}
		return f.Close()
	}
	return writeAtomically(path, w)
}

// readPayload reads a payload file, stopping one byte past the limit so a
// huge file is refused without being read whole.
func readPayload(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read only: closing it loses nothing
	data, err := io.ReadAll(io.LimitReader(f, nocloud.MaxPayloadSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > nocloud.MaxPayloadSize {
		return nil, fmt.Errorf("%s is larger than the %d-byte seed payload maximum", path, nocloud.MaxPayloadSize)
	}
	return data, nil
}

// writeAtomically writes w's output to a temporary file beside path and
// renames it into place, so a failure never leaves a truncated seed behind.
func writeAtomically(path string, w io.WriterTo) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, os.Remove(tmp.Name()))
		}
	}()
	if _, err := w.WriteTo(tmp); err != nil {
		_ = tmp.Close() // the write's error is the one to report; the file is removed
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return os.Rename(tmp.Name(), path)
}
