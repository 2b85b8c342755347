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
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/provider/vsphere/vcenter"
	"banlieue.io/banlieue/internal/provider/vsphere/vcsimtest"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/internal/userdata"
)

// simWait bounds every wait on the reconciler: generous, for a loaded 2-core machine.
const simWait = 90 * time.Second

const (
	simNs       = "vs-machines"
	simProvider = "vc-sim"
	simFolder   = "/DC0/vm/" + vcsimtest.Folder
)

// TestVSphereMachineAgainstVCSim runs the VSphereMachine reconciler, as the provider's account
// with the shipped ClusterRole, on the real API server over
// an in-process vcsim whose TLS is verified against its own CA, the Provider's Secret and CA
// ConfigMap read by name: a machine is cloned, configured, powered and reported, its power
// follows the spec and survives an out-of-band power-off, a virtual machine of its name that is
// not its own is refused and left untouched, and deleting a machine deletes its virtual machine
// and nothing else.
func TestVSphereMachineAgainstVCSim(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s := startSimSuite(ctx, t, simNs, simProvider, banlieuev1.ProviderCapabilities{},
		userdata.SecretName("web-0"), userdata.SecretName("stranger"))
	env, sim, mgr := s.env, s.sim, s.mgr
	r := &MachineReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Sessions: &Sessions{Dial: Dial()},
		ProviderName: simProvider, ProviderNamespace: simNs, Folder: vcsimtest.Folder}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	stop := testenv.StartManager(t, mgr)
	t.Cleanup(func() { _ = stop(); r.Stop() })

	osGiB := sim.TemplateDiskGiB(t) + 1

	machine := func(name string) *infrav1.VSphereMachine {
		return &infrav1.VSphereMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: simNs}, Spec: infrav1.VSphereMachineSpec{
			ProviderRef: &infrav1.ProviderReference{Name: simProvider}, FailureDomain: vcsimtest.FailureDomain, VMName: name,
			Template: vcsimtest.Template, CPUs: 2, MemoryMiB: 256,
			Disks:   []infrav1.VSphereDisk{{Name: "os", SizeGiB: osGiB, Datastore: vcsimtest.Datastore}},
			Network: []infrav1.VSphereNetworkInterface{{Name: "eth0", PortGroup: vcsimtest.Network}},
		}}
	}
	get := func(name string) *infrav1.VSphereMachine {
		var m infrav1.VSphereMachine
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: simNs, Name: name}, &m); err != nil {
			t.Fatal(err)
		}
		return &m
	}
	ready := func(m *infrav1.VSphereMachine) *metav1.Condition {
		return meta.FindStatusCondition(m.Status.Conditions, banlieuev1.ConditionReady)
	}

	// A machine with its user-data Secret, written as banlieue-controller writes it.
	content := []byte("#cloud-config\npackages: [nginx]\n")
	salt := []byte("0123456789abcdef")
	web := machine("web-0")
	web.Spec.UserDataSecretRef = &banlieuev1.LocalObjectReference{Name: userdata.SecretName(web.Name)}
	web.Spec.UserDataHash = userdata.Hash(salt, content)
	env.Create(ctx, t, web)
	env.Create(ctx, t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: userdata.SecretName(web.Name), Namespace: simNs,
		Labels:          userdata.Labels(web.Name),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: infrav1.GroupVersion.String(), Kind: "VSphereMachine", Name: web.Name, UID: web.UID, Controller: ptr.To(true)}}},
		Data: map[string][]byte{userdata.KeyUserData: content, userdata.KeySalt: salt}})

	t.Run("ready", func(t *testing.T) {
		testenv.Eventually(t, simWait, "web-0 Ready", func() error {
			m := get("web-0")
			c := ready(m)
			return testenv.Unmet(c != nil && c.Status == metav1.ConditionTrue && m.Status.ObservedPowerState == banlieuev1.PoweredOn,
				fmt.Sprintf("Ready %+v, power %s", c, m.Status.ObservedPowerState))
		})
		vm := sim.VM(t, simFolder+"/web-0")
		if vm == nil {
			t.Fatal("no virtual machine web-0 in the folder")
		}
		ec := vcsimtest.ExtraConfig(vm)
		m := get("web-0")
		if ec[vcenter.KeyOwnerUID] != string(m.UID) {
			t.Errorf("owner proof %q, want the machine's UID %s", ec[vcenter.KeyOwnerUID], m.UID)
		}
		if got, _ := base64.StdEncoding.DecodeString(ec[vcenter.KeyUserData]); string(got) != string(content) || ec[vcenter.KeyUserDataEncoding] != "base64" {
			t.Errorf("guestinfo.userdata = %q (%s), want the Secret's user-data in base64", got, ec[vcenter.KeyUserDataEncoding])
		}
		if ec[vcenter.KeyMetadata] == "" {
			t.Error("guestinfo.metadata is unset")
		}
		if want := "vsphere://" + m.Status.BIOSUUID; m.Status.BIOSUUID == "" || m.Spec.ProviderID != want {
			t.Errorf("providerID %q, biosUuid %q; want vsphere://<bios-uuid>", m.Spec.ProviderID, m.Status.BIOSUUID)
		}
		if !slices.Contains(m.Finalizers, infrav1.FinalizerVSphereMachine) || m.Status.VMRef != vm.Self.String() {
			t.Errorf("finalizers %v, vmRef %q (vm %s)", m.Finalizers, m.Status.VMRef, vm.Self)
		}
		// Tools report an address: the watch brings it to the status.
		sim.ReportGuest(t, simFolder+"/web-0", "192.0.2.10")
		testenv.Eventually(t, simWait, "web-0's address and GuestReady", func() error {
			m := get("web-0")
			g := meta.FindStatusCondition(m.Status.Conditions, banlieuev1.ConditionGuestReady)
			ok := len(m.Status.Addresses) > 0 && m.Status.Addresses[0].Address == "192.0.2.10" && g != nil && g.Status == metav1.ConditionTrue
			return testenv.Unmet(ok, fmt.Sprintf("addresses %v, GuestReady %+v", m.Status.Addresses, g))
		})
	})

	t.Run("out-of-band power-off", func(t *testing.T) {
		sim.PowerOff(t, simFolder+"/web-0")
		// Only the provider powers it on again, and only once it saw the power-off.
		testenv.Eventually(t, simWait, "web-0 powered on again", func() error {
			vm := sim.VM(t, simFolder+"/web-0")
			return testenv.Unmet(string(vm.Runtime.PowerState) == PowerStateOn, "power "+string(vm.Runtime.PowerState))
		})
	})

	t.Run("power off through desiredPowerState", func(t *testing.T) {
		testenv.Patch(ctx, t, env.Client, client.ObjectKey{Namespace: simNs, Name: "web-0"}, &infrav1.VSphereMachine{}, func(m *infrav1.VSphereMachine) {
			m.Spec.DesiredPowerState = banlieuev1.PoweredOff
			m.Spec.PowerOffMode = banlieuev1.PowerOffHard
		})
		testenv.Eventually(t, simWait, "web-0 PoweredOff and Ready", func() error {
			m := get("web-0")
			c := ready(m)
			vm := sim.VM(t, simFolder+"/web-0")
			return testenv.Unmet(string(vm.Runtime.PowerState) == PowerStateOff && m.Status.ObservedPowerState == banlieuev1.PoweredOff &&
				c != nil && c.Status == metav1.ConditionTrue, fmt.Sprintf("vCenter %s, status %s, Ready %+v", vm.Runtime.PowerState, m.Status.ObservedPowerState, c))
		})
	})

	t.Run("foreign virtual machine of the name", func(t *testing.T) {
		sim.CreateForeign(t, simFolder, "stranger")
		env.Create(ctx, t, machine("stranger"))
		testenv.Eventually(t, simWait, "stranger refused", func() error {
			c := ready(get("stranger"))
			return testenv.Unmet(c != nil && c.Reason == infrav1.ReasonVMNameConflict, fmt.Sprintf("Ready %+v", c))
		})
		vm := sim.VM(t, simFolder+"/stranger")
		ec := vcsimtest.ExtraConfig(vm)
		if ec["person.marker"] != "mine" || ec[vcenter.KeyOwnerUID] != "" || ec[vcenter.KeyUserData] != "" || vm.Config.Hardware.NumCPU != 1 ||
			string(vm.Runtime.PowerState) != PowerStateOff {
			t.Errorf("the foreign virtual machine was changed: extraConfig %v, cpus %d, power %s", ec, vm.Config.Hardware.NumCPU, vm.Runtime.PowerState)
		}
		// Deleting the refused machine lets it go and leaves the stranger's virtual machine.
		if err := env.Client.Delete(ctx, get("stranger")); err != nil {
			t.Fatal(err)
		}
		testenv.WaitGone(ctx, t, env.Client, machine("stranger"), simWait)
		if sim.VM(t, simFolder+"/stranger") == nil {
			t.Error("the foreign virtual machine was destroyed")
		}
	})

	t.Run("delete", func(t *testing.T) {
		if err := env.Client.Delete(ctx, get("web-0")); err != nil {
			t.Fatal(err)
		}
		testenv.WaitGone(ctx, t, env.Client, machine("web-0"), simWait)
		if got := sim.Names(t, simFolder); !slices.Equal(got, []string{"stranger"}) {
			t.Errorf("folder holds %v after the deletion, want only the stranger's", got)
		}
		if sim.VM(t, vcsimtest.Template) == nil {
			t.Error("the template is gone")
		}
	})
}
