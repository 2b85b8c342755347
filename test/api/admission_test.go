package api

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"banlieue.io/banlieue/internal/testenv"
)

func TestAdmission(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	for _, ns := range []string{"banlieue-system"} {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatalf("creating namespace %s: %v", ns, err)
		}
	}

	t.Run("examples apply server-side", func(t *testing.T) { testExamplesApply(t, env) })
	t.Run("valid objects are accepted", func(t *testing.T) { testValidObjects(ctx, t, env) })
	t.Run("invalid objects are rejected naming the field", func(t *testing.T) { testInvalidObjects(ctx, t, env) })
	t.Run("updates that break a transition rule are rejected", func(t *testing.T) { testTransitionRules(ctx, t, env) })
	t.Run("providerRef moves only in a live migration's handover", func(t *testing.T) { testProviderHandover(ctx, t, env.Client) })
	t.Run("endpoint scheme is checked at reconcile time, not admission", func(t *testing.T) {
		p := parse(validProvider)
		p.SetName("ssh-endpoint")
		set(p, "spec.connection.endpoint", "qemu+ssh://kvm-1.example/system")
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatalf("a qemu+ssh endpoint must be admitted (the provider reports it), got %v", err)
		}
	})
}

func testExamplesApply(t *testing.T, env *testenv.Env) {
	examples := filepath.Join(testenv.RepoRoot(), "examples")
	files, err := filepath.Glob(filepath.Join(examples, "*.yaml"))
	if err != nil || len(files) < 4 {
		t.Fatalf("expected at least 4 examples in %s, found %v (%v)", examples, files, err)
	}
	out, err := env.Kubectl(t, "apply", "--server-side", "-f", examples)
	if err != nil {
		t.Fatalf("kubectl apply --server-side -f examples/: %v\n%s", err, out)
	}
	for _, want := range []string{
		"provider.banlieue.io/libvirt-edge-host-7 serverside-applied",
		"providerclass.banlieue.io/libvirt serverside-applied",
		"virtualmachine.banlieue.io/web-01 serverside-applied",
		"virtualmachinepool.banlieue.io/web-pool serverside-applied",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("apply output lacks %q:\n%s", want, out)
		}
	}

	out, err = env.Kubectl(t, "get", "banlieue", "-A")
	if err != nil {
		t.Fatalf("kubectl get banlieue -A: %v\n%s", err, out)
	}
	for _, want := range []string{"libvirt-edge-host-7", "web-01", "web-pool", "ubuntu-2404", "small"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get banlieue -A lacks %q:\n%s", want, out)
		}
	}

	// The API server publishes a new CRD's OpenAPI schema asynchronously.
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err = env.Kubectl(t, "explain", "virtualmachine.spec.userData")
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	if err != nil {
		t.Fatalf("kubectl explain: %v\n%s", err, out)
	}
	for _, want := range []string{"secretRef", "configMapRef", "${VM_NAME}"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl explain virtualmachine.spec.userData lacks %q:\n%s", want, out)
		}
	}

	out, err = env.Kubectl(t, "get", "crd", "libvirtmachines.infrastructure.banlieue.io",
		"-o", "jsonpath={.metadata.labels.cluster\\.x-k8s\\.io/v1beta2}")
	if err != nil || out != "v1alpha1" {
		t.Errorf("LibvirtMachine CRD must carry the CAPI contract label cluster.x-k8s.io/v1beta2=v1alpha1, got %q (%v)", out, err)
	}
}

