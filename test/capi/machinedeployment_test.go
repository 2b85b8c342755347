//go:build capi

package capi

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/controller"
	libvirtrole "banlieue.io/banlieue/internal/provider/libvirt/role"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/internal/testenv/labhost"
	"banlieue.io/banlieue/pkg/libvirt"
)

// bootstrapData is what the test, playing a bootstrap provider, writes into the data Secret:
// something no default seed holds, so its presence in a domain's seed can only come from there.
const bootstrapData = "#cloud-config\nwrite_files:\n  - path: /etc/banlieue-capi\n    content: \"bootstrapped by the test\"\n"

// labSuite adds to suite the lab host and banlieue's controller and libvirt provider, on the
// same API server as Cluster API's manager.
type labSuite struct {
	*suite
	lab      testenv.LibvirtLab
	host     *libvirt.Client
	run      string
	ns       string
	pool     string
	provider string
	guest    labGuest
	network  labhost.NATNetwork // the guest's, behind network class "nat"; zero without one
}

// labGuest is the image a lab case boots: the hack/ script that builds it (or finds it cached)
// and prints its directory, its file there, and whether it needs a network.
type labGuest struct {
	name, script, file string
	nat                bool // a libvirt NAT network on the lab, its addresses by DHCP
}

var (
	// tinyGuest is the test guest (hack/test-guest-image.sh): BIOS, no network, no agent.
	tinyGuest = labGuest{name: "tiny", script: "test-guest-image.sh", file: "guest.raw"}
	// cloudGuest is the Debian cloud guest of test/e2e/cloudguest (hack/cloud-guest.sh): UEFI,
	// cloud-init, the guest agent, DHCP on its NIC.
	cloudGuest = labGuest{name: "debian-12-cloud", script: "cloud-guest.sh", file: "cloud.raw", nat: true}
)

// volume is the guest's image volume in the suite's pool.
func (s *labSuite) volume() string { return s.guest.name + "-" + s.run + ".raw" }

func newLabSuite(t *testing.T, guest labGuest) (context.Context, *labSuite) {
	t.Helper()
	if testing.Short() {
		t.Skip("defines domains on the lab host")
	}
	lab := testenv.RequireLibvirtLab(t)
	if _, err := exec.LookPath("isoinfo"); err != nil {
		testenv.MissingPrerequisite(t, "isoinfo missing (genisoimage)")
	}
	guestDir := assets(t, guest.script)
	ctx, s := newSuite(t)
	ls := &labSuite{suite: s, lab: lab, host: labhost.Dial(t, lab), run: testenv.RunID(), provider: "lab-host", guest: guest}
	ls.ns, ls.pool = "capi-"+ls.run, "capi-"+ls.run
	caps := banlieuev1.ProviderCapabilities{
		StorageClasses: []banlieuev1.StorageClassMapping{{Name: "standard", Target: map[string]string{"pool": ls.pool}}},
	}
	if guest.nat {
		// Its own /24, next to test/e2e/cloudguest's; before the Provider, which must find it,
		// and removed after the domains on it (their cleanup runs first).
		ls.network = labhost.NATNetwork{Name: "capi-" + ls.run, Bridge: "capinat" + ls.run, Subnet: "198.18.65."}
		labhost.StartNATNetwork(t, lab, ls.network)
		caps.NetworkClasses = []banlieuev1.NetworkClassMapping{{Name: "nat", Target: map[string]string{"network": ls.network.Name}}}
	}

	// banlieue-controller and banlieue-provider-libvirt, in one manager as test/e2e/vm runs them.
	mgr := s.env.NewManager(t)
	if err := controller.Setup(mgr, controller.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := libvirtrole.Setup(mgr, libvirtrole.Options{BuildNamespace: "banlieue-imagebuild", Resync: time.Second}); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)

	labhost.CreatePool(ctx, t, ls.host, lab, ls.pool)
	labhost.UploadRaw(ctx, t, ls.host, ls.pool, ls.volume(), filepath.Join(guestDir, guest.file))
	// Whatever a failed run left defined under this run's namespace goes before the pool.
	t.Cleanup(func() { labhost.RemoveDomains(context.Background(), ls.host, ls.ns+"-") })
	s.env.CreateLabNamespace(ctx, t, lab, ls.ns, "libvirt-creds", "libvirt-ca")
	p := lab.Provider(ls.ns, ls.provider, "libvirt-creds", "libvirt-ca", caps)
	s.env.Create(ctx, t, p)
	testenv.Eventually(t, 150*time.Second, "Provider Ready", func() error {
		var got banlieuev1.Provider
		if err := s.env.Client.Get(ctx, client.ObjectKeyFromObject(p), &got); err != nil {
			return err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, banlieuev1.ConditionReady)
		return testenv.Unmet(c != nil && c.Status == metav1.ConditionTrue, fmt.Sprintf("%+v", got.Status.Conditions))
	})
	return ctx, ls
}

