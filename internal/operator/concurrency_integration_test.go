package operator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
)

// concurrencyFlags are the provider flags a ProviderClass's concurrency sets (ADR-0132).
var concurrencyFlags = []string{"--workers", "--host-domain-operations", "--host-volume-uploads"}

// TestConcurrencyReachesProviderPods: the API server refuses a concurrency value outside the
// binary's bounds, naming the field, and vCenter limits on a class of another backend; a class's concurrency reaches its provider Deployments'
// args, an edit rolls them, and a class that sets none passes no flag, so the binary's
// defaults apply.
func TestConcurrencyReachesProviderPods(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := env.Client
	for _, ns := range []string{DefaultNamespace, DefaultBuildNamespace} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("out-of-range values are refused, naming the field", func(t *testing.T) {
		for _, tt := range []struct {
			backend string
			c       banlieuev1.ProviderConcurrency
			field   string
		}{
			{"libvirt", banlieuev1.ProviderConcurrency{Workers: 65}, "spec.concurrency.workers"},
			{"libvirt", banlieuev1.ProviderConcurrency{Workers: -1}, "spec.concurrency.workers"},
			{"libvirt", banlieuev1.ProviderConcurrency{HostDomainOperations: 257}, "spec.concurrency.hostDomainOperations"},
			{"libvirt", banlieuev1.ProviderConcurrency{HostVolumeUploads: -4}, "spec.concurrency.hostVolumeUploads"},
			{"vsphere", banlieuev1.ProviderConcurrency{VCenterClones: 257}, "spec.concurrency.vcenterClones"},
			{"vsphere", banlieuev1.ProviderConcurrency{VCenterPowerOperations: -2}, "spec.concurrency.vcenterPowerOperations"},
			{"libvirt", banlieuev1.ProviderConcurrency{VCenterClones: 2}, "spec.concurrency: Invalid value: vcenterClones and vcenterPowerOperations are for backend vsphere only"},
			{"libvirt", banlieuev1.ProviderConcurrency{Workers: 2, VCenterPowerOperations: 2}, "vcenterClones and vcenterPowerOperations are for backend vsphere only"},
		} {
			class := tunedClass("refused", tt.c)
			class.Spec.Backend = tt.backend
			err := c.Create(ctx, class)
			if err == nil {
				t.Errorf("%+v accepted", tt.c)
				_ = c.Delete(ctx, class)
				continue
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Errorf("%+v refused without naming %s: %v", tt.c, tt.field, err)
			}
		}
		// Zero is refused too when it is sent: only an absent field means the default.
		zero := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "banlieue.io/v1alpha1", "kind": "ProviderClass",
			"metadata": map[string]any{"name": "refused-zero"},
			"spec": map[string]any{"backend": "libvirt", "image": map[string]any{"repository": "registry.example/banlieue", "tag": "v0.1.0"},
				"concurrency": map[string]any{"workers": int64(0)}}}}
		if err := c.Create(ctx, zero); err == nil || !strings.Contains(err.Error(), "spec.concurrency.workers") {
			t.Errorf("workers: 0 not refused by name: %v", err)
		}
	})

	mgr := env.NewManager(t)
	if err := Setup(mgr, Options{}); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)

	tuned := tunedClass("tuned", banlieuev1.ProviderConcurrency{Workers: 6, HostDomainOperations: 3, HostVolumeUploads: 2})
	plain := libvirtClass()
	plain.ObjectMeta = metav1.ObjectMeta{Name: "plain"}
	plain.Spec.Concurrency = nil
	for _, obj := range []client.Object{tuned, plain,
		providerOf("host-tuned", "tuned"), providerOf("host-plain", "plain"),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "libvirt-edge-creds", Namespace: DefaultNamespace}, StringData: map[string]string{"tls.crt": "c", "tls.key": "k"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "libvirt-edge-ca", Namespace: DefaultNamespace}, Data: map[string]string{"ca.crt": "ca"}},
	} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}

	waitArgs(ctx, t, c, "tuned", "host-tuned", map[string]string{"--workers": "6", "--host-domain-operations": "3", "--host-volume-uploads": "2"})
	waitArgs(ctx, t, c, "plain", "host-plain", map[string]string{})

	var got banlieuev1.ProviderClass
	if err := c.Get(ctx, client.ObjectKey{Name: "tuned"}, &got); err != nil {
		t.Fatal(err)
	}
	got.Spec.Concurrency = &banlieuev1.ProviderConcurrency{Workers: 32}
	if err := c.Update(ctx, &got); err != nil {
		t.Fatal(err)
	}
	waitArgs(ctx, t, c, "tuned", "host-tuned", map[string]string{"--workers": "32"})
}

// tunedClass is the guide's class under name, with concurrency c.
func tunedClass(name string, c banlieuev1.ProviderConcurrency) *banlieuev1.ProviderClass {
	class := libvirtClass()
	class.ObjectMeta = metav1.ObjectMeta{Name: name}
	class.Spec.Concurrency = &c
	return class
}

// providerOf is the guide's Provider under name, of class.
func providerOf(name, class string) *banlieuev1.Provider {
	p := guideProvider()
	p.ObjectMeta = metav1.ObjectMeta{Name: name, Namespace: DefaultNamespace}
	p.Spec.ProviderClassRef.Name = class
	return p
}

// waitArgs waits until the Deployment of Provider name under class carries exactly want among
// the concurrency flags, each once.
func waitArgs(ctx context.Context, t *testing.T, c client.Client, class, name string, want map[string]string) {
	t.Helper()
	key := client.ObjectKey{Namespace: DefaultNamespace, Name: workloadName(class, DefaultNamespace, name)}
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("Deployment %s with %v", key, want), func() error {
		var d appsv1.Deployment
		if err := c.Get(ctx, key, &d); err != nil {
			return err
		}
		args := d.Spec.Template.Spec.Containers[0].Args
		got := map[string]string{}
		for i, a := range args {
			if slices.Contains(concurrencyFlags, a) && i+1 < len(args) {
				if _, twice := got[a]; twice {
					return fmt.Errorf("%s twice in %q", a, args)
				}
				got[a] = args[i+1]
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("concurrency flags %v in %q", got, args)
		}
		return nil
	})
}