func testValidObjects(ctx context.Context, t *testing.T, env *testenv.Env) {
	for _, doc := range []string{validProvider, validProviderClass, validVMImage, validVMClass,
		validVirtualMachine, validLibvirtMachine, validPool, validClaim, validMigration, validSnapshot, validRestore} {
		obj := parse(doc)
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Errorf("valid %s rejected: %v", obj.GetKind(), err)
		}
	}
	// Defaults are applied at admission.
	vm := parse(validVirtualMachine)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := unstructured.NestedString(vm.Object, "spec", "desiredPowerState"); got != "PoweredOn" {
		t.Errorf("desiredPowerState default: got %q, want PoweredOn", got)
	}
	if got, _, _ := unstructured.NestedString(vm.Object, "spec", "powerOffMode"); got != "TrySoft" {
		t.Errorf("powerOffMode default: got %q, want TrySoft", got)
	}
	if got, _, _ := unstructured.NestedString(vm.Object, "spec", "powerOffTimeout"); got != "2m" {
		t.Errorf("powerOffTimeout default: got %q, want 2m", got)
	}
	// installMode in the user guide's casing is the same mode (docs/decisions.md, "installMode casing").
	for i, mode := range []string{"Immediate", "Deferred", "Manual", "immediate", "deferred", "manual"} {
		img := parse(validVMImage)
		img.SetName(fmt.Sprintf("install-mode-%d", i))
		set(img, "spec.template", map[string]any{"installMode": mode})
		if err := env.Client.Create(ctx, img); err != nil {
			t.Errorf("VMImage with installMode %s rejected: %v", mode, err)
		}
	}
	pool := parse(validPool)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pool), pool); err != nil {
		t.Fatal(err)
	}
	mig := parse(validMigration)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(mig), mig); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := unstructured.NestedInt64(mig.Object, "spec", "timeoutSeconds"); got != 600 {
		t.Errorf("timeoutSeconds default: got %d, want 600", got)
	}
	restore := parse(validRestore)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(restore), restore); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := unstructured.NestedString(restore.Object, "spec", "runStrategy"); got != "AsVM" {
		t.Errorf("runStrategy default: got %q, want AsVM", got)
	}
	if got, _, _ := unstructured.NestedInt64(pool.Object, "spec", "maxSurge"); got != 2 {
		t.Errorf("maxSurge default: got %d, want 2", got)
	}
	if got, _, _ := unstructured.NestedBool(pool.Object, "spec", "recycleOnImageChange"); !got {
		t.Errorf("recycleOnImageChange default: got false, want true")
	}
}

// invalidCase breaks one rule of a valid object. want are substrings of the API server's error:
// the field path and, for CEL rules, our message.
type invalidCase struct {
	name   string
	base   string
	mutate func(*unstructured.Unstructured)
	want   []string
}

func setTo(path string, value any) func(*unstructured.Unstructured) {
	return func(o *unstructured.Unstructured) { set(o, path, value) }
}

