package vsphere

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/capi"
	"banlieue.io/banlieue/internal/provider/vsphere/vcenter"
	"banlieue.io/banlieue/internal/provider/vsphere/vcsimtest"
	"banlieue.io/banlieue/internal/testenv"
)

// TestClusterAPIVSphereMachineAgainstVCSim: a VSphereMachine as a MachineSet makes it from a
// VSphereMachineTemplate (no vmName, no failure domain), owned by a Cluster API Machine of
// Cluster API's own CRD, is served as the v1beta2 InfraMachine contract asks (machine_capi.go):
// named after itself, cloned into the Machine's failure domain with the Machine's bootstrap data
// as guestinfo.userdata, provisioned with a providerID, paused by the Cluster; what the Machine
// does not allow clones nothing; deletion destroys the clone. Run as the provider's
// account, the bootstrap Secret granted by name as the operator grants it.
func TestClusterAPIVSphereMachineAgainstVCSim(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	const ns, provider = "vs-capi", "vc-capi"
	s := startSimSuite(ctx, t, ns, provider, banlieuev1.ProviderCapabilities{}, "c1-md-0-bootstrap", "c1-opaque")
	env, sim, mgr := s.env, s.sim, s.mgr
	env.InstallClusterAPICRDs(t, testenv.CAPIMachines, testenv.CAPIClusters)
	r := &MachineReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Sessions: &Sessions{Dial: Dial()},
		ProviderName: provider, ProviderNamespace: ns, Folder: vcsimtest.Folder, Resync: 2 * time.Second}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	stop := testenv.StartManager(t, mgr)
	t.Cleanup(func() { _ = stop(); r.Stop() })
	osGiB := sim.TemplateDiskGiB(t) + 1

	// No VSphereCluster exists: the Cluster names no infrastructure, only whether it is paused.
	env.Create(ctx, t, testenv.CAPIObject("Cluster", ns, "c1", map[string]any{"paused": false}))
	bootstrap := func(name string, typ corev1.SecretType, content string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{capi.LabelClusterName: "c1"}},
			Type: typ, Data: map[string][]byte{capi.KeyBootstrapData: []byte(content), capi.KeyBootstrapFormat: []byte(capi.FormatCloudConfig)}}
	}
	data := "#cloud-config\nruncmd: [kubeadm join --token abcdef.0123456789abcdef]\n"
	env.Create(ctx, t, bootstrap("c1-md-0-bootstrap", capi.SecretTypeBootstrap, data), bootstrap("c1-opaque", corev1.SecretTypeOpaque, data))

	// templateMachine creates a VSphereMachine as a MachineSet makes it from a template, with
	// failureDomain (empty: the template names none), and its Machine, which then takes it over as
	// controller.
	templateMachine := func(name, dataSecret, machineFD, failureDomain string) *infrav1.VSphereMachine {
		t.Helper()
		m := &infrav1.VSphereMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{capi.LabelClusterName: "c1"}},
			Spec: infrav1.VSphereMachineSpec{
				ProviderRef: &infrav1.ProviderReference{Name: provider}, FailureDomain: failureDomain,
				Template: vcsimtest.Template, CPUs: 2, MemoryMiB: 256,
				Disks:   []infrav1.VSphereDisk{{Name: "os", SizeGiB: osGiB, Datastore: vcsimtest.Datastore}},
				Network: []infrav1.VSphereNetworkInterface{{Name: "eth0", PortGroup: vcsimtest.Network}},
			}}
		spec := map[string]any{
			"clusterName":       "c1",
			"bootstrap":         map[string]any{"dataSecretName": dataSecret},
			"infrastructureRef": map[string]any{"apiGroup": infrav1.GroupVersion.Group, "kind": "VSphereMachine", "name": name},
		}
		if dataSecret == "" {
			spec["bootstrap"] = map[string]any{"configRef": map[string]any{"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": name}}
		}
		if machineFD != "" {
			spec["failureDomain"] = machineFD
		}
		machine := testenv.CAPIObject("Machine", ns, name, spec)
		env.Create(ctx, t, m, machine)
		testenv.Patch(ctx, t, env.Client, client.ObjectKeyFromObject(m), &infrav1.VSphereMachine{}, func(m *infrav1.VSphereMachine) {
			m.OwnerReferences = []metav1.OwnerReference{{APIVersion: capi.Group + "/v1beta2", Kind: "Machine", Name: name,
				UID: machine.GetUID(), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
		})
		return m
	}
	get := func(name string) *infrav1.VSphereMachine {
		var m infrav1.VSphereMachine
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &m); err != nil {
			t.Fatal(err)
		}
		return &m
	}
	has := func(m *infrav1.VSphereMachine, typ string, status metav1.ConditionStatus, reason string) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, typ)
		return c != nil && c.Status == status && c.Reason == reason
	}
	conditions := func(m *infrav1.VSphereMachine) string { return fmt.Sprintf("%+v", m.Status.Conditions) }
	folder := "/DC0/vm/" + vcsimtest.Folder

	t.Run("bootstrap data in guestinfo, provisioned, paused, deleted", func(t *testing.T) {
		templateMachine("c1-md-0", "c1-md-0-bootstrap", vcsimtest.FailureDomain, "")
		vmName := ns + "-c1-md-0"
		testenv.Eventually(t, simWait, "c1-md-0 Ready and not paused", func() error {
			m := get("c1-md-0")
			return testenv.Unmet(has(m, banlieuev1.ConditionReady, metav1.ConditionTrue, infrav1.ReasonVMRunning) &&
				has(m, infrav1.ConditionPaused, metav1.ConditionFalse, infrav1.ReasonNotPaused), conditions(m))
		})
		m := get("c1-md-0")
		if m.Spec.VMName != vmName || m.Spec.FailureDomain != vcsimtest.FailureDomain || m.Status.FailureDomain != vcsimtest.FailureDomain ||
			m.Spec.ProviderID != "vsphere://"+m.Status.BIOSUUID || m.Status.BIOSUUID == "" ||
			m.Status.Initialization == nil || !ptr.Deref(m.Status.Initialization.Provisioned, false) {
			t.Errorf("vmName %q failureDomain %q/%q providerID %q biosUuid %q initialization %+v", m.Spec.VMName, m.Spec.FailureDomain,
				m.Status.FailureDomain, m.Spec.ProviderID, m.Status.BIOSUUID, m.Status.Initialization)
		}
		vm := sim.VM(t, folder+"/"+vmName)
		if vm == nil {
			t.Fatalf("no virtual machine %s in %s", vmName, folder)
		}
		ec := vcsimtest.ExtraConfig(vm)
		if got, _ := base64.StdEncoding.DecodeString(ec[vcenter.KeyUserData]); string(got) != data || ec[vcenter.KeyOwnerUID] != string(m.UID) {
			t.Errorf("guestinfo.userdata %q, owner %q; want the Machine's bootstrap data and the machine's UID %s", got, ec[vcenter.KeyOwnerUID], m.UID)
		}
		sim.ReportGuest(t, folder+"/"+vmName, "192.0.2.20")
		testenv.Eventually(t, simWait, "c1-md-0's address", func() error {
			m := get("c1-md-0")
			return testenv.Unmet(len(m.Status.Addresses) == 1 && m.Status.Addresses[0].Address == "192.0.2.20", fmt.Sprintf("%v", m.Status.Addresses))
		})

		// The Cluster paused: nothing is reconciled, an out-of-band power-off stays.
		cluster := &unstructured.Unstructured{}
		cluster.SetGroupVersionKind(testenv.CAPIObject("Cluster", ns, "c1", nil).GroupVersionKind())
		testenv.Patch(ctx, t, env.Client, client.ObjectKey{Namespace: ns, Name: "c1"}, cluster, func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, true, "spec", "paused")
		})
		testenv.Eventually(t, simWait, "c1-md-0 Paused", func() error {
			m := get("c1-md-0")
			return testenv.Unmet(has(m, infrav1.ConditionPaused, metav1.ConditionTrue, infrav1.ReasonPaused), conditions(m))
		})
		sim.PowerOff(t, folder+"/"+vmName)
		time.Sleep(3 * r.Resync)
		if vm := sim.VM(t, folder+"/"+vmName); string(vm.Runtime.PowerState) != PowerStateOff {
			t.Errorf("a paused machine's virtual machine was powered %s", vm.Runtime.PowerState)
		}
		testenv.Patch(ctx, t, env.Client, client.ObjectKey{Namespace: ns, Name: "c1"}, cluster, func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, false, "spec", "paused")
		})
		testenv.Eventually(t, simWait, "c1-md-0 unpaused and powered on again", func() error {
			m := get("c1-md-0")
			vm := sim.VM(t, folder+"/"+vmName)
			return testenv.Unmet(has(m, infrav1.ConditionPaused, metav1.ConditionFalse, infrav1.ReasonNotPaused) &&
				string(vm.Runtime.PowerState) == PowerStateOn && ptr.Deref(m.Status.Initialization.Provisioned, false),
				fmt.Sprintf("power %s, %s", vm.Runtime.PowerState, conditions(m)))
		})

		if err := env.Client.Delete(ctx, get("c1-md-0")); err != nil {
			t.Fatal(err)
		}
		testenv.WaitGone(ctx, t, env.Client, &infrav1.VSphereMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1-md-0"}}, simWait)
		if slices.Contains(sim.Names(t, folder), vmName) {
			t.Errorf("virtual machine %s left behind after the deletion", vmName)
		}
	})

	t.Run("what the Machine does not allow clones nothing", func(t *testing.T) {
		cases := []struct{ name, dataSecret, machineFD, failureDomain, reason string }{
			{"c1-waits", "", vcsimtest.FailureDomain, "", infrav1.ReasonWaitingForBootstrapData},
			{"c1-opaque", "c1-opaque", vcsimtest.FailureDomain, "", infrav1.ReasonBootstrapDataRefused},
			{"c1-elsewhere", "c1-md-0-bootstrap", "dc1.dc1-c0", vcsimtest.FailureDomain, infrav1.ReasonFailureDomainMismatch},
			{"c1-nowhere", "c1-md-0-bootstrap", "", "", infrav1.ReasonNoFailureDomain},
		}
		for _, c := range cases {
			templateMachine(c.name, c.dataSecret, c.machineFD, c.failureDomain)
		}
		for _, c := range cases {
			testenv.Eventually(t, simWait, c.name+" refused with "+c.reason, func() error {
				m := get(c.name)
				return testenv.Unmet(has(m, banlieuev1.ConditionReady, metav1.ConditionFalse, c.reason), conditions(m))
			})
			if slices.Contains(sim.Names(t, folder), ns+"-"+c.name) {
				t.Errorf("%s: a virtual machine was cloned for a refused machine", c.name)
			}
		}
	})
}
