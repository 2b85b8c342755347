package api

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Valid objects of each kind; every invalid row starts from one of these and breaks one rule.
const (
	validProvider = `
apiVersion: banlieue.io/v1alpha1
kind: Provider
metadata: {name: p, namespace: default}
spec:
  providerClassRef: {name: libvirt}
  connection:
    endpoint: qemu+tls://kvm-1.example/system
    credentialsRef: {name: creds}
    caBundle: {configMapRef: {name: ca}}
  capabilities:
    storageClasses: [{name: standard, target: {pool: default}}]
    networkClasses: [{name: prod, target: {network: default}}]
    features: [vtpm]
`
	validProviderClass = `
apiVersion: banlieue.io/v1alpha1
kind: ProviderClass
metadata: {name: pc}
spec:
  backend: libvirt
  image: {repository: registry.example/banlieue, tag: v1}
`
	validVMImage = `
apiVersion: banlieue.io/v1alpha1
kind: VMImage
metadata: {name: img}
spec:
  osFamily: linux
  osDistribution: debian
  osVersion: "12"
  architecture: amd64
  sources:
    - {providerClass: libvirt, kind: Url, ref: img, importFrom: "https://images.example/debian.qcow2"}
`
	validVMClass = `
apiVersion: banlieue.io/v1alpha1
kind: VMClass
metadata: {name: cls}
spec:
  hardware:
    cpus: 2
    memoryMiB: 1024
    disks: [{name: os, sizeGiB: 10, storageClass: standard}]
  network:
    interfaces: [{name: nic0, networkClass: prod, ipam: {}}]
`
	validVirtualMachine = `
apiVersion: banlieue.io/v1alpha1
kind: VirtualMachine
metadata: {name: vm, namespace: default}
spec:
  classRef: {name: cls}
  imageRef: {name: img}
  userData: {configMapRef: {name: ud}}
  networkOverrides: [{name: nic0, static: {address: 192.0.2.10, prefix: 24, gateway: 192.0.2.1}}]
  hardwareOverride: {diskOverrides: [{name: os, sizeGiB: 20}]}
`
	validLibvirtMachine = `
apiVersion: infrastructure.banlieue.io/v1alpha1
kind: LibvirtMachine
metadata: {name: lm, namespace: default}
spec:
  providerRef: {name: p}
  pool: default
  domainName: default-lm
  bootSource: {kind: backingVolume, volume: img.raw}
  vcpus: 1
  memoryMiB: 512
  firmware: efi
  disks: [{name: os, sizeGiB: 10}]
  network: [{name: nic0, source: {kind: network, name: default}, ipam: {}}]
`
	validPool = `
apiVersion: banlieue.io/v1alpha1
kind: VirtualMachinePool
metadata: {name: pool, namespace: default}
spec:
  warmReplicas: 1
  maxReplicas: 3
  readiness: InfrastructureReady
  template: {spec: {classRef: {name: cls}, imageRef: {name: img}}}
`
	validMigration = `
apiVersion: banlieue.io/v1alpha1
kind: VirtualMachineMigration
metadata: {name: mig, namespace: default}
spec:
  vmName: vm
  targetProvider: {name: p}
`
	validSnapshot = `
apiVersion: banlieue.io/v1alpha1
kind: VirtualMachineSnapshot
metadata: {name: snap, namespace: default}
spec:
  vmName: vm
`
	validRestore = `
apiVersion: banlieue.io/v1alpha1
kind: VirtualMachineRestore
metadata: {name: restore, namespace: default}
spec:
  snapshotName: snap
`
	validClaim = `
apiVersion: banlieue.io/v1alpha1
kind: VirtualMachineClaim
metadata: {name: claim, namespace: default}
spec:
  poolRef: {name: pool}
  subject: {issuer: https://issuer.example, id: alice}
  ttlSeconds: 3600
`
)

func parse(doc string) *unstructured.Unstructured {
	var m map[string]any
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		panic(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// set writes value at a dotted path whose segments may index lists ("spec.disks[0].sizeGiB").
// A nil value deletes the field.
func set(obj *unstructured.Unstructured, path string, value any) {
	var cur any = obj.Object
	segments := strings.Split(path, ".")
	for i, seg := range segments {
		name, index := seg, -1
		if open := strings.IndexByte(seg, '['); open >= 0 {
			name = seg[:open]
			n, err := strconv.Atoi(strings.TrimSuffix(seg[open+1:], "]"))
			if err != nil {
				panic(fmt.Sprintf("bad path %q", path))
			}
			index = n
		}
		m := cur.(map[string]any)
		last := i == len(segments)-1
		if index < 0 {
			if last {
				if value == nil {
					delete(m, name)
				} else {
					m[name] = value
				}
				return
			}
			if _, ok := m[name]; !ok {
				m[name] = map[string]any{}
			}
			cur = m[name]
			continue
		}
		list := m[name].([]any)
		if last {
			list[index] = value
			return
		}
		cur = list[index]
	}
}
