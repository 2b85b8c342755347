// Package boundaries checks the import graph the guide promises: the controller never talks to
// libvirt or vCenter, the provider never reads VirtualMachines, the vCenter client knows nothing
// of Kubernetes, and the first-party libraries under pkg/
// import nothing from the rest of the project.
package boundaries

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"banlieue.io/banlieue/internal/testenv"
)

const module = "banlieue.io/banlieue"

// deps lists the project packages pkg depends on (itself included), test files excluded.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	var own []string
	for _, p := range allDeps(t, pkg) {
		if strings.HasPrefix(p, module+"/") {
			own = append(own, strings.TrimPrefix(p, module+"/"))
		}
	}
	return own
}

func TestImportBoundaries(t *testing.T) {
	tests := []struct {
		pkg     string
		allowed func(dep string) bool
		why     string
	}{
		{"internal/controller/...", func(d string) bool {
			return !strings.HasPrefix(d, "pkg/libvirt") && !strings.HasPrefix(d, "internal/provider")
		}, "the controller never talks to libvirt; it meets the provider only through LibvirtMachine"},
		{"internal/provider/...", func(d string) bool { return !strings.HasPrefix(d, "internal/controller") },
			"the provider never imports the controller's packages"},
		{"pkg/libvirt/...", func(d string) bool { return strings.HasPrefix(d, "pkg/libvirt") },
			"pkg/libvirt is a library anyone could reuse"},
		{"pkg/iso9660/...", func(d string) bool { return strings.HasPrefix(d, "pkg/iso9660") },
			"pkg/iso9660 is a library anyone could reuse"},
		{"pkg/nocloud/...", func(d string) bool { return strings.HasPrefix(d, "pkg/nocloud") || strings.HasPrefix(d, "pkg/iso9660") },
			"pkg/nocloud builds on pkg/iso9660 only"},
		{"api/...", func(d string) bool { return strings.HasPrefix(d, "api/") },
			"the API types are what clients import: they carry nothing of banlieue's implementation"},
		{"internal/imagebuilder/qcow2/...", func(d string) bool { return strings.HasPrefix(d, "internal/imagebuilder/qcow2") },
			"the qcow2 reader takes its limits as a parameter; the build maps its refusals (docs/guides/image-sources.md)"},
	}
	for _, tt := range tests {
		for _, dep := range deps(t, tt.pkg) {
			if !tt.allowed(dep) {
				t.Errorf("%s depends on %s: %s", tt.pkg, dep, tt.why)
			}
		}
	}
}

// allDeps lists every package pkg depends on (itself included), test files excluded.
func allDeps(t *testing.T, pkg string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", module+"/"+pkg)
	cmd.Dir = testenv.RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

// TestVCenterBoundaries: the controller never talks to vCenter (it meets the vSphere provider
// only through its machine CRD), and the vCenter client knows nothing of Kubernetes or of
// banlieue's API, so the provider role adapts it rather than the other way round.
func TestVCenterBoundaries(t *testing.T) {
	for _, dep := range allDeps(t, "internal/controller/...") {
		if strings.HasPrefix(dep, "github.com/vmware/govmomi") {
			t.Errorf("internal/controller/... depends on %s: the controller never talks to vCenter", dep)
		}
	}
	for _, dep := range allDeps(t, "internal/provider/vsphere/vcenter/...") {
		for _, banned := range []string{"k8s.io/", "sigs.k8s.io/", module + "/"} {
			if strings.HasPrefix(dep, banned) && !strings.HasPrefix(dep, module+"/internal/provider/vsphere/vcenter") {
				t.Errorf("internal/provider/vsphere/vcenter depends on %s: the vCenter client knows nothing of Kubernetes nor of banlieue's API", dep)
			}
		}
	}
}

// TestProviderNeverReadsVirtualMachines: the provider's code names no VirtualMachine type, so
// the same provider can serve a Cluster API Machine unchanged.
func TestProviderNeverReadsVirtualMachines(t *testing.T) {
	vm := regexp.MustCompile(`\bv1alpha1\.VirtualMachine(List)?\b|banlieuev1\.VirtualMachine(List)?\b`)
	root := filepath.Join(testenv.RepoRoot(), "internal", "provider")
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if loc := vm.FindIndex(src); loc != nil {
			t.Errorf("%s refers to %s", path, src[loc[0]:loc[1]])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestControllerNeverLinksTheVSphereSDK: banlieue-controller and the API types meet vCenter only
// through the VSphereMachine; the vSphere SDK (govmomi) is the vsphere provider's alone
// (docs/guides/vsphere-provider.md, "Before you start").
func TestControllerNeverLinksTheVSphereSDK(t *testing.T) {
	for _, pkg := range []string{"internal/controller/...", "api/..."} {
		cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", module+"/"+pkg)
		cmd.Dir = testenv.RepoRoot()
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		all := strings.Fields(string(out))
		// The listing must hold the third-party packages, or the check below sees nothing.
		if !slices.Contains(all, "k8s.io/apimachinery/pkg/apis/meta/v1") {
			t.Fatalf("go list -deps %s lists no k8s.io/apimachinery: the listing is not the whole graph", pkg)
		}
		for _, dep := range all {
			if strings.HasPrefix(dep, "github.com/vmware/govmomi") {
				t.Errorf("%s depends on %s: the controller never talks to vCenter; it meets the vsphere provider only through VSphereMachine", pkg, dep)
			}
		}
	}
}
