package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"banlieue.io/banlieue/pkg/libvirt"
)

// libvirtCheckOptions are the flags of `banlieue provider libvirt check`.
type libvirtCheckOptions struct {
	endpoint string
	pkiDir   string
	uri      string
	timeout  time.Duration
}

// newProviderLibvirtCheckCommand returns `banlieue provider libvirt check`, which connects to a
// libvirt host exactly as the provider does (mutual TLS, AUTH_LIST, CONNECT_OPEN) and reports
// what the provider would discover there, so TLS and host setup can be verified before any
// Provider object exists.
func newProviderLibvirtCheckCommand() *cobra.Command {
	o := libvirtCheckOptions{uri: libvirt.DefaultURI, timeout: libvirt.DefaultTimeout}
	if home, err := os.UserHomeDir(); err == nil {
		o.pkiDir = filepath.Join(home, ".config", "banlieue", "libvirt")
	}
	cmd := &cobra.Command{
		Use:   "check --endpoint qemu+tls://HOST/system",
		Short: "Connect to a libvirt host as the provider does and print its version, pools, networks, bridges and domain type",
		Long: `check dials a libvirt host over mutual TLS with the certificates in --pki-dir
(cacert.pem: the CA that signed libvirtd's certificate; clientcert.pem and clientkey.pem: this
client), opens the driver URI and prints what the provider would discover. It exits non-zero
with the transport's error when any step fails.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runLibvirtCheck(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.endpoint, "endpoint", "", "libvirt host, qemu+tls://HOST[:PORT]/system or HOST[:PORT]")
	f.StringVar(&o.pkiDir, "pki-dir", o.pkiDir, "directory holding cacert.pem, clientcert.pem and clientkey.pem")
	f.StringVar(&o.uri, "uri", o.uri, "hypervisor driver URI to open on the host")
	f.DurationVar(&o.timeout, "timeout", o.timeout, "bound on connecting and on each call")
	_ = cmd.MarkFlagRequired("endpoint")
	return cmd
}

// runLibvirtCheck performs the check and writes its report to out.
func runLibvirtCheck(ctx context.Context, out io.Writer, o libvirtCheckOptions) error {
	ep, err := libvirt.ParseEndpoint(o.endpoint)
	if err != nil {
		return err
	}
	creds, err := libvirt.ReadPKIDir(o.pkiDir)
	if err != nil {
		return fmt.Errorf("reading --pki-dir: %w", err)
	}
	c, err := libvirt.Dialer{Endpoint: ep, Credentials: creds, URI: o.uri, Timeout: o.timeout}.Dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()

	version, err := c.LibVersion(ctx)
	if err != nil {
		return err
	}
	pools, err := c.ListAllStoragePools(ctx)
	if err != nil {
		return err
	}
	networks, err := c.ListAllNetworks(ctx)
	if err != nil {
		return err
	}
	ifaces, err := c.ListAllInterfaces(ctx)
	if err != nil {
		return err
	}
	caps, err := c.Capabilities(ctx)
	if err != nil {
		return err
	}
	// A host that runs no x86_64 guests (the test driver, say) is still worth reporting on.
	domainType := "none"
	if t, err := libvirt.DomainType(caps, "x86_64"); err != nil {
		domainType += " (" + err.Error() + ")"
	} else {
		domainType = describeDomainType(t)
	}

	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "endpoint:\t%s\n", ep)
	fmt.Fprintf(w, "driver URI:\t%s\n", o.uri)
	fmt.Fprintf(w, "libvirt:\t%d.%d.%d\n", version/1_000_000, version/1000%1000, version%1000)
	fmt.Fprintf(w, "domain type:\t%s\n", domainType)
	fmt.Fprintf(w, "storage pools:\t%s\n", list(pools, func(p libvirt.StoragePool) string { return p.Name }))
	fmt.Fprintf(w, "networks:\t%s\n", list(networks, func(n libvirt.Network) string { return n.Name }))
	fmt.Fprintf(w, "interfaces:\t%s\n", list(ifaces, func(i libvirt.Interface) string { return i.Name + " (" + i.MAC + ")" }))
	return w.Flush()
}

func describeDomainType(t string) string {
	if t == "kvm" {
		return "kvm (hardware virtualisation for x86_64 guests)"
	}
	return t + " (no kvm for x86_64 guests: machines run emulated)"
}

func list[T any](xs []T, name func(T) string) string {
	if len(xs) == 0 {
		return "(none)"
	}
	names := make([]string, len(xs))
	for i, x := range xs {
		names[i] = name(x)
	}
	return strings.Join(names, ", ")
}