// bootVolume makes the guest an image the Provider serves (a BackingFile VMImage, as
// test/e2e/vm declares it) and returns the volume its row resolved to: the only boot volumes the
// provider accepts are those a VMImage resolved for the Provider.
func (s *labSuite) bootVolume(ctx context.Context, t *testing.T) string {
	t.Helper()
	img := &banlieuev1.VMImage{
		ObjectMeta: metav1.ObjectMeta{Name: s.guest.name + "-" + s.run},
		Spec: banlieuev1.VMImageSpec{OSFamily: "linux", OSDistribution: s.guest.name, OSVersion: "1", Architecture: "amd64",
			Sources: []banlieuev1.ImageSource{{ProviderClass: "libvirt", Kind: banlieuev1.SourceBackingFile, Ref: "/images/" + s.volume()}}},
	}
	s.env.Create(ctx, t, img)
	var ref string
	testenv.Eventually(t, 90*time.Second, "VMImage resolved on "+s.provider, func() error {
		var got banlieuev1.VMImage
		if err := s.env.Client.Get(ctx, client.ObjectKeyFromObject(img), &got); err != nil {
			return err
		}
		for _, r := range got.Status.PerProvider {
			if r.ProviderName == s.provider && r.ProviderNamespace == s.ns && r.Ready {
				ref = r.ResolvedRef
				return nil
			}
		}
		return fmt.Errorf("rows %+v", got.Status.PerProvider)
	})
	return ref
}

