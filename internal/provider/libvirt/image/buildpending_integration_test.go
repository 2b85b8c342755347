package image

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
)

// zonesJSONPath is the guide's command for a VMImage's zones (docs/guides/libvirt-provider.md,
// "Troubleshooting"), run here with the real kubectl.
const zonesJSONPath = `{range .status.perProvider[*].zones[*]}{.name}={.ready} {.reason}: {.message}{"\n"}{end}`

// TestBuildPendingZonesThroughTheGuidesJSONPath: while the build is pending, the guide's zones
// jsonpath prints one BuildPending line per pool the Provider verified, as the troubleshooting
// row "Zone stuck at BuildPending" says; a row without zones would print nothing.
func TestBuildPendingZonesThroughTheGuidesJSONPath(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	env.Create(ctx, t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: providerNamespace}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: buildNamespace}})
	p := &banlieuev1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: providerNamespace, Name: "edge"}, Spec: banlieuev1.ProviderSpec{
		ProviderClassRef: banlieuev1.LocalObjectReference{Name: "libvirt"},
		Connection: banlieuev1.ProviderConnection{Endpoint: "qemu+tls://127.0.0.1:1/system",
			CredentialsRef: banlieuev1.LocalObjectReference{Name: "creds"}},
		Capabilities: banlieuev1.ProviderCapabilities{StorageClasses: []banlieuev1.StorageClassMapping{
			{Name: "gold", Target: map[string]string{"pool": "nvme"}},
			{Name: "standard", Target: map[string]string{"pool": "default"}},
		}},
	}}
	env.Create(ctx, t, p)
	// What the Provider controller publishes once it verified both pools on the host; it does
	// not run here, so nothing overwrites it.
	p.Status.FailureDomains = []banlieuev1.FailureDomain{{Name: "edge",
		Attributes: banlieuev1.FailureDomainAttributes{AvailableStorageClasses: []string{"gold", "standard"}}}}
	if err := env.Client.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}

	testenv.SetLogger(t)
	mgr := env.NewManager(t)
	if err := (&Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), BuildNamespace: buildNamespace,
		ImportImage: "banlieue:test", ImportServiceAccount: importSA, WatchJobs: true}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)

	img := &banlieuev1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "debian-12"}, Spec: banlieuev1.VMImageSpec{
		OSFamily: "linux", OSDistribution: "debian", OSVersion: "12", Architecture: "amd64",
		Sources: []banlieuev1.ImageSource{{ProviderClass: "libvirt", Kind: banlieuev1.SourceURL, ImportFrom: "https://images.example/debian-12.qcow2"}}}}
	env.Create(ctx, t, img)

	want := "nvme=false BuildPending: waiting for the imagebuilder to publish the artifact\n" +
		"default=false BuildPending: waiting for the imagebuilder to publish the artifact\n"
	var out string
	testenv.Eventually(t, 20*time.Second, "the guide's zones jsonpath prints the pending zones", func() error {
		var err error
		out, err = env.Kubectl(t, "get", "vmimage", img.Name, "-o", "jsonpath="+zonesJSONPath)
		return testenv.Unmet(err == nil && out == want, out)
	})
}
