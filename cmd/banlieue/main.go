// Command banlieue is the single binary of every banlieue role: one subcommand per role.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
)

func main() {
	root := newRootCommand()
	if isPlugin(os.Args[0]) {
		root = newPluginCommand()
	}
	if err := root.ExecuteContext(ctrl.SetupSignalHandler()); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "banlieue",
		Short: "Provision virtual machines on hypervisor hosts from Kubernetes",
		Long: `banlieue schedules VirtualMachines onto registered Providers, imports guest images onto
the hosts and realises real machines. Each role of the operator is a subcommand of this binary.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	users := &userFlags{}
	console := newConsoleCommand(users)
	users.add(console)
	root.AddCommand(
		console,
		newControllerCommand(),
		newOperatorCommand(),
		newProviderCommand(),
		newImagebuilderCommand(),
		newSeedCommand(),
		newVersionCommand(),
	)
	return root
}