// inventory is every domain on the host and every volume of every pool, sorted: what "the host as
// it was" means.
func (s *labSuite) inventory(ctx context.Context, t *testing.T) []string {
	t.Helper()
	var names []string
	doms, err := s.host.ListAllDomains(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range doms {
		names = append(names, "domain "+d.Name)
	}
	pools, err := s.host.ListAllStoragePools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pools {
		for _, v := range labhost.VolumeNames(ctx, t, s.host, p.Name) {
			names = append(names, "volume "+p.Name+"/"+v)
		}
	}
	slices.Sort(names)
	return names
}

// TestMachineDeploymentOnLab is the contract end to end: Cluster API's manager turns a Cluster
// with a LibvirtCluster and a MachineDeployment with a LibvirtMachineTemplate into Machines and
// LibvirtMachines; banlieue realises them on the lab host with the bootstrap data in their seeds;
// the Machines report what Cluster API reads from them; scaling down and deleting the Cluster
// leave the host as it was.
func TestMachineDeploymentOnLab(t *testing.T) {
	ctx, s := newLabSuite(t, tinyGuest)
	bootVol := s.bootVolume(ctx, t)
	before := s.inventory(ctx, t)

	w := newWorkload(s.ns, s.provider, s.pool, bootVol)
	cluster, md := w.cluster, w.md
	w.create(ctx, t, s.suite)

	t.Run("the Cluster's infrastructure is provisioned, its failure domains Cluster API's", func(t *testing.T) {
		testenv.Eventually(t, 60*time.Second, "Cluster infrastructureProvisioned with failure domain "+s.provider, func() error {
			got, err := s.get(ctx, cluster)
			if err != nil {
				return err
			}
			provisioned, _, _ := unstructured.NestedBool(got.Object, "status", "initialization", "infrastructureProvisioned")
			fds, _, _ := unstructured.NestedSlice(got.Object, "status", "failureDomains")
			host, _, _ := unstructured.NestedString(got.Object, "spec", "controlPlaneEndpoint", "host")
			names := []string{}
			for _, fd := range fds {
				names = append(names, fmt.Sprint(fd.(map[string]any)["name"]))
			}
			return testenv.Unmet(provisioned && slices.Equal(names, []string{s.provider}) && host == "192.0.2.10",
				fmt.Sprintf("provisioned %v failureDomains %v endpoint %q", provisioned, names, host))
		})
	})

	start := time.Now()
	s.scale(ctx, t, md, 3)
	machines := s.waitMachines(ctx, t, 3, 240*time.Second)
	t.Logf("0 → 3: 3 Machines infrastructure-provisioned in %s", time.Since(start).Round(time.Millisecond))
	t.Run("the Machines report what Cluster API reads from their LibvirtMachines", func(t *testing.T) {
		for _, m := range machines {
			s.checkMachine(ctx, t, m)
		}
	})

	start = time.Now()
	s.scale(ctx, t, md, 1)
	kept := s.waitMachines(ctx, t, 1, 180*time.Second)
	s.waitHost(ctx, t, "after scaling to 1", func(inv []string) bool {
		return countDomains(inv, s.ns+"-") == 1
	})
	t.Logf("3 → 1 in %s", time.Since(start).Round(time.Millisecond))
	if got := kept[0].GetName(); !slices.ContainsFunc(machines, func(m *unstructured.Unstructured) bool { return m.GetName() == got }) {
		t.Errorf("the Machine kept, %s, is not one of the three", got)
	}

	s.deleteCluster(ctx, t, cluster, before)
}

// deleteCluster deletes the Cluster and waits until it, its Machines and their LibvirtMachines
// are gone and the host's inventory is before again.
func (s *labSuite) deleteCluster(ctx context.Context, t *testing.T, cluster *unstructured.Unstructured, before []string) {
	t.Helper()
	start := time.Now()
	if err := s.env.Client.Delete(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 180*time.Second, "Cluster, Machines and LibvirtMachines gone", func() error {
		_, err := s.get(ctx, cluster)
		var lms infrav1.LibvirtMachineList
		if lerr := s.env.Client.List(ctx, &lms, client.InNamespace(s.ns)); lerr != nil {
			return lerr
		}
		return testenv.Unmet(apierrors.IsNotFound(err) && len(lms.Items) == 0, fmt.Sprintf("Cluster: %v; %d LibvirtMachines", err, len(lms.Items)))
	})
	s.waitHost(ctx, t, "after deleting the Cluster", func(inv []string) bool { return slices.Equal(inv, before) })
	t.Logf("Cluster deleted, host as before, in %s", time.Since(start).Round(time.Millisecond))
}

// workload is what a user (and, for the data Secret, a bootstrap provider) declares: a Cluster
// "edge" with its LibvirtCluster on one Provider, a LibvirtMachineTemplate without providerRef
// and a MachineDeployment "workers" of it in that Provider's failure domain, at replicas 0: each
// machine goes where its Machine's spec.failureDomain says (banlieue-controller places it).
type workload struct {
	libvirtCluster *infrav1.LibvirtCluster
	template       *infrav1.LibvirtMachineTemplate
	data           *corev1.Secret
	cluster, md    *unstructured.Unstructured
}

func newWorkload(ns, provider, pool, bootVol string) *workload {
	cluster := capiObject("Cluster", ns, "edge")
	cluster.Object["spec"] = map[string]any{
		"infrastructureRef": map[string]any{"apiGroup": infrav1.GroupVersion.Group, "kind": "LibvirtCluster", "name": "edge"},
	}
	libvirtCluster := &infrav1.LibvirtCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: ns},
		Spec: infrav1.LibvirtClusterSpec{
			ControlPlaneEndpoint: &infrav1.APIEndpoint{Host: "192.0.2.10", Port: 6443},
			Providers:            []infrav1.ClusterProvider{{Name: provider}},
		},
	}
	template := &infrav1.LibvirtMachineTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: ns},
		Spec: infrav1.LibvirtMachineTemplateSpec{Template: infrav1.LibvirtMachineTemplateResource{Spec: infrav1.LibvirtMachineSpec{
			Pool:       pool,
			BootSource: infrav1.BootSource{Kind: infrav1.BootBackingVolume, Volume: bootVol},
			VCPUs:      1,
			MemoryMiB:  128,
			Firmware:   banlieuev1.FirmwareBIOS,
			Disks:      []infrav1.LibvirtDisk{{Name: "os", SizeGiB: 1}},
		}}},
	}
	// The test is the bootstrap provider: the data Secret as one writes it (type
	// cluster.x-k8s.io/secret, key value, the cluster-name label), named on the
	// MachineDeployment's template, so every Machine of it starts with dataSecretName set.
	data := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "workers-bootstrap", Namespace: ns,
			Labels: map[string]string{"cluster.x-k8s.io/cluster-name": "edge"}},
		Type: "cluster.x-k8s.io/secret",
		Data: map[string][]byte{"value": []byte(bootstrapData), "format": []byte("cloud-config")},
	}
	md := workersDeployment(ns, data.Name, "LibvirtMachineTemplate", template.Name, provider)
	return &workload{libvirtCluster: libvirtCluster, template: template, data: data, cluster: cluster, md: md}
}