func invalidCases() []invalidCase {
	disks := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = map[string]any{"name": "d" + string(rune('a'+i%26)) + string(rune('a'+i/26)), "sizeGiB": int64(1)}
		}
		return out
	}
	nics := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = map[string]any{"name": "n" + string(rune('a'+i)), "source": map[string]any{"name": "default"}}
		}
		return out
	}
	return []invalidCase{
		// Provider
		{"provider without endpoint", validProvider, setTo("spec.connection.endpoint", ""), []string{"spec.connection.endpoint"}},
		{"provider without credentialsRef", validProvider, setTo("spec.connection.credentialsRef", nil), []string{"spec.connection.credentialsRef: Required value"}},
		{"provider without class", validProvider, setTo("spec.providerClassRef", nil), []string{"spec.providerClassRef: Required value"}},
		{"caBundle with two sources", validProvider, setTo("spec.connection.caBundle.inline", "-----BEGIN CERTIFICATE-----"),
			[]string{"spec.connection.caBundle", "caBundle: set exactly one of inline, configMapRef and secretRef"}},
		{"caBundle with no source", validProvider, setTo("spec.connection.caBundle", map[string]any{}),
			[]string{"spec.connection.caBundle", "caBundle: set exactly one of inline, configMapRef and secretRef"}},
		{"duplicate storage class", validProvider, setTo("spec.capabilities.storageClasses",
			[]any{map[string]any{"name": "a"}, map[string]any{"name": "a"}}), []string{"spec.capabilities.storageClasses[1]: Duplicate value"}},
		{"cpu allocation below 10 %", validProvider, setTo("spec.overcommit", map[string]any{"cpuAllocationPercent": int64(5)}),
			[]string{"spec.overcommit.cpuAllocationPercent"}},
		{"memory allocation above 400 %", validProvider, setTo("spec.overcommit", map[string]any{"memoryAllocationPercent": int64(500)}),
			[]string{"spec.overcommit.memoryAllocationPercent"}},
		{"negative reserved memory", validProvider, setTo("spec.overcommit", map[string]any{"reservedMemoryMiB": int64(-1)}),
			[]string{"spec.overcommit.reservedMemoryMiB"}},
		// ProviderClass
		{"providerclass backend with uppercase", validProviderClass, setTo("spec.backend", "Libvirt"), []string{"spec.backend"}},
		{"providerclass without image tag", validProviderClass, setTo("spec.image.tag", ""), []string{"spec.image.tag"}},
		{"providerclass bad pull policy", validProviderClass, setTo("spec.image.pullPolicy", "Sometimes"), []string{"spec.image.pullPolicy: Unsupported value"}},
		{"providerclass bad digest", validProviderClass, setTo("spec.image.digest", "latest"), []string{"spec.image.digest"}},
		{"providerclass bad log format", validProviderClass, setTo("spec.logging", map[string]any{"format": "xml"}), []string{"spec.logging.format: Unsupported value"}},
		// VMImage
		{"image bad osFamily", validVMImage, setTo("spec.osFamily", "plan9"), []string{"spec.osFamily: Unsupported value"}},
		{"image bad architecture", validVMImage, setTo("spec.architecture", "riscv64"), []string{"spec.architecture: Unsupported value"}},
		{"image without sources", validVMImage, setTo("spec.sources", []any{}), []string{"spec.sources"}},
		{"image Url source without importFrom", validVMImage, setTo("spec.sources[0].importFrom", nil),
			[]string{"spec.sources[0]", "sources[].importFrom is required when kind is Url"}},
		{"image plain http without checksum", validVMImage, setTo("spec.sources[0].importFrom", "http://images.example/d.qcow2"),
			[]string{"spec.sources[0]", "sources[].checksum is required when importFrom is a plain http:// URL"}},
		{"image ftp source", validVMImage, setTo("spec.sources[0].importFrom", "ftp://images.example/d.qcow2"),
			[]string{"spec.sources[0].importFrom", "must be an https:// URL or an OCI reference"}},
		{"image bad checksum", validVMImage, setTo("spec.sources[0].checksum", "md5:abc"), []string{"spec.sources[0].checksum"}},
		{"image bad source kind", validVMImage, setTo("spec.sources[0].kind", "Floppy"), []string{"spec.sources[0].kind: Unsupported value"}},
		{"image two sources for one class", validVMImage, func(o *unstructured.Unstructured) {
			set(o, "spec.sources", []any{
				map[string]any{"providerClass": "libvirt", "kind": "BackingFile", "ref": "a"},
				map[string]any{"providerClass": "libvirt", "kind": "BackingFile", "ref": "b"},
			})
		}, []string{"spec.sources[1]: Duplicate value"}},
		{"image bad installMode", validVMImage, setTo("spec.template", map[string]any{"installMode": "later"}), []string{"spec.template.installMode: Unsupported value"}},
		{"image installMode in capitals", validVMImage, setTo("spec.template", map[string]any{"installMode": "IMMEDIATE"}), []string{"spec.template.installMode: Unsupported value"}},
		// VMClass
		{"class zero cpus", validVMClass, setTo("spec.hardware.cpus", int64(0)), []string{"spec.hardware.cpus"}},
		{"class 257 cpus", validVMClass, setTo("spec.hardware.cpus", int64(257)), []string{"spec.hardware.cpus"}},
		{"class tiny memory", validVMClass, setTo("spec.hardware.memoryMiB", int64(64)), []string{"spec.hardware.memoryMiB"}},
		{"class without disks", validVMClass, setTo("spec.hardware.disks", []any{}), []string{"spec.hardware.disks"}},
		{"class zero-size disk", validVMClass, setTo("spec.hardware.disks[0].sizeGiB", int64(0)), []string{"spec.hardware.disks[0].sizeGiB"}},
		{"class disk name with a slash", validVMClass, setTo("spec.hardware.disks[0].name", "os/../x"), []string{"spec.hardware.disks[0].name"}},
		{"class disk without storageClass", validVMClass, setTo("spec.hardware.disks[0].storageClass", nil), []string{"spec.hardware.disks[0].storageClass: Required value"}},
		{"class bad provisioning", validVMClass, setTo("spec.hardware.disks[0].provisioning", "fat"), []string{"spec.hardware.disks[0].provisioning: Unsupported value"}},
		{"class bad firmware", validVMClass, setTo("spec.firmware", "coreboot"), []string{"spec.firmware: Unsupported value"}},
		{"class interface without ipam", validVMClass, setTo("spec.network.interfaces[0].ipam", nil), []string{"spec.network.interfaces[0].ipam: Required value"}},
		{"class ipam static and pool", validVMClass, setTo("spec.network.interfaces[0].ipam", map[string]any{
			"static": map[string]any{}, "pool": map[string]any{"poolRef": map[string]any{"kind": "Pool", "name": "x"}}}),
			[]string{"spec.network.interfaces[0].ipam", "ipam: set at most one of static and pool"}},
		{"class tiny mtu", validVMClass, setTo("spec.network.interfaces[0].mtu", int64(100)), []string{"spec.network.interfaces[0].mtu"}},
		// VirtualMachine
		{"vm userData with both sources", validVirtualMachine, setTo("spec.userData.secretRef", map[string]any{"name": "s"}),
			[]string{"spec.userData", "userData: set exactly one of secretRef and configMapRef"}},
		{"vm userData with no source", validVirtualMachine, setTo("spec.userData", map[string]any{}),
			[]string{"spec.userData", "userData: set exactly one of secretRef and configMapRef"}},
		{"vm name longer than a label value", validVirtualMachine, func(o *unstructured.Unstructured) {
			o.SetName(strings.Repeat("v", 64))
		}, []string{"metadata.name must be at most 63 characters"}},
		{"vm without classRef", validVirtualMachine, setTo("spec.classRef", nil), []string{"spec.classRef: Required value"}},
		{"vm bad power state", validVirtualMachine, setTo("spec.desiredPowerState", "Off"), []string{"spec.desiredPowerState: Unsupported value"}},
		{"vm bad power-off mode", validVirtualMachine, setTo("spec.powerOffMode", "Gentle"), []string{"spec.powerOffMode: Unsupported value"}},
		{"vm power-off timeout above 30m", validVirtualMachine, setTo("spec.powerOffTimeout", "31m"),
			[]string{"spec.powerOffTimeout", "powerOffTimeout must be between 1s and 30m"}},
		{"vm power-off timeout below 1s", validVirtualMachine, setTo("spec.powerOffTimeout", "500ms"),
			[]string{"spec.powerOffTimeout", "powerOffTimeout must be between 1s and 30m"}},
		{"vm power-off timeout not a duration", validVirtualMachine, setTo("spec.powerOffTimeout", "soon"), []string{"spec.powerOffTimeout"}},
		{"vm restart time not a time", validVirtualMachine, setTo("spec.nextRestartTime", "now"), []string{"spec.nextRestartTime"}},
		{"vm bad migration policy", validVirtualMachine, setTo("spec.migrationPolicy", "sometimes"), []string{"spec.migrationPolicy: Unsupported value"}},
		{"vm static address not an IP", validVirtualMachine, setTo("spec.networkOverrides[0].static.address", "192.0.2.10/24"),
			[]string{"spec.networkOverrides[0].static.address", "address must be an IP address without a prefix length"}},
		{"vm static gateway not an IP", validVirtualMachine, setTo("spec.networkOverrides[0].static.gateway", "router"),
			[]string{"spec.networkOverrides[0].static.gateway", "gateway must be an IP address"}},
		{"vm static prefix too long", validVirtualMachine, setTo("spec.networkOverrides[0].static.prefix", int64(129)), []string{"spec.networkOverrides[0].static.prefix"}},
		{"vm cpu override out of range", validVirtualMachine, setTo("spec.hardwareOverride.cpus", int64(300)), []string{"spec.hardwareOverride.cpus"}},
		{"vm anti-affinity bad mode", validVirtualMachine, setTo("spec.placement", map[string]any{"antiAffinity": []any{
			map[string]any{"topologyKey": "name", "labelSelector": map[string]any{}, "mode": "maybe"}}}),
			[]string{"spec.placement.antiAffinity[0].mode: Unsupported value"}},
		{"vm unknown placement strategy", validVirtualMachine, setTo("spec.placement", map[string]any{"strategy": "Random"}),
			[]string{"spec.placement.strategy: Unsupported value"}},
		{"vm selector bad operator", validVirtualMachine, setTo("spec.placement", map[string]any{"providerSelector": map[string]any{
			"matchExpressions": []any{map[string]any{"key": "a", "operator": "Near"}}}}),
			[]string{"spec.placement.providerSelector.matchExpressions[0].operator: Unsupported value"}},
		// LibvirtMachine
		{"machine zero vcpus", validLibvirtMachine, setTo("spec.vcpus", int64(0)), []string{"spec.vcpus"}},
		{"machine 257 vcpus", validLibvirtMachine, setTo("spec.vcpus", int64(257)), []string{"spec.vcpus"}},
		{"machine 127 MiB", validLibvirtMachine, setTo("spec.memoryMiB", int64(127)), []string{"spec.memoryMiB"}},
		{"machine 4194305 MiB", validLibvirtMachine, setTo("spec.memoryMiB", int64(4194305)), []string{"spec.memoryMiB"}},
		{"machine without disks", validLibvirtMachine, setTo("spec.disks", []any{}), []string{"spec.disks"}},
		{"machine 33 disks", validLibvirtMachine, setTo("spec.disks", disks(33)), []string{"spec.disks"}},
		{"machine disk too big", validLibvirtMachine, setTo("spec.disks[0].sizeGiB", int64(65537)), []string{"spec.disks[0].sizeGiB"}},
		{"machine bad bus", validLibvirtMachine, setTo("spec.disks[0].bus", "ide"), []string{"spec.disks[0].bus: Unsupported value"}},
		{"machine 17 interfaces", validLibvirtMachine, setTo("spec.network", nics(17)), []string{"spec.network"}},
		{"machine bad source kind", validLibvirtMachine, setTo("spec.network[0].source.kind", "direct"), []string{"spec.network[0].source.kind: Unsupported value"}},
		{"machine bad mac", validLibvirtMachine, setTo("spec.network[0].macAddress", "52:54:00:zz:00:01"), []string{"spec.network[0].macAddress"}},
		{"machine nic model with markup", validLibvirtMachine, setTo("spec.network[0].model", "virtio'/><x"), []string{"spec.network[0].model"}},
		{"machine domain name with a space", validLibvirtMachine, setTo("spec.domainName", "a b"), []string{"spec.domainName"}},
		{"machine volume name too long", validLibvirtMachine, func(o *unstructured.Unstructured) {
			set(o, "spec.domainName", strings.Repeat("d", 180))
			set(o, "spec.disks[0].name", strings.Repeat("n", 20))
		}, []string{"spec", "longer than 200 characters"}},
		// An empty namespace would name no Provider to the admission policies, while the
		// provider reads it as the machine's own.
		{"machine empty providerRef namespace", validLibvirtMachine, setTo("spec.providerRef.namespace", ""), []string{"spec.providerRef.namespace"}},
		{"machine bad boot kind", validLibvirtMachine, setTo("spec.bootSource.kind", "pxe"), []string{"spec.bootSource.kind: Unsupported value"}},
		{"machine without pool", validLibvirtMachine, setTo("spec.pool", nil), []string{"spec.pool: Required value"}},
		{"machine bad firmware", validLibvirtMachine, setTo("spec.firmware", "uefi"), []string{"spec.firmware: Unsupported value"}},
		{"machine machineType with markup", validLibvirtMachine, setTo("spec.machineType", "q35'"), []string{"spec.machineType"}},
		{"machine ipam static and pool", validLibvirtMachine, setTo("spec.network[0].ipam", map[string]any{
			"static": map[string]any{"address": "192.0.2.1", "prefix": int64(24)},
			"pool":   map[string]any{"poolRef": map[string]any{"kind": "Pool", "name": "x"}}}),
			[]string{"spec.network[0].ipam", "ipam: set at most one of static and pool"}},
		// VirtualMachinePool
		{"pool warm above max", validPool, setTo("spec.warmReplicas", int64(4)), []string{"spec", "warmReplicas must not exceed maxReplicas"}},
		{"pool without readiness", validPool, setTo("spec.readiness", nil), []string{"spec.readiness: Required value"}},
		{"pool bad readiness", validPool, setTo("spec.readiness", "Ready"), []string{"spec.readiness: Unsupported value"}},
		{"pool negative surge", validPool, setTo("spec.maxSurge", int64(-1)), []string{"spec.maxSurge"}},
		{"pool addressing without entries", validPool, setTo("spec.addressing", map[string]any{"interface": "nic0", "pool": []any{}, "prefix": int64(24)}),
			[]string{"spec.addressing.pool"}},
		// VirtualMachineClaim
		{"claim zero ttl", validClaim, setTo("spec.ttlSeconds", int64(0)), []string{"spec.ttlSeconds"}},
		{"claim without subject", validClaim, setTo("spec.subject", nil), []string{"spec.subject: Required value"}},
		{"claim without pool", validClaim, setTo("spec.poolRef", nil), []string{"spec.poolRef: Required value"}},
		{"migration without vm", validMigration, setTo("spec.vmName", nil), []string{"spec.vmName: Required value"}},
		{"migration timeout too short", validMigration, setTo("spec.timeoutSeconds", int64(5)), []string{"spec.timeoutSeconds"}},
		{"migration timeout too long", validMigration, setTo("spec.timeoutSeconds", int64(86401)), []string{"spec.timeoutSeconds"}},
		{"snapshot without vm", validSnapshot, setTo("spec.vmName", nil), []string{"spec.vmName: Required value"}},
		{"snapshot vm name too long", validSnapshot, setTo("spec.vmName", strings.Repeat("v", 64)), []string{"spec.vmName"}},
		{"restore without snapshot", validRestore, setTo("spec.snapshotName", nil), []string{"spec.snapshotName: Required value"}},
		{"restore unknown run strategy", validRestore, setTo("spec.runStrategy", "Always"), []string{"spec.runStrategy: Unsupported value"}},
		{"machine snapshot without uid", validLibvirtMachine, setTo("spec.snapshots", []any{map[string]any{"name": "s"}}),
			[]string{"spec.snapshots[0].uid: Required value"}},
		{"vm policy unknown", validVirtualMachine, setTo("spec.migrationPolicy", "teleport"), []string{"spec.migrationPolicy"}},
	}
}

