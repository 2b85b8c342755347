package controller

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/ssa"
	"banlieue.io/banlieue/internal/userdata"
)

// The vsphere half of the suite plays the vsphere provider: it publishes the Provider's failure
// domain and the image row, and writes VSphereMachine status under that provider's field
// manager, as the real one will.

// testVSphere is examples/20: a VM on a vCenter Provider gets a VSphereMachine built from its
// class and the image's Template source, and the machine's status is mirrored back.
func (s *suite) testVSphere(ctx context.Context, t *testing.T) {
	ns := "ns-vsphere"
	s.namespace(ctx, t, ns)
	s.vsphereProvider(ctx, t, ns, "vcenter-dc1")
	s.vsphereImage(ctx, t, "tmpl-p", "/dc1/vm/templates/ubuntu-24.04", banlieuev1.InstallImmediate, ns, "vcenter-dc1")
	s.create(ctx, t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "db-01-user-data", Namespace: ns},
		Data: map[string]string{"user-data": guideUserDataPlaceholder}})
	s.create(ctx, t, guideVM(ns, "db-01", "small", "tmpl-p", &banlieuev1.UserDataSource{
		ConfigMapRef: &banlieuev1.KeySelector{Name: "db-01-user-data"}}))

	m := s.waitVSphereMachine(ctx, t, ns, "db-01", "exists", func(*infrav1.VSphereMachine) bool { return true })
	want := infrav1.VSphereMachineSpec{
		FailureDomain:     "dc1-cluster-a",
		ProviderRef:       &infrav1.ProviderReference{Name: "vcenter-dc1", Namespace: ns},
		VMName:            ns + "-db-01",
		Template:          "/dc1/vm/templates/ubuntu-24.04",
		CPUs:              2,
		MemoryMiB:         2048,
		Firmware:          banlieuev1.FirmwareEFI,
		Disks:             []infrav1.VSphereDisk{{Name: "os", SizeGiB: 20, Datastore: "vsanDatastore", Provisioning: banlieuev1.DiskThin}},
		Network:           []infrav1.VSphereNetworkInterface{{Name: "nic0", PortGroup: "prod-pg"}},
		DesiredPowerState: banlieuev1.PoweredOn,
		PowerOffMode:      banlieuev1.PowerOffTrySoft,
		PowerOffTimeout:   &metav1.Duration{Duration: 2 * time.Minute},
	}
	got := m.Spec.DeepCopy()
	got.UserDataSecretRef, got.UserDataHash = nil, ""
	if !equalJSON(got, &want) {
		t.Errorf("VSphereMachine spec =\n%+v\nwant\n%+v", got, want)
	}
	if m.Labels[banlieuev1.LabelOwnedBy] != "db-01" || !metav1.IsControlledBy(m, &banlieuev1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{UID: s.vmUID(ctx, t, ns, "db-01")}}) {
		t.Errorf("VSphereMachine metadata = %+v", m.ObjectMeta)
	}
	// The user-data is in the per-machine Secret, controlled by the VSphereMachine, and nowhere
	// in the custom resource.
	if m.Spec.UserDataSecretRef == nil || m.Spec.UserDataSecretRef.Name != userdata.SecretName(m.Name) || len(m.Spec.UserDataHash) != 64 {
		t.Fatalf("user-data reference = %+v, hash %q", m.Spec.UserDataSecretRef, m.Spec.UserDataHash)
	}
	raw := &unstructured.Unstructured{}
	raw.SetGroupVersionKind(infrav1.GroupVersion.WithKind("VSphereMachine"))
	if err := s.c.Get(ctx, client.ObjectKeyFromObject(m), raw); err != nil {
		t.Fatal(err)
	}
	if js, _ := json.Marshal(raw.Object); strings.Contains(string(js), "packages: [nginx]") {
		t.Errorf("the VSphereMachine carries user-data: %s", js)
	}
	sec := poll(ctx, t, s.c, client.ObjectKey{Namespace: ns, Name: m.Spec.UserDataSecretRef.Name}, &corev1.Secret{},
		"the user-data Secret holds the rendered content", func(sec *corev1.Secret) bool {
			return strings.Contains(string(sec.Data[userdata.KeyUserData]), "hostname: db-01")
		})
	if !metav1.IsControlledBy(sec, m) || sec.OwnerReferences[0].Kind != "VSphereMachine" {
		t.Errorf("user-data Secret owner references = %+v, want the controller reference to VSphereMachine %s", sec.OwnerReferences, m.Name)
	}
	s.waitVM(ctx, t, ns, "db-01", "Scheduled=True, Ready=False InfrastructureNotReady", func(vm *banlieuev1.VirtualMachine) bool {
		return hasCondition(vm.Status.Conditions, banlieuev1.ConditionScheduled, metav1.ConditionTrue, banlieuev1.ReasonScheduled) &&
			hasCondition(vm.Status.Conditions, banlieuev1.ConditionReady, metav1.ConditionFalse, banlieuev1.ReasonInfrastructureNotReady) &&
			vm.Status.Scheduled != nil && vm.Status.Scheduled.ProviderClass == "vsphere" && vm.Status.Scheduled.FailureDomain == "dc1-cluster-a" &&
			vm.Status.InfrastructureRef != nil && vm.Status.InfrastructureRef.Kind == "VSphereMachine" &&
			vm.Status.InfrastructureRef.APIGroup == infrav1.GroupVersion.Group
	})
	s.waitProvider(ctx, t, ns, "vcenter-dc1", "provider-in-use finalizer", func(p *banlieuev1.Provider) bool {
		return controllerutil.ContainsFinalizer(p, banlieuev1.FinalizerProviderInUse)
	})

	// The provider clones and powers on the virtual machine: providerID in the spec, Ready,
	// GuestReady, addresses and power in the status.
	patch := client.MergeFrom(m.DeepCopy())
	m.Spec.ProviderID = "vsphere://4203a1b2-c3d4-e5f6-0718-293a4b5c6d7e"
	controllerutil.AddFinalizer(m, infrav1.FinalizerVSphereMachine)
	if err := s.c.Patch(ctx, m, patch, client.FieldOwner(vsphereProviderManager)); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	if err := ssa.ApplyStatus(ctx, s.c, m, &infrav1.VSphereMachineStatus{
		Initialization:     &banlieuev1.InitializationStatus{Provisioned: ptr.To(true)},
		Addresses:          []banlieuev1.MachineAddress{{Type: banlieuev1.MachineInternalIP, Address: "192.0.2.20"}},
		ObservedPowerState: banlieuev1.PoweredOn,
		VMRef:              "vm-42",
		BIOSUUID:           "4203a1b2-c3d4-e5f6-0718-293a4b5c6d7e",
		ToolsRunning:       ptr.To(true),
		Conditions: []metav1.Condition{
			{Type: banlieuev1.ConditionReady, Status: metav1.ConditionTrue, Reason: "VMRunning", Message: "the virtual machine runs", LastTransitionTime: now},
			{Type: banlieuev1.ConditionGuestReady, Status: metav1.ConditionTrue, Reason: "GuestAnnounced", Message: "VMware Tools run", LastTransitionTime: now},
		},
	}, vsphereProviderManager); err != nil {
		t.Fatal(err)
	}
	s.waitVM(ctx, t, ns, "db-01", "Ready=True with the machine's address and power", func(vm *banlieuev1.VirtualMachine) bool {
		return hasCondition(vm.Status.Conditions, banlieuev1.ConditionReady, metav1.ConditionTrue, banlieuev1.ReasonReconciled) &&
			hasCondition(vm.Status.Conditions, banlieuev1.ConditionInfrastructureReady, metav1.ConditionTrue, "VMRunning") &&
			hasCondition(vm.Status.Conditions, banlieuev1.ConditionGuestReady, metav1.ConditionTrue, "GuestAnnounced") &&
			vm.Status.ObservedPowerState == banlieuev1.PoweredOn && len(vm.Status.Addresses) == 1 && vm.Status.Addresses[0].Address == "192.0.2.20"
	})

	// Powering off through the VM reaches the machine; the provider's providerID survives the
	// controller's apply.
	s.patchVM(ctx, t, ns, "db-01", func(vm *banlieuev1.VirtualMachine) { vm.Spec.DesiredPowerState = banlieuev1.PoweredOff })
	m = s.waitVSphereMachine(ctx, t, ns, "db-01", "desiredPowerState PoweredOff", func(m *infrav1.VSphereMachine) bool {
		return m.Spec.DesiredPowerState == banlieuev1.PoweredOff
	})
	if m.Spec.ProviderID != "vsphere://4203a1b2-c3d4-e5f6-0718-293a4b5c6d7e" {
		t.Errorf("providerID = %q after a controller pass, want the provider's value", m.Spec.ProviderID)
	}

	// Deletion: the VM waits for its machine, and the Provider stays in use until the machine
	// is gone.
	vm := &banlieuev1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "db-01", Namespace: ns}}
	if err := s.c.Delete(ctx, vm); err != nil {
		t.Fatal(err)
	}
	m = s.waitVSphereMachine(ctx, t, ns, "db-01", "terminating", func(m *infrav1.VSphereMachine) bool { return !m.DeletionTimestamp.IsZero() })
	s.waitVM(ctx, t, ns, "db-01", "VM held with Ready=False Deleting", func(vm *banlieuev1.VirtualMachine) bool {
		return !vm.DeletionTimestamp.IsZero() && hasCondition(vm.Status.Conditions, banlieuev1.ConditionReady, metav1.ConditionFalse, banlieuev1.ReasonDeleting)
	})
	p := &banlieuev1.Provider{}
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vcenter-dc1"}, p); err != nil || !controllerutil.ContainsFinalizer(p, banlieuev1.FinalizerProviderInUse) {
		t.Fatalf("the Provider lost its in-use finalizer while a VSphereMachine references it (err %v, finalizers %v)", err, p.Finalizers)
	}
	patch = client.MergeFrom(m.DeepCopy())
	controllerutil.RemoveFinalizer(m, infrav1.FinalizerVSphereMachine)
	if err := s.c.Patch(ctx, m, patch, client.FieldOwner(vsphereProviderManager)); err != nil {
		t.Fatal(err)
	}
	waitGone(ctx, t, s.c, vm)
	s.waitProvider(ctx, t, ns, "vcenter-dc1", "provider-in-use finalizer removed", func(p *banlieuev1.Provider) bool {
		return !controllerutil.ContainsFinalizer(p, banlieuev1.FinalizerProviderInUse)
	})
}

