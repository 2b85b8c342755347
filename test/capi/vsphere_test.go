//go:build capi

package capi

import (
	"encoding/base64"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/controller"
	"banlieue.io/banlieue/internal/provider/vsphere"
	"banlieue.io/banlieue/internal/provider/vsphere/vcenter"
	"banlieue.io/banlieue/internal/provider/vsphere/vcsimtest"
	"banlieue.io/banlieue/internal/testenv"
)

// TestMachineDeploymentOnVCSim: Cluster API's own manager clones a VSphereMachineTemplate into a
// VSphereMachine per Machine; the vsphere provider (in process, over vcsim) clones each virtual
// machine with the Machine's bootstrap data as guestinfo.userdata, and Cluster API reads the
// Machine infrastructure-provisioned with vsphere://<bios-uuid>; scaling to 0 destroys the
// clones. There is no vSphere InfraCluster yet: the Cluster's is a LibvirtCluster naming the
// vsphere Provider, served by banlieue-controller.
func TestMachineDeploymentOnVCSim(t *testing.T) {
	ctx, s := newSuite(t)
	sim := vcsimtest.Start(t)
	ns := "capi-vs-" + testenv.RunID()
	const provider = "vcenter-sim"
	folder := "/DC0/vm/" + vcsimtest.Folder

	mgr := s.env.NewManager(t)
	if err := controller.Setup(mgr, controller.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := vsphere.Setup(mgr, vsphere.Options{ProviderName: provider, ProviderNamespace: ns, Folder: vcsimtest.Folder}); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)

	s.env.Create(ctx, t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	s.env.Create(ctx, t, sim.ProviderObjects(ns, provider, banlieuev1.ProviderCapabilities{})...)
	template := &infrav1.VSphereMachineTemplate{ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: ns},
		Spec: infrav1.VSphereMachineTemplateSpec{Template: infrav1.VSphereMachineTemplateResource{Spec: infrav1.VSphereMachineSpec{
			ProviderRef: &infrav1.ProviderReference{Name: provider}, FailureDomain: vcsimtest.FailureDomain,
			Template: vcsimtest.Template, CPUs: 1, MemoryMiB: 256,
			Disks:   []infrav1.VSphereDisk{{Name: "os", SizeGiB: sim.TemplateDiskGiB(t) + 1, Datastore: vcsimtest.Datastore}},
			Network: []infrav1.VSphereNetworkInterface{{Name: "eth0", PortGroup: vcsimtest.Network}},
		}}}}
	data := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "workers-bootstrap", Namespace: ns,
		Labels: map[string]string{"cluster.x-k8s.io/cluster-name": "edge"}},
		Type: "cluster.x-k8s.io/secret",
		Data: map[string][]byte{"value": []byte(bootstrapData), "format": []byte("cloud-config")}}
	// Cluster API needs an InfraCluster; banlieue's one is the LibvirtCluster, whose failure
	// domains are Providers: it names the vsphere Provider, and the template its vCenter cluster.
	libvirtCluster := &infrav1.LibvirtCluster{ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: ns},
		Spec: infrav1.LibvirtClusterSpec{ControlPlaneEndpoint: &infrav1.APIEndpoint{Host: "192.0.2.10", Port: 6443},
			Providers: []infrav1.ClusterProvider{{Name: provider}}}}
	cluster := capiObject("Cluster", ns, "edge")
	cluster.Object["spec"] = map[string]any{
		"infrastructureRef": map[string]any{"apiGroup": infrav1.GroupVersion.Group, "kind": "LibvirtCluster", "name": "edge"},
	}
	// The LibvirtCluster's failure domain: the Provider, whose vCenter cluster the template names.
	md := workersDeployment(ns, data.Name, "VSphereMachineTemplate", template.Name, provider)
	s.env.Create(ctx, t, libvirtCluster, template, data, cluster, md)

	start := time.Now()
	s.scale(ctx, t, md, 2)
	var machines []unstructured.Unstructured
	testenv.Eventually(t, 240*time.Second, "2 Machines infrastructure-provisioned from their VSphereMachines", func() error {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion("cluster.x-k8s.io/v1beta2")
		list.SetKind("MachineList")
		if err := s.env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		var state []string
		ready := 0
		for _, m := range list.Items {
			provisioned, _, _ := unstructured.NestedBool(m.Object, "status", "initialization", "infrastructureProvisioned")
			id, _, _ := unstructured.NestedString(m.Object, "spec", "providerID")
			state = append(state, fmt.Sprintf("%s provisioned=%v providerID=%q", m.GetName(), provisioned, id))
			if provisioned && len(id) > len("vsphere://") {
				ready++
			}
		}
		machines = list.Items
		return testenv.Unmet(len(list.Items) == 2 && ready == 2, fmt.Sprint(state))
	})
	t.Logf("0 → 2 Machines provisioned on vcsim in %s", time.Since(start).Round(time.Millisecond))

	t.Run("each Machine's virtual machine carries its bootstrap data and BIOS UUID", func(t *testing.T) {
		for _, m := range machines {
			ref, _, _ := unstructured.NestedString(m.Object, "spec", "infrastructureRef", "name")
			var vsm infrav1.VSphereMachine
			if err := s.env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref}, &vsm); err != nil {
				t.Fatal(err)
			}
			vm := sim.VM(t, folder+"/"+vsm.Spec.VMName)
			if vm == nil || vsm.Spec.VMName != ns+"-"+vsm.Name {
				t.Fatalf("VSphereMachine %s: vmName %q, virtual machine %v", vsm.Name, vsm.Spec.VMName, vm != nil)
			}
			ec := vcsimtest.ExtraConfig(vm)
			if got, _ := base64.StdEncoding.DecodeString(ec[vcenter.KeyUserData]); string(got) != bootstrapData {
				t.Errorf("%s: guestinfo.userdata %q, want the bootstrap data", vsm.Spec.VMName, got)
			}
			id, _, _ := unstructured.NestedString(m.Object, "spec", "providerID")
			if id != "vsphere://"+vm.Config.Uuid {
				t.Errorf("Machine %s providerID %q, want vsphere://%s", m.GetName(), id, vm.Config.Uuid)
			}
		}
	})

	s.scale(ctx, t, md, 0)
	testenv.Eventually(t, 180*time.Second, "VSphereMachines and their virtual machines gone at replicas 0", func() error {
		var list infrav1.VSphereMachineList
		if err := s.env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		names := sim.Names(t, folder)
		return testenv.Unmet(len(list.Items) == 0 && !slices.ContainsFunc(names, func(n string) bool { return len(n) > len(ns) && n[:len(ns)] == ns }),
			fmt.Sprintf("%d VSphereMachines, folder %v", len(list.Items), names))
	})
}
