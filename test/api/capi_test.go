package api

import (
	"context"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"banlieue.io/banlieue/internal/testenv"
)

// The Cluster API kinds (docs/adr/0136-cluster-api-machines.md): what the v1beta2 contract and
// banlieue's own rules refuse is refused at admission, naming the field.
const (
	validMachineTemplate = `
apiVersion: infrastructure.banlieue.io/v1alpha1
kind: LibvirtMachineTemplate
metadata: {name: lmt, namespace: default}
spec:
  template:
    metadata: {labels: {tier: worker}}
    spec:
      providerRef: {name: p}
      pool: default
      bootSource: {kind: backingVolume, volume: img.raw}
      vcpus: 1
      memoryMiB: 512
      firmware: efi
      disks: [{name: os, sizeGiB: 10}]
      network: [{name: nic0, source: {kind: network, name: default}, ipam: {}}]
`
	validCluster = `
apiVersion: infrastructure.banlieue.io/v1alpha1
kind: LibvirtCluster
metadata: {name: lc, namespace: default}
spec:
  controlPlaneEndpoint: {host: 192.0.2.100, port: 6443}
  providers: [{name: kvm-1}, {name: kvm-2, namespace: banlieue-system, controlPlane: false}]
`
	// A LibvirtMachine as Cluster API makes it from a template: no domainName.
	machineFromTemplate = `
apiVersion: infrastructure.banlieue.io/v1alpha1
kind: LibvirtMachine
metadata: {name: md-0-abcde, namespace: default}
spec:
  providerRef: {name: p}
  pool: default
  bootSource: {kind: backingVolume, volume: img.raw}
  vcpus: 1
  memoryMiB: 512
  firmware: efi
  disks: [{name: os, sizeGiB: 10}]
`
)

func TestClusterAPIKinds(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("contract label on every infrastructure CRD", func(t *testing.T) {
		for _, crd := range []string{"libvirtmachines", "libvirtmachinetemplates", "libvirtclusters"} {
			out, err := env.Kubectl(t, "get", "crd", crd+".infrastructure.banlieue.io",
				"-o", "jsonpath={.metadata.labels.cluster\\.x-k8s\\.io/v1beta2}")
			if err != nil || out != "v1alpha1" {
				t.Errorf("%s CRD must carry cluster.x-k8s.io/v1beta2=v1alpha1, got %q (%v)", crd, out, err)
			}
		}
	})

	t.Run("valid objects are accepted", func(t *testing.T) {
		for _, doc := range []string{validMachineTemplate, validCluster, machineFromTemplate} {
			obj := parse(doc)
			if err := env.Client.Create(ctx, obj); err != nil {
				t.Errorf("valid %s rejected: %v", obj.GetKind(), err)
			}
		}
		// controlPlane defaults to true.
		cl := parse(validCluster)
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cl), cl); err != nil {
			t.Fatal(err)
		}
		providers, _ := cl.Object["spec"].(map[string]any)["providers"].([]any)
		if cp := providers[0].(map[string]any)["controlPlane"]; cp != true {
			t.Errorf("providers[0].controlPlane default: got %v, want true", cp)
		}
	})

	invalid := []invalidCase{
		{"template names a domain", validMachineTemplate, setTo("spec.template.spec.domainName", "default-x"),
			[]string{"spec.template.spec", "domainName must be unset"}},
		{"template sets providerID", validMachineTemplate, setTo("spec.template.spec.providerID", "libvirt://p/x"),
			[]string{"spec.template.spec", "providerID must be unset"}},
		{"template names a user-data secret", validMachineTemplate, setTo("spec.template.spec.userDataSecretRef", map[string]any{"name": "x"}),
			[]string{"spec.template.spec", "userDataSecretRef and userDataHash must be unset"}},
		{"template asks for a migration", validMachineTemplate, setTo("spec.template.spec.migration",
			map[string]any{"migrationName": "m", "targetProvider": map[string]any{"name": "p"}}),
			[]string{"spec.template.spec", "migration must be unset"}},
		{"template asks for a snapshot", validMachineTemplate, setTo("spec.template.spec.snapshots",
			[]any{map[string]any{"name": "s", "uid": "u"}}),
			[]string{"spec.template.spec", "snapshots and restore must be unset"}},
		{"template without spec", validMachineTemplate, setTo("spec.template.spec", nil),
			[]string{"spec.template.spec", "Required value"}},
		{"cluster without providers", validCluster, setTo("spec.providers", []any{}),
			[]string{"spec.providers", "at least 1"}},
		{"cluster names a provider twice", validCluster, setTo("spec.providers[1].name", "kvm-1"),
			[]string{"spec.providers[1]", "Duplicate value"}},
		{"cluster endpoint without port", validCluster, setTo("spec.controlPlaneEndpoint.port", nil),
			[]string{"spec.controlPlaneEndpoint.port", "Required value"}},
		{"cluster endpoint port out of range", validCluster, setTo("spec.controlPlaneEndpoint.port", int64(70000)),
			[]string{"spec.controlPlaneEndpoint.port", "65535"}},
		{"cluster endpoint empty host", validCluster, setTo("spec.controlPlaneEndpoint.host", ""),
			[]string{"spec.controlPlaneEndpoint.host", "at least 1"}},
	}
	expectRefusedCreates(ctx, t, env, "", invalid)

	transitions := []invalidCase{
		{"template spec changes", validMachineTemplate, setTo("spec.template.spec.vcpus", int64(2)),
			[]string{"spec", "LibvirtMachineTemplate's spec is immutable"}},
		{"cluster endpoint moves", validCluster, setTo("spec.controlPlaneEndpoint.port", int64(443)),
			[]string{"spec", "controlPlaneEndpoint is immutable once set"}},
		{"cluster endpoint removed", validCluster, setTo("spec.controlPlaneEndpoint", nil),
			[]string{"spec", "controlPlaneEndpoint is immutable once set"}},
	}
	expectRefusedUpdates(ctx, t, env, "", transitions)

	t.Run("an endpoint set later is admitted, and providers may change", func(t *testing.T) {
		obj := parse(validCluster)
		obj.SetName("later-endpoint")
		set(obj, "spec.controlPlaneEndpoint", nil)
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		set(obj, "spec.controlPlaneEndpoint", map[string]any{"host": "cp.example", "port": int64(6443)})
		set(obj, "spec.providers[1].controlPlane", true)
		if err := env.Client.Update(ctx, obj); err != nil {
			t.Errorf("setting the endpoint once and changing providers must be admitted: %v", err)
		}
	})
}