// testVSphereImageRefused: an image whose vsphere source the provider cannot clone is refused
// with ImageSourceUnsupported naming the field, and no machine is built; fixing the image
// builds it without touching the VM.
func (s *suite) testVSphereImageRefused(ctx context.Context, t *testing.T) {
	ns := "ns-vsphere-refused"
	s.namespace(ctx, t, ns)
	s.vsphereProvider(ctx, t, ns, "vcenter-dc1")
	s.vsphereImage(ctx, t, "tmpl-q", "/dc1/vm/templates/ubuntu-24.04", banlieuev1.InstallDeferred, ns, "vcenter-dc1")
	s.create(ctx, t, guideVM(ns, "db-02", "small", "tmpl-q", nil))
	vm := s.waitVM(ctx, t, ns, "db-02", "Scheduled=False ImageSourceUnsupported", func(vm *banlieuev1.VirtualMachine) bool {
		return hasCondition(vm.Status.Conditions, banlieuev1.ConditionScheduled, metav1.ConditionFalse, banlieuev1.ReasonImageSourceUnsupported) &&
			hasCondition(vm.Status.Conditions, banlieuev1.ConditionReady, metav1.ConditionFalse, banlieuev1.ReasonImageSourceUnsupported)
	})
	want := "VMImage tmpl-q: spec.template.installMode is deferred; a vSphere machine is a clone of its template, so only immediate is supported"
	if got := meta.FindStatusCondition(vm.Status.Conditions, banlieuev1.ConditionScheduled).Message; got != want {
		t.Errorf("message = %q, want %q", got, want)
	}
	time.Sleep(500 * time.Millisecond)
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db-02"}, &infrav1.VSphereMachine{}); !apierrors.IsNotFound(err) {
		t.Errorf("VSphereMachine for a refused image: got %v, want NotFound", err)
	}

	img := &banlieuev1.VMImage{}
	if err := s.c.Get(ctx, client.ObjectKey{Name: "tmpl-q"}, img); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(img.DeepCopy())
	img.Spec.Template.InstallMode = banlieuev1.InstallImmediate
	if err := s.c.Patch(ctx, img, patch); err != nil {
		t.Fatal(err)
	}
	s.waitVSphereMachine(ctx, t, ns, "db-02", "built once the image is fixed", func(m *infrav1.VSphereMachine) bool {
		return m.Spec.Template == "/dc1/vm/templates/ubuntu-24.04"
	})
}

