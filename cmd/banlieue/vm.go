package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/console"
)

// pluginName is the name kubectl finds the plugin by: the banlieue binary, installed (or linked)
// as kubectl-banlieue on the PATH, runs as `kubectl banlieue`.
const pluginName = "kubectl-banlieue"

// isPlugin reports whether the binary was started as the kubectl plugin.
func isPlugin(argv0 string) bool {
	return strings.TrimSuffix(filepath.Base(argv0), ".exe") == pluginName
}

// userFlags are how a user's command finds the cluster and the VM's namespace: the user's own
// kubeconfig and context, as kubectl reads them, so the request is the user's.
type userFlags struct {
	overrides clientcmd.ConfigOverrides
	rules     *clientcmd.ClientConfigLoadingRules
}

func (u *userFlags) add(cmd *cobra.Command) {
	u.rules = clientcmd.NewDefaultClientConfigLoadingRules()
	f := cmd.PersistentFlags()
	f.StringVar(&u.rules.ExplicitPath, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
	f.StringVar(&u.overrides.CurrentContext, "context", "", "kubeconfig context")
	f.StringVarP(&u.overrides.Context.Namespace, "namespace", "n", "", "namespace of the VirtualMachine or Provider (default: the context's)")
}

// config is the user's REST config and the namespace a VM name is in.
func (u *userFlags) config() (*rest.Config, string, error) {
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(u.rules, &u.overrides)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", err
	}
	ns, _, err := cc.Namespace()
	return cfg, ns, err
}

func (u *userFlags) client() (client.Client, string, error) {
	cfg, ns, err := u.config()
	if err != nil {
		return nil, "", err
	}
	c, err := client.New(cfg, client.Options{Scheme: app.NewScheme()})
	return c, ns, err
}

// newConsoleCommand is `banlieue console <vm>` (and `kubectl banlieue console <vm>`).
func newConsoleCommand(u *userFlags) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "console <vm>",
		Short: "Attach to a VirtualMachine's serial console (Ctrl-] to leave)",
		Long: `Attach the terminal to the VM's serial console through the Kubernetes API server, as the
user of the kubeconfig: it needs get on virtualmachines/console in API group
subresources.banlieue.io in the VM's namespace (ClusterRole banlieue-vm-console). Ctrl-] ends
the session; the guest keeps running.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, ns, err := u.config()
			if err != nil {
				return err
			}
			vm := types.NamespacedName{Namespace: ns, Name: args[0]}
			con, err := console.Dial(cmd.Context(), cfg, vm, force)
			if err != nil {
				return err
			}
			_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "Connected to %s/%s; escape character is ^]\r\n", vm.Namespace, vm.Name)
			restore, err := rawTerminal(os.Stdin)
			if err != nil {
				_ = con.Close()
				return err
			}
			defer restore()
			err = console.Attach(cmd.Context(), con, os.Stdin, cmd.OutOrStdout())
			_, _ = fmt.Fprint(cmd.ErrOrStderr(), "\r\n") // the terminal prompt starts on its own line
			return err
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "take the console from another session that holds it")
	return cmd
}

// rawTerminal puts a terminal in raw mode, so each key (Ctrl-C included) goes to the guest;
// input that is not a terminal is left alone.
func rawTerminal(f *os.File) (func(), error) {
	fd := int(f.Fd()) //nolint:gosec // a file descriptor fits an int
	if !term.IsTerminal(fd) {
		return func() {}, nil
	}
	state, err := term.MakeRaw(fd)
	if err != nil {
		return nil, err
	}
	return func() { _ = term.Restore(fd, state) }, nil
}

// newPluginCommand is the kubectl plugin's root: `kubectl banlieue
// start|stop|restart|console|addresses|migrate` on VMs and `cordon|uncordon|drain` on Providers.
func newPluginCommand() *cobra.Command {
	u := &userFlags{}
	root := &cobra.Command{
		Use:           "kubectl banlieue",
		Short:         "Day-2 operations on banlieue VirtualMachines",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	u.add(root)
	root.AddCommand(
		specCommand(u, "start", "Power the VM on (spec.desiredPowerState: PoweredOn)", func(time.Time) ([]byte, error) {
			return powerPatch(banlieuev1.PoweredOn)
		}),
		specCommand(u, "stop", "Power the VM off the way its spec.powerOffMode says (spec.desiredPowerState: PoweredOff)", func(time.Time) ([]byte, error) {
			return powerPatch(banlieuev1.PoweredOff)
		}),
		specCommand(u, "restart", "Restart the VM (spec.nextRestartTime: now)", restartPatch),
		newConsoleCommand(u),
		newAddressesCommand(u),
		providerCommand(u, "cordon", "Place no new VM on the Provider; its VMs stay (spec.unschedulable: true)", cordonPatch(true)),
		providerCommand(u, "uncordon", "Place VMs on the Provider again, ending any drain (spec.unschedulable and spec.drain removed)", cordonPatch(false)),
		newDrainCommand(u),
		newMigrateCommand(u),
	)
	return root
}

// cordonPatch sets spec.unschedulable, or removes it with spec.drain: an uncordoned Provider
// cannot stay drained (the API refuses a drain without the cordon).
func cordonPatch(cordon bool) []byte {
	spec := map[string]any{"unschedulable": nil, "drain": nil}
	if cordon {
		spec = map[string]any{"unschedulable": true}
	}
	b, _ := json.Marshal(map[string]any{"spec": spec})
	return b
}

// drainPatch cordons the Provider and asks for its drain.
func drainPatch(maxConcurrent int32) []byte {
	b, _ := json.Marshal(map[string]any{"spec": map[string]any{"unschedulable": true,
		"drain": map[string]any{"maxConcurrent": maxConcurrent}}})
	return b
}

// providerCommand writes one merge patch to a Provider's spec.
func providerCommand(u *userFlags, use, short string, patch []byte) *cobra.Command {
	return &cobra.Command{
		Use:   use + " <provider>",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := mergePatch(cmd, u, use, &banlieuev1.Provider{}, args[0], patch); err != nil {
				return err
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "provider.banlieue.io/%s %sed\n", args[0], use)
			return err
		},
	}
}

