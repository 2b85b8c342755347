package console

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
)

// TestKeyPublisherAgainstAPIServer: two replicas publish their keys side by side, an expired
// entry of a replica gone without a stop is pruned, and a replica stopped removes its own entry
// and nothing else.
func TestKeyPublisherAgainstAPIServer(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := "console-keys"
	key := types.NamespacedName{Namespace: ns, Name: "kvm-a"}
	env.Create(ctx, t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&banlieuev1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name}, Spec: banlieuev1.ProviderSpec{
			ProviderClassRef: banlieuev1.LocalObjectReference{Name: "libvirt"},
			Connection: banlieuev1.ProviderConnection{Endpoint: "qemu+tls://kvm-a.example/system",
				CredentialsRef: banlieuev1.LocalObjectReference{Name: "creds"}},
		}})

	// A replica that crashed two hours ago left its entry.
	var p banlieuev1.Provider
	if err := env.Client.Get(ctx, key, &p); err != nil {
		t.Fatal(err)
	}
	orig := p.DeepCopy()
	p.Status.ConsoleKeys = []banlieuev1.ConsoleKey{{Pod: "crashed", SHA256: strings.Repeat("0", 64), RenewedAt: metav1.NewTime(time.Now().Add(-2 * time.Hour))}}
	if err := env.Client.Status().Patch(ctx, &p, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}

	start := func(pod, hash string) context.CancelFunc {
		pctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = (&KeyPublisher{Client: env.Client, Provider: key, Pod: pod, SHA256: hash}).Start(pctx)
		}()
		return func() { stop(); <-done }
	}
	waitKeys := func(what string, want ...string) {
		t.Helper()
		testenv.Eventually(t, time.Minute, "status.consoleKeys "+what, func() error {
			var p banlieuev1.Provider
			if err := env.Client.Get(ctx, key, &p); err != nil {
				return err
			}
			var got []string
			for _, k := range p.Status.ConsoleKeys {
				got = append(got, k.Pod+"="+k.SHA256[:4])
			}
			slices.Sort(got)
			return testenv.Unmet(slices.Equal(got, want), fmt.Sprintf("keys %v, want %v", got, want))
		})
	}
	hashA, hashB := strings.Repeat("a", 64), strings.Repeat("b", 64)
	stopA := start("provider-0", hashA)
	waitKeys("with the first replica's key, the crashed replica's pruned", "provider-0=aaaa")
	stopB := start("provider-1", hashB)
	defer stopB()
	waitKeys("with both replicas' keys", "provider-0=aaaa", "provider-1=bbbb")
	stopA()
	waitKeys("without the stopped replica's key", "provider-1=bbbb")
}