// create creates the workload's objects, its infrastructure before the Cluster API objects that
// name it.
func (w *workload) create(ctx context.Context, t *testing.T, s *suite) {
	t.Helper()
	s.env.Create(ctx, t, w.libvirtCluster, w.template, w.data, w.cluster, w.md)
}

func countDomains(inv []string, prefix string) int {
	n := 0
	for _, e := range inv {
		if strings.HasPrefix(e, "domain "+prefix) {
			n++
		}
	}
	return n
}

// waitHost waits for the host's inventory to satisfy ok.
func (s *labSuite) waitHost(ctx context.Context, t *testing.T, what string, ok func([]string) bool) {
	t.Helper()
	testenv.Eventually(t, 120*time.Second, "the host "+what, func() error {
		inv := s.inventory(ctx, t)
		return testenv.Unmet(ok(inv), strings.Join(inv, ", "))
	})
}

// scale sets the MachineDeployment's replicas, as `kubectl scale` does.
func (s *suite) scale(ctx context.Context, t *testing.T, md *unstructured.Unstructured, replicas int64) {
	t.Helper()
	patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas))
	if err := s.env.Client.Patch(ctx, md, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatalf("scaling %s to %d: %v", md.GetName(), replicas, err)
	}
}

// waitMachines waits until the namespace holds exactly n Machines, each infrastructure-provisioned
// by Cluster API's reading of its LibvirtMachine, and returns them.
func (s *labSuite) waitMachines(ctx context.Context, t *testing.T, n int, timeout time.Duration) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	testenv.Eventually(t, timeout, fmt.Sprintf("%d Machines with infrastructure provisioned", n), func() error {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion("cluster.x-k8s.io/v1beta2")
		list.SetKind("MachineList")
		if err := s.env.Client.List(ctx, list, client.InNamespace(s.ns)); err != nil {
			return err
		}
		out = out[:0]
		var seen []string
		for i := range list.Items {
			m := &list.Items[i]
			provisioned, _, _ := unstructured.NestedBool(m.Object, "status", "initialization", "infrastructureProvisioned")
			phase, _, _ := unstructured.NestedString(m.Object, "status", "phase")
			seen = append(seen, fmt.Sprintf("%s provisioned=%v phase=%s deleting=%v", m.GetName(), provisioned, phase, m.GetDeletionTimestamp() != nil))
			if provisioned && m.GetDeletionTimestamp() == nil {
				out = append(out, m)
			}
		}
		return testenv.Unmet(len(out) == n && len(list.Items) == n, strings.Join(seen, "; "))
	})
	return out
}