// vsphereProviderManager is the field manager the suite writes as the vsphere provider under.
const vsphereProviderManager = banlieuev1.FieldManagerProviderVSphere

// vsphereProvider registers examples/20's vCenter and publishes one compute cluster as its
// failure domain, as the vsphere provider would.
func (s *suite) vsphereProvider(ctx context.Context, t *testing.T, ns, name string) {
	t.Helper()
	p := &banlieuev1.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: banlieuev1.ProviderSpec{
			ProviderClassRef: banlieuev1.LocalObjectReference{Name: "vsphere"},
			Connection: banlieuev1.ProviderConnection{
				Endpoint:       "https://vcenter.example/sdk",
				CredentialsRef: banlieuev1.LocalObjectReference{Name: "vcenter-dc1-creds"},
				CABundle:       &banlieuev1.CABundleSource{ConfigMapRef: &banlieuev1.KeySelector{Name: "vcenter-dc1-ca"}},
			},
			Capabilities: banlieuev1.ProviderCapabilities{
				StorageClasses: []banlieuev1.StorageClassMapping{{Name: "standard", Target: map[string]string{"datastore": "vsanDatastore"}}},
				NetworkClasses: []banlieuev1.NetworkClassMapping{{Name: "prod", Target: map[string]string{"portGroup": "prod-pg"}}},
			},
		},
	}
	s.create(ctx, t, p)
	status := banlieuev1.ProviderStatus{
		FailureDomains: []banlieuev1.FailureDomain{{
			Name:   "dc1-cluster-a",
			Labels: map[string]string{"topology.kubernetes.io/zone": "cluster-a"},
			Attributes: banlieuev1.FailureDomainAttributes{
				AvailableStorageClasses: []string{"standard"},
				AvailableNetworkClasses: []string{"prod"},
				Raw:                     map[string]string{"datacenter": "dc1", "cluster": "cluster-a"},
			},
		}},
		Conditions: []metav1.Condition{{Type: banlieuev1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Reconciled", LastTransitionTime: metav1.Now()}},
	}
	if err := ssa.ApplyStatus(ctx, s.c, p, &status, vsphereProviderManager); err != nil {
		t.Fatal(err)
	}
}

// vsphereImage is a VMImage with a libvirt Url source and a vsphere Template source, ready on
// the vCenter Provider ns/provider.
func (s *suite) vsphereImage(ctx context.Context, t *testing.T, name, template string, mode banlieuev1.InstallMode, ns, provider string) {
	t.Helper()
	s.create(ctx, t, &banlieuev1.VMImage{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: banlieuev1.VMImageSpec{
			OSFamily: "linux", OSDistribution: "ubuntu", OSVersion: "24.04", Architecture: "amd64", GuestAgent: "cloud-init",
			Sources: []banlieuev1.ImageSource{
				{ProviderClass: "libvirt", Kind: banlieuev1.SourceURL, Ref: "ubuntu-2404",
					ImportFrom: "https://cloud-images.ubuntu.com/noble/current/noble-server-cloudimg-amd64.img"},
				{ProviderClass: "vsphere", Kind: banlieuev1.SourceTemplate, Ref: template},
			},
			Template: &banlieuev1.VMImageTemplate{InstallMode: mode},
		},
	})
	img := &banlieuev1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: name}}
	row := banlieuev1.ProviderImageStatus{ProviderName: provider, ProviderNamespace: ns, Ready: true, Reason: "Reconciled", ResolvedRef: template}
	if err := ssa.ApplyStatus(ctx, s.c, img, &banlieuev1.VMImageStatus{PerProvider: []banlieuev1.ProviderImageStatus{row}}, vsphereProviderManager); err != nil {
		t.Fatal(err)
	}
}

func (s *suite) waitVSphereMachine(ctx context.Context, t *testing.T, ns, name, what string, ok func(*infrav1.VSphereMachine) bool) *infrav1.VSphereMachine {
	t.Helper()
	return poll(ctx, t, s.c, client.ObjectKey{Namespace: ns, Name: name}, &infrav1.VSphereMachine{}, what, ok)
}

func (s *suite) vmUID(ctx context.Context, t *testing.T, ns, name string) types.UID {
	t.Helper()
	var vm banlieuev1.VirtualMachine
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &vm); err != nil {
		t.Fatal(err)
	}
	return vm.UID
}

// equalJSON compares two values by their JSON, as the API server stores them.
func equalJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}
