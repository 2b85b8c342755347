// Package vm runs VirtualMachines end to end: envtest, one manager running the controller
// (controller.Setup), the libvirt Provider, VMImage and LibvirtMachine reconcilers, and the lab
// libvirtd of hack/libvirt-lab.sh. Real guests built by hack/test-guest-image.sh boot from what
// banlieue defined and report on their serial console what they saw (firmware, TPM, the NoCloud
// seed).
//
// Skipped without the lab, the envtest binaries or the guest image; with CI set, a missing
// prerequisite fails instead.
package vm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/controller"
	"banlieue.io/banlieue/internal/controller/pool"
	libvirtrole "banlieue.io/banlieue/internal/provider/libvirt/role"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/internal/testenv/labhost"
	"banlieue.io/banlieue/pkg/libvirt"
)

// suite is one API server, the lab host, and the libvirt objects this run made (all named with
// a random run id: the lab is shared with other suites running at the same time).
type suite struct {
	env  *testenv.Env
	lab  testenv.LibvirtLab
	host *libvirt.Client

	run      string
	ns       string // Kubernetes namespace; domain names are <ns>-<vm>
	pool     string
	poolDir  string
	guestDir string
	diskVol  string // the bootable raw disk (installMode immediate)
	isoVol   string // the UEFI installer ISO (installMode deferred)
	mgrStop  func()
	// root is the test that started the suite: the manager, restarted from a subtest, lives as
	// long as it.
	root *testing.T
}

func prerequisite[T any](t *testing.T, what string, f func() (T, error)) T {
	t.Helper()
	v, err := f()
	if err != nil {
		testenv.MissingPrerequisite(t, what+": "+err.Error())
	}
	return v
}

func newSuite(t *testing.T) (context.Context, *suite) {
	if testing.Short() {
		t.Skip("boots VMs")
	}
	lab := testenv.RequireLibvirtLab(t)
	guestDir := prerequisite(t, "building the test guest (hack/test-guest-image.sh)", func() (string, error) {
		out, err := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "test-guest-image.sh")).Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				return "", fmt.Errorf("%v: %s", err, ee.Stderr)
			}
			return "", err
		}
		return strings.TrimSpace(string(out)), nil
	})
	env := testenv.Start(t)
	s := &suite{env: env, lab: lab, guestDir: guestDir, root: t}
	testenv.SetLogger(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s.host = labhost.Dial(t, lab)

	s.run = testenv.RunID()
	s.ns = "e2e-" + s.run
	s.pool = "e2e-vm-" + s.run
	s.diskVol = "tiny-linux-" + s.run + ".raw"
	s.isoVol = "tiny-linux-installer-" + s.run + ".iso"
	s.createPool(ctx, t)
	s.upload(ctx, t, s.diskVol, filepath.Join(guestDir, "guest.raw"))
	s.upload(ctx, t, s.isoVol, filepath.Join(guestDir, "guest-efi.iso"))

	s.startManager()
	t.Cleanup(func() { s.mgrStop() })
	// Registered after the pool's cleanup, so it runs before it: whatever a failed run left
	// defined under this run's namespace goes first (a define that timed out on our side may
	// still have completed on the daemon's).
	t.Cleanup(func() { labhost.RemoveDomains(context.Background(), s.host, s.ns+"-") })

	env.CreateLabNamespace(ctx, t, lab, s.ns, "libvirt-edge-creds", "libvirt-edge-ca")
	env.Create(ctx, t, s.provider())
	s.waitProviderReady(ctx, t)
	return ctx, s
}

