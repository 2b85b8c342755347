package api

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"banlieue.io/banlieue/internal/testenv"
)

// The vSphere machine kinds (docs/guides/vsphere-provider.md): what a VSphereMachine may hold
// is bounded and checked at admission, naming the field, as for LibvirtMachine.
const (
	validVSphereMachine = `
apiVersion: infrastructure.banlieue.io/v1alpha1
kind: VSphereMachine
metadata: {name: vsm, namespace: default}
spec:
  providerRef: {name: vc}
  failureDomain: dc1-cluster-a
  vmName: default-vsm
  template: /dc1/vm/templates/ubuntu-24.04
  cpus: 2
  memoryMiB: 2048
  firmware: efi
  disks: [{name: os, sizeGiB: 20, datastore: ds-fast}, {name: data, sizeGiB: 50, datastore: ds-bulk, provisioning: thick}]
  network: [{name: nic0, portGroup: pg-prod, ipam: {}}]
  userDataSecretRef: {name: vsm-user-data}
  userDataHash: 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
`
	validVSphereMachineTemplate = `
apiVersion: infrastructure.banlieue.io/v1alpha1
kind: VSphereMachineTemplate
metadata: {name: vsmt, namespace: default}
spec:
  template:
    metadata: {labels: {tier: worker}}
    spec:
      providerRef: {name: vc}
      template: /dc1/vm/templates/ubuntu-24.04
      cpus: 2
      memoryMiB: 2048
      disks: [{name: os, sizeGiB: 20, datastore: ds-fast}]
      network: [{name: nic0, portGroup: pg-prod, ipam: {}}]
`
)

