package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
)

// kubectl banlieue cordon and uncordon, against the real API server: they set and remove the
// Provider's spec.unschedulable and touch nothing else; a missing Provider is an error naming
// it.
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
	if _, err := run("cordon", "absent"); err == nil || !strings.Contains(err.Error(), "cordon cordon/absent") ||
		!strings.Contains(err.Error(), "not found") {
		t.Fatalf("cordon of a missing Provider: %v", err)
	}
}