// startManager runs what the banlieue-controller and banlieue-provider-libvirt processes run,
// in one manager. It can be stopped (a crash, as far as the host is concerned) and started again.
func (s *suite) startManager() {
	t := s.root
	mgr := s.env.NewManager(t)
	// As in the roles' managers: once-only series (time to Ready) are recorded from the election on.
	if err := mgr.Add(app.LeaderGauge(mgr, "e2e-vm")); err != nil {
		t.Fatal(err)
	}
	if err := controller.Setup(mgr, controller.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := pool.Setup(mgr, pool.Options{}); err != nil {
		t.Fatal(err)
	}
	// BackingFile sources only: no import Job is ever created. The role's connections close
	// when the manager stops.
	if err := libvirtrole.Setup(mgr, libvirtrole.Options{BuildNamespace: "banlieue-imagebuild", Resync: time.Second}); err != nil {
		t.Fatal(err)
	}
	stop := testenv.StartManager(t, mgr)
	s.mgrStop = func() {
		_ = stop() // logged to the test by StartManager
	}
}

func (s *suite) createPool(ctx context.Context, t *testing.T) {
	t.Helper()
	s.poolDir = filepath.Join(s.lab.Dir, "pools", s.pool)
	labhost.CreatePool(ctx, t, s.host, s.lab, s.pool)
}

// upload puts a local file into the pool as a raw volume, holes kept as holes.
func (s *suite) upload(ctx context.Context, t *testing.T, name, path string) {
	t.Helper()
	labhost.UploadRaw(ctx, t, s.host, s.pool, name, path)
}

// provider maps standard to this run's pool and declares vtpm.
func (s *suite) provider() *banlieuev1.Provider {
	caps := banlieuev1.ProviderCapabilities{
		StorageClasses: []banlieuev1.StorageClassMapping{{Name: "standard", Target: map[string]string{"pool": s.pool}}},
		Features:       []string{"vtpm"},
	}
	p := s.lab.Provider(s.ns, "libvirt-edge-host-7", "libvirt-edge-creds", "libvirt-edge-ca", caps)
	p.Labels = map[string]string{"site": "lab"}
	return p
}

func (s *suite) waitProviderReady(ctx context.Context, t *testing.T) {
	t.Helper()
	testenv.Eventually(t, 150*time.Second, "Provider Ready with a failure domain", func() error {
		var p banlieuev1.Provider
		if err := s.env.Client.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: "libvirt-edge-host-7"}, &p); err != nil {
			return testenv.Unmet(false, err.Error())
		}
		c := meta.FindStatusCondition(p.Status.Conditions, banlieuev1.ConditionReady)
		return testenv.Unmet(c != nil && c.Status == metav1.ConditionTrue && len(p.Status.FailureDomains) == 1, fmt.Sprintf("%+v", p.Status))
	})
}

// example17 is examples/17-virtualmachine-libvirt.yaml, decoded.
type example17 struct {
	image    *banlieuev1.VMImage
	class    *banlieuev1.VMClass
	userData *corev1.ConfigMap
	vm       *banlieuev1.VirtualMachine
}

func loadExample17(t *testing.T) example17 {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", "17-virtualmachine-libvirt.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ex example17
	for _, doc := range bytes.Split(data, []byte("\n---")) {
		var head struct{ Kind string }
		if err := yaml.Unmarshal(doc, &head); err != nil {
			t.Fatal(err)
		}
		var target any
		switch head.Kind {
		case "VMImage":
			ex.image = &banlieuev1.VMImage{}
			target = ex.image
		case "VMClass":
			ex.class = &banlieuev1.VMClass{}
			target = ex.class
		case "ConfigMap":
			ex.userData = &corev1.ConfigMap{}
			target = ex.userData
		case "VirtualMachine":
			ex.vm = &banlieuev1.VirtualMachine{}
			target = ex.vm
		default:
			continue
		}
		if err := yaml.UnmarshalStrict(doc, target); err != nil {
			t.Fatalf("examples/17 %s: %v", head.Kind, err)
		}
	}
	if ex.image == nil || ex.class == nil || ex.userData == nil || ex.vm == nil {
		t.Fatal("examples/17 must hold a VMImage, a VMClass, a ConfigMap and a VirtualMachine")
	}
	return ex
}