func TestVSphereMachineKinds(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("contract label on both CRDs", func(t *testing.T) {
		for _, crd := range []string{"vspheremachines", "vspheremachinetemplates"} {
			out, err := env.Kubectl(t, "get", "crd", crd+".infrastructure.banlieue.io",
				"-o", "jsonpath={.metadata.labels.cluster\\.x-k8s\\.io/v1beta2}")
			if err != nil || out != "v1alpha1" {
				t.Errorf("%s CRD must carry cluster.x-k8s.io/v1beta2=v1alpha1, got %q (%v)", crd, out, err)
			}
		}
	})

	t.Run("valid objects are accepted and defaulted", func(t *testing.T) {
		for _, doc := range []string{validVSphereMachine, validVSphereMachineTemplate} {
			obj := parse(doc)
			if err := env.Client.Create(ctx, obj); err != nil {
				t.Fatalf("valid %s rejected: %v", obj.GetKind(), err)
			}
		}
		m := parse(validVSphereMachine)
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			t.Fatal(err)
		}
		for path, want := range map[string]string{
			"spec.desiredPowerState":      "PoweredOn",
			"spec.powerOffMode":           "TrySoft",
			"spec.powerOffTimeout":        "2m",
			"spec.disks.0.provisioning":   "thin",
			"spec.disks.1.provisioning":   "thick",
			"spec.template":               "/dc1/vm/templates/ubuntu-24.04",
			"spec.network.0.portGroup":    "pg-prod",
			"spec.providerRef.name":       "vc",
			"metadata.name":               "vsm",
			"spec.userDataSecretRef.name": "vsm-user-data",
		} {
			if got := nested(m.Object, path); got != want {
				t.Errorf("%s: got %q, want %q", path, got, want)
			}
		}
	})

	t.Run("the provider sets providerID and status", func(t *testing.T) {
		m := parse(validVSphereMachine)
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			t.Fatal(err)
		}
		set(m, "spec.providerID", "vsphere://4203a1b2-c3d4-e5f6-0718-293a4b5c6d7e")
		if err := env.Client.Update(ctx, m); err != nil {
			t.Fatalf("a providerID of a BIOS UUID must be admitted: %v", err)
		}
		set(m, "status", map[string]any{
			"vmRef": "vm-42", "biosUuid": "4203a1b2-c3d4-e5f6-0718-293a4b5c6d7e", "observedPowerState": "PoweredOn",
			"toolsRunning": true, "template": "/dc1/vm/templates/ubuntu-24.04",
			"addresses": []any{map[string]any{"type": "InternalIP", "address": "192.0.2.20"}},
		})
		if err := env.Client.Status().Update(ctx, m); err != nil {
			t.Fatalf("a status the provider writes must be admitted: %v", err)
		}
	})

	nics := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = map[string]any{"name": fmt.Sprintf("nic%d", i), "portGroup": "pg", "ipam": map[string]any{}}
		}
		return out
	}
	invalid := []invalidCase{
		{"zero cpus", validVSphereMachine, setTo("spec.cpus", int64(0)), []string{"spec.cpus"}},
		{"257 cpus", validVSphereMachine, setTo("spec.cpus", int64(257)), []string{"spec.cpus"}},
		{"127 MiB", validVSphereMachine, setTo("spec.memoryMiB", int64(127)), []string{"spec.memoryMiB"}},
		{"without template", validVSphereMachine, setTo("spec.template", nil), []string{"spec.template: Required value"}},
		{"template not an inventory path", validVSphereMachine, setTo("spec.template", "vm-1234"), []string{"spec.template"}},
		{"template too long", validVSphereMachine, setTo("spec.template", "/"+strings.Repeat("t", 1024)), []string{"spec.template"}},
		{"without disks", validVSphereMachine, setTo("spec.disks", []any{}), []string{"spec.disks"}},
		{"disk without datastore", validVSphereMachine, setTo("spec.disks[0].datastore", nil), []string{"spec.disks[0].datastore: Required value"}},
		{"disk too big", validVSphereMachine, setTo("spec.disks[0].sizeGiB", int64(65537)), []string{"spec.disks[0].sizeGiB"}},
		{"disk bad provisioning", validVSphereMachine, setTo("spec.disks[0].provisioning", "lazy"), []string{"spec.disks[0].provisioning: Unsupported value"}},
		{"11 interfaces", validVSphereMachine, setTo("spec.network", nics(11)), []string{"spec.network"}},
		{"interface without port group", validVSphereMachine, setTo("spec.network[0].portGroup", nil), []string{"spec.network[0].portGroup: Required value"}},
		{"bad mac", validVSphereMachine, setTo("spec.network[0].macAddress", "00:50:56:zz:00:01"), []string{"spec.network[0].macAddress"}},
		{"vm name over 80 characters", validVSphereMachine, setTo("spec.vmName", strings.Repeat("v", 81)), []string{"spec.vmName"}},
		{"vm name with a slash", validVSphereMachine, setTo("spec.vmName", "a/b"), []string{"spec.vmName"}},
		{"providerID of another scheme", validVSphereMachine, setTo("spec.providerID", "libvirt://p/4203a1b2-c3d4-e5f6-0718-293a4b5c6d7e"), []string{"spec.providerID"}},
		{"providerID in capitals", validVSphereMachine, setTo("spec.providerID", "vsphere://4203A1B2-C3D4-E5F6-0718-293A4B5C6D7E"), []string{"spec.providerID"}},
		{"empty providerRef namespace", validVSphereMachine, setTo("spec.providerRef.namespace", ""), []string{"spec.providerRef.namespace"}},
		{"bad firmware", validVSphereMachine, setTo("spec.firmware", "uefi"), []string{"spec.firmware: Unsupported value"}},
		{"bad power state", validVSphereMachine, setTo("spec.desiredPowerState", "Off"), []string{"spec.desiredPowerState: Unsupported value"}},
		{"power-off timeout above 30m", validVSphereMachine, setTo("spec.powerOffTimeout", "31m"),
			[]string{"spec.powerOffTimeout", "powerOffTimeout must be between 1s and 30m"}},
		{"user-data hash not hex", validVSphereMachine, setTo("spec.userDataHash", strings.Repeat("z", 64)), []string{"spec.userDataHash"}},
		{"template names a vm", validVSphereMachineTemplate, setTo("spec.template.spec.vmName", "default-x"),
			[]string{"spec.template.spec", "vmName must be unset"}},
		{"template sets providerID", validVSphereMachineTemplate, setTo("spec.template.spec.providerID", "vsphere://4203a1b2-c3d4-e5f6-0718-293a4b5c6d7e"),
			[]string{"spec.template.spec", "providerID must be unset"}},
		{"template names a user-data secret", validVSphereMachineTemplate, setTo("spec.template.spec.userDataSecretRef", map[string]any{"name": "x"}),
			[]string{"spec.template.spec", "userDataSecretRef and userDataHash must be unset"}},
		{"template without providerRef", validVSphereMachineTemplate, setTo("spec.template.spec.providerRef", nil),
			[]string{"spec.template.spec", "spec.template.spec.providerRef is required"}},
	}
	expectRefusedCreates(ctx, t, env, "refused: ", invalid)

	transitions := []invalidCase{
		{"disk shrinks", validVSphereMachine, setTo("spec.disks[0].sizeGiB", int64(10)),
			[]string{"spec.disks[0].sizeGiB", "disks[].sizeGiB must not shrink"}},
		{"disk moves datastore", validVSphereMachine, setTo("spec.disks[0].datastore", "ds-other"),
			[]string{"spec.disks[0].datastore", "disks[].datastore is immutable"}},
		{"machine moves to another provider", validVSphereMachine, setTo("spec.providerRef.name", "other"),
			[]string{"spec.providerRef", "providerRef is immutable"}},
		{"providerRef removed", validVSphereMachine, setTo("spec.providerRef", nil),
			[]string{"spec", "spec.providerRef cannot be removed once set"}},
		{"vm renamed", validVSphereMachine, setTo("spec.vmName", "default-other"),
			[]string{"spec", "spec.vmName is immutable"}},
		{"vm name removed", validVSphereMachine, setTo("spec.vmName", nil),
			[]string{"spec", "spec.vmName is immutable"}},
		{"template spec changes", validVSphereMachineTemplate, setTo("spec.template.spec.cpus", int64(4)),
			[]string{"spec", "VSphereMachineTemplate's spec is immutable"}},
	}
	expectRefusedUpdates(ctx, t, env, "refused update: ", transitions)

	t.Run("growing a disk, resizing and a late vmName are admitted", func(t *testing.T) {
		obj := parse(validVSphereMachine)
		obj.SetName("transition-grow")
		set(obj, "spec.vmName", nil)
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		set(obj, "spec.disks[0].sizeGiB", int64(40))
		set(obj, "spec.cpus", int64(4))
		set(obj, "spec.vmName", "default-transition-grow")
		if err := env.Client.Update(ctx, obj); err != nil {
			t.Errorf("growing a disk, changing cpus and naming the VM once must be admitted: %v", err)
		}
	})
}

// nested reads a dotted path whose numeric segments index lists, as a string ("" when absent).
func nested(obj map[string]any, path string) string {
	var cur any = obj
	for _, seg := range strings.Split(path, ".") {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[seg]
		case []any:
			var i int
			if _, err := fmt.Sscan(seg, &i); err != nil || i >= len(c) {
				return ""
			}
			cur = c[i]
		default:
			return ""
		}
	}
	s, _, _ := unstructured.NestedString(map[string]any{"v": cur}, "v")
	return s
}