// specCommand writes one merge patch to a VM's spec.
func specCommand(u *userFlags, use, short string, patch func(now time.Time) ([]byte, error)) *cobra.Command {
	return &cobra.Command{
		Use:   use + " <vm>",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := patch(time.Now())
			if err != nil {
				return err
			}
			if err := mergePatch(cmd, u, use, &banlieuev1.VirtualMachine{}, args[0], data); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "virtualmachine.banlieue.io/%s patched (%s)\n", args[0], data)
			return err
		},
	}
}

// mergePatch writes data as a merge patch to obj, named name in the user's namespace, within 30 s.
func mergePatch(cmd *cobra.Command, u *userFlags, use string, obj client.Object, name string, data []byte) error {
	c, ns, err := u.client()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
	defer cancel()
	obj.SetNamespace(ns)
	obj.SetName(name)
	if err := c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, data)); err != nil {
		return fmt.Errorf("%s %s/%s: %w", use, ns, name, err)
	}
	return nil
}

// powerPatch sets spec.desiredPowerState.
func powerPatch(state banlieuev1.PowerState) ([]byte, error) {
	return json.Marshal(map[string]any{"spec": map[string]any{"desiredPowerState": state}})
}

// restartPatch sets spec.nextRestartTime to now, in the API's RFC 3339 seconds: a later time
// than the last restart's, which is what asks for one.
func restartPatch(now time.Time) ([]byte, error) {
	return json.Marshal(map[string]any{"spec": map[string]any{"nextRestartTime": now.UTC().Format(time.RFC3339)}})
}

// newAddressesCommand prints a VM's status.addresses.
func newAddressesCommand(u *userFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "addresses <vm>",
		Short: "Print the VM's addresses (status.addresses)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ns, err := u.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			var vm banlieuev1.VirtualMachine
			if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: args[0]}, &vm); err != nil {
				return err
			}
			return printAddresses(cmd.OutOrStdout(), vm.Status.Addresses)
		},
	}
}

func printAddresses(w io.Writer, addrs []banlieuev1.MachineAddress) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TYPE\tADDRESS")
	for _, a := range addrs {
		fmt.Fprintf(tw, "%s\t%s\n", a.Type, a.Address)
	}
	return tw.Flush()
}
