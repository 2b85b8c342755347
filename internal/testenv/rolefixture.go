package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// roleFixture gives every role something to reconcile: the controller the example
// VirtualMachine, the operator a Provider and its class, the imagebuilder the example's VMImage,
// the provider its Provider x, whose Secret is missing, so it writes CredentialsUnavailable (and
// publishes 0 failure domains) without dialling anything.
const roleFixture = `
apiVersion: v1
kind: Namespace
metadata: {name: banlieue-system}
---
apiVersion: v1
kind: Namespace
metadata: {name: banlieue-imagebuild}
---
apiVersion: banlieue.io/v1alpha1
kind: Provider
metadata: {name: x, namespace: banlieue-system}
spec:
  providerClassRef: {name: libvirt}
  connection:
    endpoint: qemu+tls://127.0.0.1:1/system
    credentialsRef: {name: x-credentials-that-do-not-exist}
    caBundle: {configMapRef: {name: x-ca}}
`

// ApplyRoleFixture applies, as the administrator, roleFixture with examples/09 (the libvirt
// ProviderClass) and examples/17 (a VirtualMachine and its class and image): what the suites
// that run every role as a process give them to work on.
func (e *Env) ApplyRoleFixture(t testing.TB) {
	t.Helper()
	manifest := filepath.Join(t.TempDir(), "objects.yaml")
	if err := os.WriteFile(manifest, []byte(roleFixture), 0o600); err != nil {
		t.Fatal(err)
	}
	root := RepoRoot()
	for _, f := range []string{manifest, filepath.Join(root, "examples", "09-providerclass-libvirt.yaml"),
		filepath.Join(root, "examples", "17-virtualmachine-libvirt.yaml")} {
		if out, err := e.Kubectl(t, "apply", "--server-side", "-f", f); err != nil {
			t.Fatalf("kubectl apply %s: %v\n%s", f, err, out)
		}
	}
}
