// Package cloudguest boots the real cloud guest of hack/cloud-guest.sh (Debian 12, cloud-init,
// qemu-guest-agent, UEFI) from what banlieue defines: envtest, one manager running the
// controller and the libvirt provider's reconcilers, and the lab libvirtd of hack/libvirt-lab.sh.
// Real cloud-init consumes banlieue's NoCloud seed; the test reads what it did back through the
// real guest agent, and GuestReady comes from that agent (ADR-0043, ADR-0122).
//
// Skipped without the lab, the envtest binaries or the image (hack/cloud-guest.sh needs root and
// a Debian mirror); with CI set, a missing prerequisite fails instead.
package cloudguest

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/controller"
	libvirtrole "banlieue.io/banlieue/internal/provider/libvirt/role"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/internal/testenv/labhost"
	"banlieue.io/banlieue/pkg/libvirt"
)

// suite is one API server, the lab host, and the libvirt objects this run made (named with a
// random run id: the lab is shared with other suites).
type suite struct {
	env  *testenv.Env
	lab  testenv.LibvirtLab
	host *libvirt.Client

	ns      string // Kubernetes namespace; domain names are <ns>-<vm>
	pool    string
	diskVol string             // the cloud guest's raw disk
	bridge  string             // the isolated host bridge behind network class "isolated"
	network labhost.NATNetwork // behind network class "nat"
}

func newSuite(t *testing.T) (context.Context, *suite) {
	if testing.Short() {
		t.Skip("boots VMs")
	}
	lab := testenv.RequireLibvirtLab(t)
	imageDir := labhost.CloudGuest(t)
	env := testenv.Start(t)
	testenv.SetLogger(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s := &suite{env: env, lab: lab, host: labhost.Dial(t, lab)}

	run := testenv.RunID()
	s.ns = "cg-" + run
	s.pool = "e2e-cloudguest-" + run
	s.diskVol = "debian-12-cloud-" + run + ".raw"
	s.bridge = "cgbr" + run
	s.network = labhost.NATNetwork{Name: "e2e-cloudguest-" + run, Bridge: "cgnat" + run, Subnet: "198.18.64."}
	isolatedBridge(t, s.bridge)
	// Before the Provider, which must find it, and removed after the domains on it.
	labhost.StartNATNetwork(t, lab, s.network)
	labhost.CreatePool(ctx, t, s.host, lab, s.pool)
	labhost.UploadRaw(ctx, t, s.host, s.pool, s.diskVol, filepath.Join(imageDir, "cloud.raw"))

	// Registered before the manager starts, so it runs after the manager stopped: a running
	// provider would define and start again every domain removed under it (domain events).
	t.Cleanup(func() { labhost.RemoveDomains(context.Background(), s.host, s.ns+"-") })
	mgr := env.NewManager(t)
	if err := controller.Setup(mgr, controller.Options{}); err != nil {
		t.Fatal(err)
	}
	// BackingFile sources only: no import Job is ever created.
	if err := libvirtrole.Setup(mgr, libvirtrole.Options{BuildNamespace: "banlieue-imagebuild", Resync: time.Second}); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr) // stopped when t ends, before the domains are removed

	env.CreateLabNamespace(ctx, t, lab, s.ns, "libvirt-edge-creds", "libvirt-edge-ca")
	caps := banlieuev1.ProviderCapabilities{
		StorageClasses: []banlieuev1.StorageClassMapping{{Name: "standard", Target: map[string]string{"pool": s.pool}}},
		NetworkClasses: []banlieuev1.NetworkClassMapping{
			{Name: "isolated", Target: map[string]string{"bridge": s.bridge}},
			{Name: "nat", Target: map[string]string{"network": s.network.Name}},
		},
	}
	env.Create(ctx, t, lab.Provider(s.ns, "libvirt-edge-host-7", "libvirt-edge-creds", "libvirt-edge-ca", caps))
	testenv.Eventually(t, 150*time.Second, "Provider Ready with a failure domain", func() error {
		var p banlieuev1.Provider
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: "libvirt-edge-host-7"}, &p); err != nil {
			return testenv.Unmet(false, err.Error())
		}
		c := meta.FindStatusCondition(p.Status.Conditions, banlieuev1.ConditionReady)
		return testenv.Unmet(c != nil && c.Status == metav1.ConditionTrue && len(p.Status.FailureDomains) == 1, fmt.Sprintf("%+v", p.Status))
	})
	return ctx, s
}

// isolatedBridge creates a host bridge with no address and no uplink, removed when t ends: the
// guests on it reach nothing but each other, and nothing on this machine changes route. (A
// libvirt network would be the same once started, but pkg/libvirt does not start networks.)
func isolatedBridge(t *testing.T, name string) {
	t.Helper()
	ip := func(args ...string) error {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := ip("link", "add", "name", name, "type", "bridge"); err != nil {
		testenv.MissingPrerequisite(t, "creating a host bridge (root and iproute2): "+err.Error())
	}
	t.Cleanup(func() {
		if err := ip("link", "del", name); err != nil {
			t.Error(err)
		}
	})
	if err := ip("link", "set", name, "up"); err != nil {
		t.Fatal(err)
	}
}
