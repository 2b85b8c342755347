package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// newDrainCommand is `kubectl banlieue drain <provider>`: cordon the Provider, ask for its
// drain, and (unless --timeout 0) follow status.drain until it is Drained or Blocked, in the
// manner of kubectl drain.
func newDrainCommand(u *userFlags) *cobra.Command {
	var (
		maxConcurrent int32
		timeout       time.Duration
	)
	cmd := &cobra.Command{
		Use:   "drain <provider>",
		Short: "Cordon the Provider and move its VMs to other hosts as their migrationPolicy allows (spec.drain)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if maxConcurrent < 1 || maxConcurrent > 32 {
				return fmt.Errorf("--max-concurrent %d: must be between 1 and 32", maxConcurrent)
			}
			if err := mergePatch(cmd, u, "drain", &banlieuev1.Provider{}, args[0], drainPatch(maxConcurrent)); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if _, err := fmt.Fprintf(out, "provider.banlieue.io/%s cordoned, drain requested\n", args[0]); err != nil || timeout == 0 {
				return err
			}
			c, ns, err := u.client()
			if err != nil {
				return err
			}
			return followDrain(cmd.Context(), c, types.NamespacedName{Namespace: ns, Name: args[0]}, timeout, 2*time.Second, out)
		},
	}
	cmd.Flags().Int32Var(&maxConcurrent, "max-concurrent", 1, "how many VMs move at once (spec.drain.maxConcurrent, 1 to 32)")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Minute, "how long to follow the drain; 0 returns once it is requested")
	return cmd
}

// errDrainBlocked ends a followed drain that cannot finish without the user.
var errDrainBlocked = errors.New("drain blocked")

// followDrain prints each change of the Provider's status.drain until the drain is Drained
// (nil), Blocked (errDrainBlocked, with every VM that cannot move and why) or timeout passes.
func followDrain(ctx context.Context, c client.Client, key types.NamespacedName, timeout, every time.Duration, out io.Writer) error {
	var last string
	var final *banlieuev1.ProviderDrainStatus
	err := wait.PollUntilContextTimeout(ctx, every, timeout, true, func(ctx context.Context) (bool, error) {
		var p banlieuev1.Provider
		if err := c.Get(ctx, key, &p); err != nil {
			return false, fmt.Errorf("drain %s: reading the Provider: %w", key, err)
		}
		st := p.Status.Drain
		if st == nil {
			return false, nil // the controller has not seen the drain yet
		}
		if line := drainLine(st); line != last {
			last = line
			if _, err := fmt.Fprintln(out, line); err != nil {
				return false, err
			}
		}
		final = st
		return st.Phase != banlieuev1.DrainDraining, nil
	})
	switch {
	case err != nil && final == nil:
		return fmt.Errorf("drain %s: %w", key, err)
	case err != nil:
		return fmt.Errorf("drain %s: still %s after %s (%d of %d VMs left): %w", key, final.Phase, timeout, final.Remaining, final.Total, err)
	case final.Phase == banlieuev1.DrainBlocked:
		for _, v := range final.Blocked {
			if _, err := fmt.Fprintf(out, "  %s/%s cannot move (%s): %s\n", v.Namespace, v.Name, v.Reason, v.Message); err != nil {
				return err
			}
		}
		return fmt.Errorf("%w: %d VM(s) left on Provider %s cannot move; it stays cordoned", errDrainBlocked, final.Remaining, key)
	}
	_, err = fmt.Fprintf(out, "provider.banlieue.io/%s drained\n", key.Name)
	return err
}

// drainLine is one line of a drain's progress.
func drainLine(st *banlieuev1.ProviderDrainStatus) string {
	moving := make([]string, 0, len(st.Moving))
	for _, v := range st.Moving {
		moving = append(moving, v.Namespace+"/"+v.Name)
	}
	return fmt.Sprintf("%s: %d of %d VM(s) left, %d blocked, moving [%s]", st.Phase, st.Remaining, st.Total, len(st.Blocked), strings.Join(moving, " "))
}
