package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	providerlibvirt "banlieue.io/banlieue/internal/provider/libvirt"
	"banlieue.io/banlieue/internal/provider/libvirt/hostconn"
)

// auditTimeout bounds the whole audit: one listing, and one read per domain.
const auditTimeout = 5 * time.Minute

// newProviderLibvirtAuditCommand returns `banlieue provider libvirt audit`, which reports the
// domains of a Provider's host that carry banlieue's ownership record while the LibvirtMachine
// they name is gone. It changes nothing: deciding what to do with an orphan's disks is the
// operator's call.
func newProviderLibvirtAuditCommand() *cobra.Command {
	var provider, namespace, kubeconfig string
	cmd := &cobra.Command{
		Use:   "audit --provider NAME --provider-namespace NS",
		Short: "List the host's domains that banlieue created for this Provider's LibvirtMachines that no longer exist",
		Long: `audit connects to the Provider's host with the Provider's own credentials, reads the
ownership record banlieue writes into every domain it defines, and lists each domain recorded
for this Provider whose LibvirtMachine no longer exists (or is another machine of the same name
now), with the disks it attaches. Domains without banlieue's record are never listed: they are
not banlieue's; nor are those recorded for another Provider sharing the host. Nothing is changed
on the host or in the cluster. The caller needs read access to the Provider, its credentials
and the LibvirtMachines of its namespace.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			kube, err := kubeClient(kubeconfig)
			if err != nil {
				return err
			}
			return runLibvirtAudit(cmd.Context(), cmd.OutOrStdout(), kube, types.NamespacedName{Namespace: namespace, Name: provider})
		},
	}
	f := cmd.Flags()
	f.StringVar(&provider, "provider", "", "Provider whose host is audited")
	f.StringVar(&namespace, "provider-namespace", "", "namespace of the Provider")
	kubeconfigFlag(f, &kubeconfig)
	for _, name := range []string{"provider", "provider-namespace"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

// runLibvirtAudit audits the Provider's host and writes one row per orphaned domain.
func runLibvirtAudit(ctx context.Context, out io.Writer, kube client.Client, key types.NamespacedName) error {
	ctx, cancel := context.WithTimeout(ctx, auditTimeout)
	defer cancel()
	var p banlieuev1.Provider
	if err := kube.Get(ctx, key, &p); err != nil {
		return fmt.Errorf("reading Provider %s: %w", key, err)
	}
	host, err := hostconn.Dial(ctx, kube, &p)
	if err != nil {
		return fmt.Errorf("connecting to Provider %s: %w", key, err)
	}
	defer host.Close()
	orphans, err := providerlibvirt.Audit(ctx, host, kube, key)
	if err != nil {
		return err
	}
	if len(orphans) == 0 {
		_, err := fmt.Fprintf(out, "no orphaned domains on the host of Provider %s\n", key)
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "DOMAIN\tUUID\tRECORDED OWNER\tWHY\tDISKS")
	for _, o := range orphans {
		fmt.Fprintf(w, "%s\t%s\t%s/%s (uid %s)\t%s\t%s\n", o.Domain, o.UUID, o.Owner.Namespace, o.Owner.Name, o.Owner.UID,
			o.Why, strings.Join(o.Files, ","))
	}
	fmt.Fprintf(w, "%d orphaned domain(s); nothing was changed\n", len(orphans))
	return w.Flush()
}
