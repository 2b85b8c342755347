package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// newMigrateCommand is `kubectl banlieue migrate <vm> [--to provider]`: it creates a
// VirtualMachineMigration of the VM, named after it, and returns; the migration's status says
// the rest (docs/guides/libvirt-provider.md, "Live migration").
func newMigrateCommand(u *userFlags) *cobra.Command {
	var to string
	cmd := &cobra.Command{
		Use:   "migrate <vm>",
		Short: "Move the running VM live to another Provider (creates a VirtualMachineMigration)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := migrationFor(args[0], to)
			if err != nil {
				return err
			}
			c, ns, err := u.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			m.Namespace = ns
			if err := c.Create(ctx, m); err != nil {
				return fmt.Errorf("migrate %s/%s: %w", ns, args[0], err)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "virtualmachinemigration.banlieue.io/%s created\n", m.Name)
			return err
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "the target Provider, <name> or <namespace>/<name>; unset, the scheduler chooses")
	return cmd
}

// migrationFor is the VirtualMachineMigration `migrate` creates for vm, to target ("" lets
// the scheduler choose).
func migrationFor(vm, target string) (*banlieuev1.VirtualMachineMigration, error) {
	m := &banlieuev1.VirtualMachineMigration{ObjectMeta: metav1.ObjectMeta{GenerateName: vm + "-"},
		Spec: banlieuev1.VirtualMachineMigrationSpec{VMName: vm}}
	if target == "" {
		return m, nil
	}
	ref := &banlieuev1.MigrationProviderReference{Name: target}
	if ns, name, ok := strings.Cut(target, "/"); ok {
		if ns == "" || name == "" || strings.Contains(name, "/") {
			return nil, fmt.Errorf("--to %q: want <name> or <namespace>/<name>", target)
		}
		ref = &banlieuev1.MigrationProviderReference{Namespace: ns, Name: name}
	}
	m.Spec.TargetProvider = ref
	return m, nil
}