// checkMachine compares what Cluster API wrote on a Machine with its LibvirtMachine and the
// domain on the host, and reads the domain's seed back.
func (s *labSuite) checkMachine(ctx context.Context, t *testing.T, m *unstructured.Unstructured) {
	t.Helper()
	name := m.GetName()
	ref, _, _ := unstructured.NestedString(m.Object, "spec", "infrastructureRef", "name")
	var lm infrav1.LibvirtMachine
	if err := s.env.Client.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: ref}, &lm); err != nil {
		t.Fatalf("Machine %s: its LibvirtMachine %s: %v", name, ref, err)
	}
	if !slices.ContainsFunc(lm.OwnerReferences, func(o metav1.OwnerReference) bool {
		return o.Kind == "Machine" && o.Name == name && o.Controller != nil && *o.Controller
	}) {
		t.Errorf("LibvirtMachine %s is not controlled by Machine %s: %+v", ref, name, lm.OwnerReferences)
	}
	// The template names no Provider: banlieue-controller placed the machine in the Machine's
	// failure domain.
	if lm.Spec.ProviderRef == nil || lm.Spec.ProviderRef.Name != s.provider {
		t.Errorf("LibvirtMachine %s providerRef %+v, want the Machine's failure domain %s", ref, lm.Spec.ProviderRef, s.provider)
	}
	if c := meta.FindStatusCondition(lm.Status.Conditions, banlieuev1.ConditionScheduled); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("LibvirtMachine %s Scheduled %+v, want True", ref, c)
	}
	providerID, _, _ := unstructured.NestedString(m.Object, "spec", "providerID")
	dom, err := s.host.DomainLookupByName(ctx, lm.Spec.DomainName)
	if err != nil {
		t.Fatalf("Machine %s: domain %q: %v", name, lm.Spec.DomainName, err)
	}
	if want := "libvirt://" + s.provider + "/" + dom.UUID.String(); providerID != want || lm.Spec.ProviderID != want {
		t.Errorf("Machine %s spec.providerID %q, LibvirtMachine %q, want %q", name, providerID, lm.Spec.ProviderID, want)
	}
	specFD, _, _ := unstructured.NestedString(m.Object, "spec", "failureDomain")
	statusFD, _, _ := unstructured.NestedString(m.Object, "status", "failureDomain")
	if specFD != s.provider || statusFD != s.provider {
		t.Errorf("Machine %s failureDomain spec %q status %q, want %q (LibvirtMachine spec %q status %q)",
			name, specFD, statusFD, s.provider, lm.Spec.FailureDomain, lm.Status.FailureDomain)
	}
	if status, reason := condition(m, "InfrastructureReady"); status != "True" {
		t.Errorf("Machine %s InfrastructureReady %s/%s", name, status, reason)
	}
	// The seed, downloaded through pkg/libvirt and read with isoinfo (an independent ISO reader):
	// its user-data is the bootstrap data, byte for byte.
	pool, err := s.host.StoragePoolLookupByName(ctx, s.pool)
	if err != nil {
		t.Fatal(err)
	}
	vol, err := s.host.StorageVolLookupByName(ctx, pool, lm.Spec.DomainName+"-cidata.iso")
	if err != nil {
		t.Fatalf("Machine %s: seed volume: %v", name, err)
	}
	var buf bytes.Buffer
	if _, err := s.host.StorageVolDownload(ctx, vol, &buf, nil); err != nil {
		t.Fatal(err)
	}
	iso := filepath.Join(t.TempDir(), "seed.iso")
	if err := os.WriteFile(iso, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("isoinfo", "-J", "-i", iso, "-x", "/user-data").Output()
	if err != nil {
		t.Fatalf("isoinfo -x /user-data: %v", err)
	}
	if string(out) != bootstrapData {
		t.Errorf("Machine %s: seed user-data %q, want the bootstrap data %q", name, out, bootstrapData)
	}
}

// workersDeployment is the MachineDeployment "workers" of Cluster "edge" in ns, at 0 replicas:
// its Machines' bootstrap data Secret, infrastructure template (kind and name) and failure
// domain.
func workersDeployment(ns, dataSecret, templateKind, templateName, failureDomain string) *unstructured.Unstructured {
	md := capiObject("MachineDeployment", ns, "workers")
	md.Object["spec"] = map[string]any{
		"clusterName": "edge",
		"replicas":    int64(0),
		"selector":    map[string]any{"matchLabels": map[string]any{"pool": "workers"}},
		"template": map[string]any{
			"metadata": map[string]any{"labels": map[string]any{"pool": "workers"}},
			"spec": map[string]any{
				"clusterName":       "edge",
				"bootstrap":         map[string]any{"dataSecretName": dataSecret},
				"infrastructureRef": map[string]any{"apiGroup": infrav1.GroupVersion.Group, "kind": templateKind, "name": templateName},
				"failureDomain":     failureDomain,
			},
		},
	}
	return md
}
