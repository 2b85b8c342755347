package operator

import (
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// guideProvider is the guide's step-3 Provider (examples/02-provider-libvirt-edge.yaml).
func guideProvider() *banlieuev1.Provider {
	return &banlieuev1.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: "libvirt-edge-host-7", Namespace: "banlieue-system", UID: "uid-7", Generation: 3},
		Spec: banlieuev1.ProviderSpec{
			ProviderClassRef: banlieuev1.LocalObjectReference{Name: "libvirt"},
			Connection: banlieuev1.ProviderConnection{
				Endpoint:       "qemu+tls://kvm-7.edge.example/system",
				CredentialsRef: banlieuev1.LocalObjectReference{Name: "libvirt-edge-creds"},
				CABundle:       &banlieuev1.CABundleSource{ConfigMapRef: &banlieuev1.KeySelector{Name: "libvirt-edge-ca"}},
			},
		},
	}
}

// libvirtClass is examples/09-providerclass-libvirt.yaml.
func libvirtClass() *banlieuev1.ProviderClass {
	return &banlieuev1.ProviderClass{
		ObjectMeta: metav1.ObjectMeta{Name: "libvirt", Generation: 2},
		Spec: banlieuev1.ProviderClassSpec{
			Backend:     "libvirt",
			Image:       banlieuev1.ProviderImage{Repository: "registry.example/banlieue", Tag: "v0.1.0", PullPolicy: "IfNotPresent"},
			Replicas:    1,
			Logging:     &banlieuev1.ProviderLogging{Level: "info", Format: "json"},
			Concurrency: &banlieuev1.ProviderConcurrency{Workers: 16, HostDomainOperations: 8, HostVolumeUploads: 4},
			AdditionalRules: []banlieuev1.PolicyRule{
				{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
			},
		},
	}
}

// decode turns an apply configuration into the typed object the API server would receive.
func decode[T any](t *testing.T, ac any) T {
	t.Helper()
	var out T
	data, err := json.Marshal(ac)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
