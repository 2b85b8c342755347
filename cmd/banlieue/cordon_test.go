package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/ssa"
	"banlieue.io/banlieue/internal/testenv"
)

// kubectl banlieue cordon, uncordon, drain and migrate, against the real API server: they set and remove
// the Provider's spec.unschedulable and spec.drain and touch nothing else; a followed drain that
// is Blocked is an error listing why; a missing Provider is an error naming it; migrate creates
// a VirtualMachineMigration to the Provider --to names.
func TestCordonAgainstAPIServer(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	kubeconfig := env.Kubeconfig(t)
	ns := "cordon"
	p := &banlieuev1.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: "kvm-a", Namespace: ns},
		Spec: banlieuev1.ProviderSpec{
			ProviderClassRef: banlieuev1.LocalObjectReference{Name: "libvirt"},
			Connection: banlieuev1.ProviderConnection{Endpoint: "qemu+tls://kvm-a.example/system",
				CredentialsRef: banlieuev1.LocalObjectReference{Name: "creds"}},
			Capabilities: banlieuev1.ProviderCapabilities{Features: []string{"vtpm"}},
		},
	}
	env.Create(ctx, t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, p)

	run := func(args ...string) (string, error) {
		cmd := newPluginCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(append([]string{"--kubeconfig", kubeconfig, "-n", ns}, args...))
		err := cmd.ExecuteContext(ctx)
		return out.String(), err
	}
	get := func() *banlieuev1.Provider {
		var got banlieuev1.Provider
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), &got); err != nil {
			t.Fatal(err)
		}
		return &got
	}

	if out, err := run("cordon", "kvm-a"); err != nil || out != "provider.banlieue.io/kvm-a cordoned\n" {
		t.Fatalf("cordon: %q, %v", out, err)
	}
	if got := get(); !got.Spec.Unschedulable || got.Spec.Connection.Endpoint != p.Spec.Connection.Endpoint ||
		len(got.Spec.Capabilities.Features) != 1 {
		t.Fatalf("after cordon: spec %+v", got.Spec)
	}
	if out, err := run("uncordon", "kvm-a"); err != nil || out != "provider.banlieue.io/kvm-a uncordoned\n" {
		t.Fatalf("uncordon: %q, %v", out, err)
	}
	if got := get(); got.Spec.Unschedulable {
		t.Fatalf("after uncordon: spec.unschedulable still true")
	}

	// drain cordons and asks for the drain; followed, a Blocked drain is an error listing why.
	if out, err := run("drain", "kvm-a", "--max-concurrent", "3", "--timeout", "0"); err != nil ||
		out != "provider.banlieue.io/kvm-a cordoned, drain requested\n" {
		t.Fatalf("drain: %q, %v", out, err)
	}
	if got := get(); !got.Spec.Unschedulable || got.Spec.Drain == nil || ptr.Deref(got.Spec.Drain.MaxConcurrent, 0) != 3 {
		t.Fatalf("after drain: spec %+v", got.Spec)
	}
	if _, err := run("drain", "kvm-a", "--max-concurrent", "33"); err == nil || !strings.Contains(err.Error(), "--max-concurrent 33") {
		t.Fatalf("drain --max-concurrent 33: %v", err)
	}
	blocked := &banlieuev1.ProviderDrainStatus{Phase: banlieuev1.DrainBlocked, StartedAt: metav1.Now(), Total: 3, Remaining: 1,
		Blocked: []banlieuev1.DrainVM{{Namespace: "team-a", Name: "db-01", Reason: banlieuev1.ReasonDrainMigrationNever,
			Message: "migrationPolicy never", Since: metav1.Now()}}}
	if err := ssa.ApplyStatus(ctx, env.Client, get(), &banlieuev1.ProviderStatus{Drain: blocked}, banlieuev1.FieldManagerController); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := followDrain(ctx, env.Client, client.ObjectKeyFromObject(p), 10*time.Second, 100*time.Millisecond, &out)
	if !errors.Is(err, errDrainBlocked) || !strings.Contains(out.String(), "Blocked: 1 of 3 VM(s) left, 1 blocked") ||
		!strings.Contains(out.String(), "team-a/db-01 cannot move (MigrationPolicyNever)") {
		t.Fatalf("following a blocked drain: %v; printed %q", err, out.String())
	}
	if out, err := run("uncordon", "kvm-a"); err != nil || out != "provider.banlieue.io/kvm-a uncordoned\n" {
		t.Fatalf("uncordon: %q, %v", out, err)
	}
	if got := get(); got.Spec.Unschedulable || got.Spec.Drain != nil {
		t.Fatalf("after uncordon of a drain: spec %+v", got.Spec)
	}

	// migrate creates a VirtualMachineMigration of the VM, to the Provider --to names.
	for _, tc := range []struct {
		args          []string
		wantNamespace string
		wantName      string
	}{
		{[]string{"migrate", "web-01"}, "", ""},
		{[]string{"migrate", "web-01", "--to", "kvm-b"}, "", "kvm-b"},
		{[]string{"migrate", "web-01", "--to", "fleet/kvm-c"}, "fleet", "kvm-c"},
	} {
		out, err := run(tc.args...)
		name, ok := strings.CutPrefix(strings.TrimSpace(out), "virtualmachinemigration.banlieue.io/")
		if err != nil || !ok || !strings.HasSuffix(out, " created\n") {
			t.Fatalf("%v: %q, %v", tc.args, out, err)
		}
		var m banlieuev1.VirtualMachineMigration
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: strings.TrimSuffix(name, " created")}, &m); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		target := ptr.Deref(m.Spec.TargetProvider, banlieuev1.MigrationProviderReference{})
		if m.Spec.VMName != "web-01" || !strings.HasPrefix(m.Name, "web-01-") || target.Namespace != tc.wantNamespace || target.Name != tc.wantName {
			t.Errorf("%v: created %s with spec %+v", tc.args, m.Name, m.Spec)
		}
	}
	if _, err := run("migrate", "web-01", "--to", "a/b/c"); err == nil || !strings.Contains(err.Error(), `--to "a/b/c"`) {
		t.Errorf("migrate --to a/b/c: %v, want refused naming --to", err)
	}

	if _, err := run("cordon", "absent"); err == nil || !strings.Contains(err.Error(), "cordon cordon/absent") ||
		!strings.Contains(err.Error(), "not found") {
		t.Fatalf("cordon of a missing Provider: %v", err)
	}
}