func testInvalidObjects(ctx context.Context, t *testing.T, env *testenv.Env) {
	expectRefusedCreates(ctx, t, env, "", invalidCases())
}

func testTransitionRules(ctx context.Context, t *testing.T, env *testenv.Env) {
	cases := []invalidCase{
		{"vm disk override shrinks", validVirtualMachine, setTo("spec.hardwareOverride.diskOverrides[0].sizeGiB", int64(5)),
			[]string{"spec.hardwareOverride.diskOverrides[0].sizeGiB", "hardwareOverride.diskOverrides[].sizeGiB must not shrink: shrinking a disk is refused"}},
		{"machine disk shrinks", validLibvirtMachine, setTo("spec.disks[0].sizeGiB", int64(5)),
			[]string{"spec.disks[0].sizeGiB", "disks[].sizeGiB must not shrink: shrinking a disk is refused"}},
		{"class disk shrinks", validVMClass, setTo("spec.hardware.disks[0].sizeGiB", int64(5)),
			[]string{"spec.hardware.disks[0].sizeGiB", "hardware.disks[].sizeGiB must not shrink: shrinking a disk is refused"}},
		{"claim spec changes", validClaim, setTo("spec.ttlSeconds", int64(60)), []string{"spec", "spec is immutable"}},
		// A machine's status was recorded on its Provider's host: another Provider must never
		// inherit it (its domain, volumes, accepted boot volume) as its own.
		{"machine moves to another provider", validLibvirtMachine, setTo("spec.providerRef.name", "other"),
			[]string{"spec.providerRef", "providerRef is immutable"}},
		{"migration names another vm", validMigration, setTo("spec.vmName", "other"),
			[]string{"spec.vmName", "vmName is immutable"}},
		{"migration changes target", validMigration, setTo("spec.targetProvider.name", "other"),
			[]string{"targetProvider is immutable"}},
		{"migration gains a target", validMigration, func(o *unstructured.Unstructured) {
			unstructured.RemoveNestedField(o.Object, "spec", "targetProvider")
		}, []string{"targetProvider is immutable"}},
		{"migration cancel undone", validMigration + "  cancel: true\n", func(o *unstructured.Unstructured) {
			set(o, "spec.cancel", false)
		}, []string{"cancel cannot be undone"}},
		{"snapshot names another vm", validSnapshot, setTo("spec.vmName", "other"),
			[]string{"spec.vmName", "vmName is immutable"}},
		{"restore names another snapshot", validRestore, setTo("spec.snapshotName", "other"),
			[]string{"spec.snapshotName", "snapshotName is immutable"}},
		{"machine moves to a shared provider", validLibvirtMachine, setTo("spec.providerRef.namespace", "banlieue-system"),
			[]string{"spec.providerRef", "providerRef is immutable"}},
	}
	expectRefusedUpdates(ctx, t, env, "", cases)
	// Growing is allowed, on the machine, the VM's override and the class alike.
	for _, g := range []struct{ base, field string }{
		{validLibvirtMachine, "spec.disks[0].sizeGiB"},
		{validVirtualMachine, "spec.hardwareOverride.diskOverrides[0].sizeGiB"},
		{validVMClass, "spec.hardware.disks[0].sizeGiB"},
	} {
		obj := parse(g.base)
		obj.SetName("transition-grow-" + strings.ToLower(obj.GetKind()))
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		set(obj, g.field, int64(40))
		if err := env.Client.Update(ctx, obj); err != nil {
			t.Errorf("growing %s %s must be admitted: %v", obj.GetKind(), g.field, err)
		}
	}
}
