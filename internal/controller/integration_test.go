package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/jobbounds"
	"banlieue.io/banlieue/internal/ssa"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/internal/userdata"
)

// The suite plays the libvirt provider: it writes Provider and LibvirtMachine status and the
// VMImage perProvider rows under the provider's field manager, as the real one would.
const (
	providerManager          = banlieuev1.FieldManagerProviderLibvirt
	finalizerLibvirtMachine  = infrav1.FinalizerLibvirtMachine
	guideProvider            = "libvirt-edge-host-7"
	waitTimeout              = 20 * time.Second
	exportBuildNamespace     = "banlieue-imagebuild"
	guideUserDataRendered    = "#cloud-config\nhostname: web-01\nfqdn: web-01.\npackages: [nginx]\n"
	guideUserDataPlaceholder = "#cloud-config\nhostname: ${VM_NAME}\nfqdn: ${FQDN}\npackages: [nginx]\n"
)

type suite struct {
	c client.Client
	// cfg reaches the API server beside the client, for what the client cannot ask (tables).
	cfg *rest.Config
	// recorder is the manager's, for the passes a test runs itself (expectRequeue).
	recorder events.EventRecorder
}

func TestControllerAgainstAPIServer(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	mgr := env.NewManager(t)
	if err := Setup(mgr, Options{Export: ExportJobs{Namespace: exportBuildNamespace, Image: "registry.example/banlieue:test",
		Bounds: jobbounds.DefaultImport()}}); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)

	s := &suite{c: env.Client, cfg: env.Config, recorder: mgr.GetEventRecorder("banlieue-controller")}
	s.namespace(ctx, t, exportBuildNamespace)
	s.create(ctx, t, guideClass("small", false))
	s.create(ctx, t, guideClass("small-tpm", true))

	t.Run("group", func(t *testing.T) {
		t.Run("a guide VM becomes a LibvirtMachine and mirrors its Ready", func(t *testing.T) { t.Parallel(); s.testGuide(ctx, t) })
		t.Run("b image not ready, then ready without touching the VM", func(t *testing.T) { t.Parallel(); s.testImageNotReady(ctx, t) })
		t.Run("c tpm class pairing and vtpm feature", func(t *testing.T) { t.Parallel(); s.testTPM(ctx, t) })
		t.Run("d unknown provider class", func(t *testing.T) { t.Parallel(); s.testUnknownClass(ctx, t) })
		t.Run("e same VM name in two namespaces", func(t *testing.T) { t.Parallel(); s.testTwoNamespaces(ctx, t) })
		t.Run("f deletion waits for the LibvirtMachine; h provider-in-use", func(t *testing.T) { t.Parallel(); s.testDeletion(ctx, t) })
		t.Run("g userData Secret missing, then key missing", func(t *testing.T) { t.Parallel(); s.testUserDataErrors(ctx, t) })
		t.Run("k a user's Secret under the per-machine name is a conflict", func(t *testing.T) { t.Parallel(); s.testUserDataConflict(ctx, t) })
		t.Run("i manual migration waits for the annotation, then recreates", func(t *testing.T) { t.Parallel(); s.testManualMigration(ctx, t) })
		t.Run("m capacity: too large, spread, cordon", func(t *testing.T) { t.Parallel(); s.testCapacity(ctx, t) })
		t.Run("m datastore space promised to VMs not yet provisioned", func(t *testing.T) { t.Parallel(); s.testDatastorePromised(ctx, t) })
		t.Run("o a drain moves what may move and lists the rest", func(t *testing.T) { t.Parallel(); s.testDrain(ctx, t) })
		t.Run("o a drain moves live VMs with migrations, recreating only what cannot move live", func(t *testing.T) { t.Parallel(); s.testDrainLive(ctx, t) })
		t.Run("p a live migration is validated, placed and handed to the provider", func(t *testing.T) { t.Parallel(); s.testLiveMigration(ctx, t) })
		t.Run("n a retired Provider's image rows are removed", func(t *testing.T) { t.Parallel(); s.testRetiredRows(ctx, t) })
		t.Run("l one event per transition, none for a pass that changes nothing", func(t *testing.T) { t.Parallel(); s.testEvents(ctx, t) })
		t.Run("m a VM created powered off reads Stopped; suspended, Suspended", func(t *testing.T) { t.Parallel(); s.testPowerPhases(ctx, t) })
		t.Run("p a VM on a vsphere Provider becomes a VSphereMachine, mirrors it, holds the Provider", func(t *testing.T) {
			t.Parallel()
			s.testVSphere(ctx, t)
		})
		t.Run("q an image a vsphere Provider cannot clone is refused by field", func(t *testing.T) { t.Parallel(); s.testVSphereImageRefused(ctx, t) })
		t.Run("r a raised disk size reaches the machine; a smaller one is refused", func(t *testing.T) { t.Parallel(); s.testDiskSizes(ctx, t) })
		t.Run("s snapshots reach the machine, within the limit; restores are checked, requested, withdrawn", func(t *testing.T) {
			t.Parallel()
			s.testSnapshots(ctx, t)
		})
		t.Run("s an export is owned by its VM and refused while the VM runs", func(t *testing.T) { t.Parallel(); s.testExport(ctx, t) })
		t.Run("j an image-row message as long as the CRD admits reaches the VM's conditions, bounded", func(t *testing.T) {
			t.Parallel()
			s.testHugeConditionMessage(ctx, t)
		})
	})
}

// testGuide is the guide's section 5 with examples/17 on the Provider of examples/02.
func (s *suite) testGuide(ctx context.Context, t *testing.T) {
	ns := "banlieue-system"
	s.namespace(ctx, t, ns)
	s.provider(ctx, t, ns, guideProvider, "libvirt")
	s.image(ctx, t, "ubuntu-2404", banlieuev1.InstallImmediate, readyRowIn(ns, guideProvider))
	s.create(ctx, t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web-01-user-data", Namespace: ns},
		Data: map[string]string{"user-data": guideUserDataPlaceholder}})
	s.create(ctx, t, guideVM(ns, "web-01", "small", "ubuntu-2404", &banlieuev1.UserDataSource{
		ConfigMapRef: &banlieuev1.KeySelector{Name: "web-01-user-data"}}))

	m := s.waitMachine(ctx, t, ns, "web-01")
	if m.Spec.DomainName != "banlieue-system-web-01" || m.Spec.Pool != "default" ||
		m.Spec.BootSource != (infrav1.BootSource{Kind: infrav1.BootBackingVolume, Volume: "ubuntu-2404.raw"}) ||
		m.Spec.ProviderRef.Name != guideProvider || m.Spec.Network[0].Source != (infrav1.NetworkSource{Kind: infrav1.SourceNetwork, Name: "br-prod"}) {
		t.Fatalf("LibvirtMachine spec = %+v", m.Spec)
	}
	if m.Labels[banlieuev1.LabelOwnedBy] != "web-01" || m.Labels["app"] != "web" || len(m.OwnerReferences) != 1 || !ptr.Deref(m.OwnerReferences[0].Controller, false) {
		t.Fatalf("LibvirtMachine metadata = %+v", m.ObjectMeta)
	}
	s.expectUserDataSecret(ctx, t, m, guideUserDataRendered)
	s.waitVM(ctx, t, ns, "web-01", "Ready=False InfrastructureNotReady", func(vm *banlieuev1.VirtualMachine) bool {
		return hasCondition(vm.Status.Conditions, banlieuev1.ConditionScheduled, metav1.ConditionTrue, banlieuev1.ReasonScheduled) &&
			hasCondition(vm.Status.Conditions, banlieuev1.ConditionInfrastructureReady, metav1.ConditionFalse, banlieuev1.ReasonPending) &&
			hasCondition(vm.Status.Conditions, banlieuev1.ConditionReady, metav1.ConditionFalse, banlieuev1.ReasonInfrastructureNotReady) &&
			vm.Status.Scheduled != nil && vm.Status.Scheduled.ProviderName == guideProvider &&
			vm.Status.InfrastructureRef != nil && vm.Status.InfrastructureRef.Kind == "LibvirtMachine"
	})

	// The provider realises the domain: providerID in the spec, Ready and addresses in status.
	s.applyProviderID(ctx, t, m, "libvirt://"+guideProvider+"/6f1c0f43-7d3c-4c36-9f3f-1b7f0e4a8c11")
	s.machineStatus(ctx, t, m, infrav1.LibvirtMachineStatus{
		Initialization:     &banlieuev1.InitializationStatus{Provisioned: ptr.To(true)},
		Addresses:          []banlieuev1.MachineAddress{{Type: banlieuev1.MachineInternalIP, Address: "192.168.122.50"}},
		ObservedPowerState: banlieuev1.PoweredOn,
		Conditions: []metav1.Condition{{Type: banlieuev1.ConditionReady, Status: metav1.ConditionTrue, Reason: "DomainRunning",
			Message: "domain is running", LastTransitionTime: metav1.Now()}},
	})
	vm := s.waitVM(ctx, t, ns, "web-01", "Ready=True Reconciled", func(vm *banlieuev1.VirtualMachine) bool {
		return hasCondition(vm.Status.Conditions, banlieuev1.ConditionReady, metav1.ConditionTrue, banlieuev1.ReasonReconciled) &&
			hasCondition(vm.Status.Conditions, banlieuev1.ConditionInfrastructureReady, metav1.ConditionTrue, "DomainRunning") &&
			vm.Status.ObservedPowerState == banlieuev1.PoweredOn && len(vm.Status.Addresses) == 1
	})
	if g := meta.FindStatusCondition(vm.Status.Conditions, banlieuev1.ConditionGuestReady); g != nil {
		t.Errorf("GuestReady = %+v, want absent while the machine has none", g)
	}
	s.expectRequeue(ctx, t, ns, "web-01", app.RequeueDefault) // its user-data source is not watched

	// Another pass of the controller (a VM label change) must leave the provider's providerID.
	s.patchVM(ctx, t, ns, "web-01", func(vm *banlieuev1.VirtualMachine) { vm.Labels["tier"] = "front" })
	m = s.waitMachineWhere(ctx, t, ns, "web-01", "label tier propagated", func(m *infrav1.LibvirtMachine) bool { return m.Labels["tier"] == "front" })
	if !strings.HasPrefix(m.Spec.ProviderID, "libvirt://") {
		t.Errorf("providerID = %q after a controller pass, want the provider's value", m.Spec.ProviderID)
	}

	img := s.waitImage(ctx, t, "ubuntu-2404", func(img *banlieuev1.VMImage) bool {
		return hasCondition(img.Status.Conditions, banlieuev1.ConditionReady, metav1.ConditionTrue, banlieuev1.ReasonReconciled)
	})
	if len(img.Status.PerProvider) != 1 {
		t.Errorf("perProvider rows = %+v, want the provider's row kept", img.Status.PerProvider)
	}
	s.waitProvider(ctx, t, ns, guideProvider, "provider-in-use finalizer", func(p *banlieuev1.Provider) bool {
		return controllerutil.ContainsFinalizer(p, banlieuev1.FinalizerProviderInUse)
	})
}

func (s *suite) testImageNotReady(ctx context.Context, t *testing.T) {
	ns := "ns-b"
	s.namespace(ctx, t, ns)
	s.provider(ctx, t, ns, "host", "libvirt")
	notReady := banlieuev1.ProviderImageStatus{ProviderName: "host", ProviderNamespace: ns, Ready: false, Reason: "Importing", Message: "import Job running"}
	s.image(ctx, t, "img-b", banlieuev1.InstallImmediate, notReady)
	s.create(ctx, t, guideVM(ns, "web-01", "small", "img-b", nil))
	s.waitVM(ctx, t, ns, "web-01", "Scheduled=False ImageNotReady", func(vm *banlieuev1.VirtualMachine) bool {
		return hasCondition(vm.Status.Conditions, banlieuev1.ConditionScheduled, metav1.ConditionFalse, banlieuev1.ReasonImageNotReady) &&
			hasCondition(vm.Status.Conditions, banlieuev1.ConditionReady, metav1.ConditionFalse, banlieuev1.ReasonScheduling)
	})
	s.waitImage(ctx, t, "img-b", func(img *banlieuev1.VMImage) bool {
		return hasCondition(img.Status.Conditions, banlieuev1.ConditionReady, metav1.ConditionFalse, "Importing")
	})
	s.expectRequeue(ctx, t, ns, "web-01", app.RequeueDefault)
	// Well within the 30 s default requeue: only the VMImage watch can explain a quick pickup.
	start := time.Now()
	s.imageRows(ctx, t, "img-b", readyRowIn(ns, "host"))
	s.waitMachine(ctx, t, ns, "web-01")
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("LibvirtMachine appeared %s after the image became ready; the VMImage watch should be immediate", d)
	}
	s.waitVM(ctx, t, ns, "web-01", "Scheduled=True", func(vm *banlieuev1.VirtualMachine) bool {
		return hasCondition(vm.Status.Conditions, banlieuev1.ConditionScheduled, metav1.ConditionTrue, banlieuev1.ReasonScheduled)
	})
	s.expectRequeue(ctx, t, ns, "web-01", app.RequeueLong) // converged, and everything it reads is watched
}

func (s *suite) testTPM(ctx context.Context, t *testing.T) {
	ns := "ns-c"
	s.namespace(ctx, t, ns)
	s.provider(ctx, t, ns, "host", "libvirt")
	s.image(ctx, t, "img-c-immediate", banlieuev1.InstallImmediate, readyRowIn(ns, "host"))
	s.image(ctx, t, "img-c-deferred", banlieuev1.InstallDeferred, readyRowIn(ns, "host"))

	s.create(ctx, t, guideVM(ns, "sealed-01", "small-tpm", "img-c-immediate", nil))
	vm := s.waitVM(ctx, t, ns, "sealed-01", "Ready=False ImageClassMismatch", func(vm *banlieuev1.VirtualMachine) bool {
		return hasCondition(vm.Status.Conditions, banlieuev1.ConditionReady, metav1.ConditionFalse, banlieuev1.ReasonImageClassMismatch)
	})
	msg := meta.FindStatusCondition(vm.Status.Conditions, banlieuev1.ConditionReady).Message
	for _, want := range []string{"small-tpm", "img-c-immediate", "ADR-0040", "ADR-0048"} {
		if !strings.Contains(msg, want) {
			t.Errorf("ImageClassMismatch message %q lacks %q", msg, want)
		}
	}
	if c := meta.FindStatusCondition(vm.Status.Conditions, banlieuev1.ConditionScheduled); c != nil {
		t.Errorf("Scheduled = %+v, want untouched", c)
	}
	s.expectNoMachine(ctx, t, ns, "sealed-01")

	s.create(ctx, t, guideVM(ns, "sealed-02", "small-tpm", "img-c-deferred", nil))
	vm = s.waitVM(ctx, t, ns, "sealed-02", "Scheduled=False TpmUnsupported", func(vm *banlieuev1.VirtualMachine) bool {
		return hasCondition(vm.Status.Conditions, banlieuev1.ConditionScheduled, metav1.ConditionFalse, banlieuev1.ReasonTpmUnsupported)
	})
	if msg := meta.FindStatusCondition(vm.Status.Conditions, banlieuev1.ConditionScheduled).Message; !strings.Contains(msg, "vtpm") {
		t.Errorf("TpmUnsupported message %q does not name vtpm", msg)
	}
	s.expectNoMachine(ctx, t, ns, "sealed-02")
}

func (s *suite) testUnknownClass(ctx context.Context, t *testing.T) {
	ns := "ns-d"
	s.namespace(ctx, t, ns)
	s.provider(ctx, t, ns, "hyperv-1", "hyperv")
	s.image(ctx, t, "img-d", banlieuev1.InstallImmediate, readyRowIn(ns, "hyperv-1"))
	s.create(ctx, t, guideVM(ns, "web-01", "small", "img-d", nil))
	vm := s.waitVM(ctx, t, ns, "web-01", "Scheduled=False InfraBuildFailed", func(vm *banlieuev1.VirtualMachine) bool {
		return hasCondition(vm.Status.Conditions, banlieuev1.ConditionScheduled, metav1.ConditionFalse, banlieuev1.ReasonInfraBuildFailed) &&
			hasCondition(vm.Status.Conditions, banlieuev1.ConditionReady, metav1.ConditionFalse, banlieuev1.ReasonInfraBuildFailed)
	})
	want := "provider class 'hyperv' has no infrastructure builder in banlieue-controller"
	if got := meta.FindStatusCondition(vm.Status.Conditions, banlieuev1.ConditionScheduled).Message; got != want {
		t.Errorf("message = %q, want %q", got, want)
	}
	s.expectNoMachine(ctx, t, ns, "web-01")
}

func (s *suite) testTwoNamespaces(ctx context.Context, t *testing.T) {
	s.namespace(ctx, t, "ns-e1")
	s.namespace(ctx, t, "ns-e2")
	s.provider(ctx, t, "ns-e1", "host", "libvirt")
	s.provider(ctx, t, "ns-e2", "host", "libvirt")
	s.image(ctx, t, "img-e", banlieuev1.InstallImmediate, readyRowIn("ns-e1", "host"), readyRowIn("ns-e2", "host"))
	s.create(ctx, t, guideVM("ns-e1", "web-01", "small", "img-e", nil))
	s.create(ctx, t, guideVM("ns-e2", "web-01", "small", "img-e", nil))
	m1 := s.waitMachine(ctx, t, "ns-e1", "web-01")
	m2 := s.waitMachine(ctx, t, "ns-e2", "web-01")
	if m1.Spec.DomainName != "ns-e1-web-01" || m2.Spec.DomainName != "ns-e2-web-01" {
		t.Errorf("domain names = %s, %s", m1.Spec.DomainName, m2.Spec.DomainName)
	}
}

func (s *suite) testDeletion(ctx context.Context, t *testing.T) {
	ns := "ns-f"
	s.namespace(ctx, t, ns)
	s.provider(ctx, t, ns, "host", "libvirt")
	s.image(ctx, t, "img-f", banlieuev1.InstallImmediate, readyRowIn(ns, "host"))
	s.create(ctx, t, guideVM(ns, "web-01", "small", "img-f", nil))
	m := s.waitMachine(ctx, t, ns, "web-01")
	// The provider's finalizer, which it removes once the domain is gone.
	patchMachine(ctx, t, s.c, m, func(m *infrav1.LibvirtMachine) { controllerutil.AddFinalizer(m, finalizerLibvirtMachine) })
	s.waitProvider(ctx, t, ns, "host", "provider-in-use finalizer added", func(p *banlieuev1.Provider) bool {
		return controllerutil.ContainsFinalizer(p, banlieuev1.FinalizerProviderInUse)
	})

	vm := &banlieuev1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "web-01", Namespace: ns}}
	if err := s.c.Delete(ctx, vm); err != nil {
		t.Fatal(err)
	}
	m = s.waitMachineWhere(ctx, t, ns, "web-01", "machine terminating", func(m *infrav1.LibvirtMachine) bool { return !m.DeletionTimestamp.IsZero() })
	s.waitVM(ctx, t, ns, "web-01", "VM held with Ready=False Deleting", func(vm *banlieuev1.VirtualMachine) bool {
		return !vm.DeletionTimestamp.IsZero() && hasCondition(vm.Status.Conditions, banlieuev1.ConditionReady, metav1.ConditionFalse, banlieuev1.ReasonDeleting)
	})
	time.Sleep(time.Second)
	if err := s.c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
		t.Fatalf("VM gone while its LibvirtMachine still exists: %v", err)
	}
	// A cache that has not seen the machine must not release the VM: "absent" is read live.
	lagging := &virtualMachineReconciler{client: withoutMachines{s.c}, apiReader: s.c, recorder: s.recorder,
		assumed: newAssumedPlacements(), applied: newAppliedMachines()}
	testenv.Eventually(t, waitTimeout, "a pass over a cache without the machine", func() error {
		_, err := lagging.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(vm)})
		return err
	})
	if err := s.c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil || !controllerutil.ContainsFinalizer(vm, banlieuev1.FinalizerVirtualMachine) {
		t.Fatalf("a pass whose cache lacked the machine released the VM while its LibvirtMachine still exists (err %v)", err)
	}

	patchMachine(ctx, t, s.c, m, func(m *infrav1.LibvirtMachine) { controllerutil.RemoveFinalizer(m, finalizerLibvirtMachine) })
	waitGone(ctx, t, s.c, vm)
	s.waitProvider(ctx, t, ns, "host", "provider-in-use finalizer removed", func(p *banlieuev1.Provider) bool {
		return !controllerutil.ContainsFinalizer(p, banlieuev1.FinalizerProviderInUse)
	})
}

// withoutMachines is a cache that has not yet seen any LibvirtMachine, as one that lags behind a
// machine created a moment ago.
type withoutMachines struct{ client.Client }

func (c withoutMachines) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*infrav1.LibvirtMachine); ok {
		return apierrors.NewNotFound(infrav1.GroupVersion.WithResource("libvirtmachines").GroupResource(), key.Name)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (s *suite) testUserDataErrors(ctx context.Context, t *testing.T) {
	ns := "ns-g"
	s.namespace(ctx, t, ns)
	s.provider(ctx, t, ns, "host", "libvirt")
	s.image(ctx, t, "img-g", banlieuev1.InstallImmediate, readyRowIn(ns, "host"))
	s.create(ctx, t, guideVM(ns, "web-01", "small", "img-g", &banlieuev1.UserDataSource{SecretRef: &banlieuev1.KeySelector{Name: "web-01-seed"}}))
	s.waitScheduledMessage(ctx, t, ns, "web-01", "spec.userData.secretRef: Secret ns-g/web-01-seed not found")
	s.expectNoMachine(ctx, t, ns, "web-01")

	// A Secret that has not opted in is never copied: a clear reason, and nothing is created.
	seed := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "web-01-seed", Namespace: ns},
		Data: map[string][]byte{"userdata": []byte("#cloud-config\n")}}
	s.create(ctx, t, seed)
	s.waitVMReason(ctx, t, ns, "web-01", banlieuev1.ReasonUserDataNotOptedIn,
		`spec.userData.secretRef: Secret ns-g/web-01-seed does not carry the label banlieue.io/user-data: "true", so it is not copied into the guest; label it to opt in`)
	s.expectNoMachine(ctx, t, ns, "web-01")
	s.expectNoUserDataSecret(ctx, t, ns, "web-01")

	seed.Labels = map[string]string{banlieuev1.LabelUserData: "true"}
	if err := s.c.Update(ctx, seed); err != nil {
		t.Fatal(err)
	}
	s.waitScheduledMessage(ctx, t, ns, "web-01", `spec.userData.secretRef: key "user-data" not found in Secret ns-g/web-01-seed`)

	s.patchVM(ctx, t, ns, "web-01", func(vm *banlieuev1.VirtualMachine) { vm.Spec.UserData.SecretRef.Key = "userdata" })
	m := s.waitMachine(ctx, t, ns, "web-01")
	first := s.expectUserDataSecret(ctx, t, m, "#cloud-config\n")

	// An edit of the source reaches the per-machine Secret, and changes the machine's hash (so
	// its generation) without putting the content in it.
	seed.Data["userdata"] = []byte("#cloud-config\nhostname: changed\n")
	if err := s.c.Update(ctx, seed); err != nil {
		t.Fatal(err)
	}
	// Secrets are not watched: the next pass carries the edit, here one a VM edit brings
	// rather than the 30 s requeue a VM with user-data keeps (convergedRequeue).
	s.patchVM(ctx, t, ns, "web-01", func(vm *banlieuev1.VirtualMachine) { vm.Labels["edited"] = "1" })
	m = s.waitMachineWhere(ctx, t, ns, "web-01", "a new userDataHash", func(n *infrav1.LibvirtMachine) bool {
		return n.Spec.UserDataHash != m.Spec.UserDataHash
	})
	second := s.expectUserDataSecret(ctx, t, m, "#cloud-config\nhostname: changed\n")
	if string(second.Data[userdata.KeySalt]) != string(first.Data[userdata.KeySalt]) {
		t.Errorf("the salt changed with the content; it must stay so the same content keeps its hash")
	}

	// The user-data removed: the machine drops its reference and its copy is deleted.
	s.patchVM(ctx, t, ns, "web-01", func(vm *banlieuev1.VirtualMachine) { vm.Spec.UserData = nil })
	s.waitMachineWhere(ctx, t, ns, "web-01", "no userDataSecretRef", func(n *infrav1.LibvirtMachine) bool {
		return n.Spec.UserDataSecretRef == nil && n.Spec.UserDataHash == ""
	})
	s.expectNoUserDataSecret(ctx, t, ns, "web-01")
}

// testUserDataConflict: a Secret of the user's under the per-machine name is never overwritten.
func (s *suite) testUserDataConflict(ctx context.Context, t *testing.T) {
	ns := "ns-k"
	s.namespace(ctx, t, ns)
	s.provider(ctx, t, ns, "host", "libvirt")
	s.image(ctx, t, "img-k", banlieuev1.InstallImmediate, readyRowIn(ns, "host"))
	name := userdata.SecretName("web-01")
	s.create(ctx, t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string][]byte{"mine": []byte("x")}})
	s.create(ctx, t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ud", Namespace: ns}, Data: map[string]string{"user-data": "#cloud-config\n"}})
	s.create(ctx, t, guideVM(ns, "web-01", "small", "img-k", &banlieuev1.UserDataSource{ConfigMapRef: &banlieuev1.KeySelector{Name: "ud"}}))
	s.waitVMReason(ctx, t, ns, "web-01", banlieuev1.ReasonUserDataConflict, fmt.Sprintf(
		"spec.userData: the machine's user-data Secret ns-k/%s exists and is not banlieue's (no controller reference to LibvirtMachine web-01); it is left alone: rename or delete it", name))
	var got corev1.Secret
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &got); err != nil {
		t.Fatal(err)
	}
	if string(got.Data["mine"]) != "x" || len(got.Data) != 1 || len(got.OwnerReferences) != 0 {
		t.Errorf("the user's Secret was changed: %+v", got)
	}
	s.expectNoMachine(ctx, t, ns, "web-01")
}

// expectUserDataSecret checks that m carries only a reference and a hash, and that the Secret it
// names holds content, is controlled by m (garbage collection removes it with the machine; envtest
// runs no garbage collector, so the owner reference is what is asserted) and is labelled as
// banlieue's. It returns the Secret.
func (s *suite) expectUserDataSecret(ctx context.Context, t *testing.T, m *infrav1.LibvirtMachine, content string) *corev1.Secret {
	t.Helper()
	if m.Spec.UserDataSecretRef == nil || m.Spec.UserDataSecretRef.Name != userdata.SecretName(m.Name) || len(m.Spec.UserDataHash) != 64 {
		t.Fatalf("LibvirtMachine user-data reference = %+v, hash %q", m.Spec.UserDataSecretRef, m.Spec.UserDataHash)
	}
	// Nothing of the content is in the custom resource, whatever field it might hide in.
	raw := &unstructured.Unstructured{}
	raw.SetGroupVersionKind(infrav1.GroupVersion.WithKind("LibvirtMachine"))
	if err := s.c.Get(ctx, client.ObjectKeyFromObject(m), raw); err != nil {
		t.Fatal(err)
	}
	if js, err := json.Marshal(raw.Object); err != nil {
		t.Fatal(err)
	} else if strings.Contains(string(js), strings.TrimSpace(content)) || strings.Contains(string(js), `"userData"`) {
		t.Errorf("the LibvirtMachine carries user-data: %s", js)
	}
	var sec corev1.Secret
	testenv.Eventually(t, waitTimeout, "the per-machine user-data Secret holds the content", func() error {
		if err := s.c.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.UserDataSecretRef.Name}, &sec); err != nil {
			return err
		}
		return testenv.Unmet(string(sec.Data[userdata.KeyUserData]) == content &&
			userdata.Matches(sec.Data[userdata.KeySalt], sec.Data[userdata.KeyUserData], m.Spec.UserDataHash),
			fmt.Sprintf("data %q", sec.Data[userdata.KeyUserData]))
	})
	if !metav1.IsControlledBy(&sec, m) || sec.OwnerReferences[0].Kind != "LibvirtMachine" {
		t.Errorf("user-data Secret owner references = %+v, want the controller reference to LibvirtMachine %s (uid %s)", sec.OwnerReferences, m.Name, m.UID)
	}
	if sec.Labels[banlieuev1.LabelUserData] != userdata.LabelValueMachine || sec.Labels[banlieuev1.LabelManagedBy] != "banlieue-controller" {
		t.Errorf("user-data Secret labels = %v", sec.Labels)
	}
	return &sec
}

func (s *suite) expectNoUserDataSecret(ctx context.Context, t *testing.T, ns, machine string) {
	t.Helper()
	testenv.Eventually(t, waitTimeout, "no per-machine user-data Secret", func() error {
		err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: userdata.SecretName(machine)}, &corev1.Secret{})
		return testenv.Unmet(apierrors.IsNotFound(err), fmt.Sprintf("get: %v", err))
	})
}

// waitVMReason waits for Scheduled=False and Ready=False with reason and msg.
func (s *suite) waitVMReason(ctx context.Context, t *testing.T, ns, name, reason, msg string) {
	t.Helper()
	s.waitVM(ctx, t, ns, name, reason+": "+msg, func(vm *banlieuev1.VirtualMachine) bool {
		c := meta.FindStatusCondition(vm.Status.Conditions, banlieuev1.ConditionScheduled)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == reason && c.Message == msg &&
			hasCondition(vm.Status.Conditions, banlieuev1.ConditionReady, metav1.ConditionFalse, reason)
	})
}

func (s *suite) testManualMigration(ctx context.Context, t *testing.T) {
	ns := "ns-i"
	s.namespace(ctx, t, ns)
	s.provider(ctx, t, ns, "host", "libvirt")
	s.image(ctx, t, "img-i", banlieuev1.InstallImmediate, readyRowIn(ns, "host"))
	vm := guideVM(ns, "web-01", "small", "img-i", nil)
	vm.Spec.MigrationPolicy = migrationManual
	s.create(ctx, t, vm)
	s.waitMachineWhere(ctx, t, ns, "web-01", "pool default", func(m *infrav1.LibvirtMachine) bool { return m.Spec.Pool == "default" })

	// The admin remaps standard to another pool: the machine's pool no longer matches.
	var p banlieuev1.Provider
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "host"}, &p); err != nil {
		t.Fatal(err)
	}
	orig := p.DeepCopy()
	p.Spec.Capabilities.StorageClasses[1].Target = map[string]string{"pool": "fast"}
	if err := s.c.Patch(ctx, &p, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	s.waitVM(ctx, t, ns, "web-01", "PlacementValid=False StorageMappingChanged", func(vm *banlieuev1.VirtualMachine) bool {
		return hasCondition(vm.Status.Conditions, banlieuev1.ConditionPlacementValid, metav1.ConditionFalse, banlieuev1.ReasonStorageMappingChanged) &&
			hasCondition(vm.Status.Conditions, banlieuev1.ConditionReady, metav1.ConditionFalse, banlieuev1.ReasonPlacementInvalid)
	})
	if m := s.waitMachine(ctx, t, ns, "web-01"); m.Spec.Pool != "default" || !m.DeletionTimestamp.IsZero() {
		t.Fatalf("machine changed without the migrate annotation: pool %s, deleting %v", m.Spec.Pool, !m.DeletionTimestamp.IsZero())
	}

	s.patchVM(ctx, t, ns, "web-01", func(vm *banlieuev1.VirtualMachine) {
		vm.Annotations = map[string]string{banlieuev1.AnnotationMigrate: "true"}
	})
	s.waitMachineWhere(ctx, t, ns, "web-01", "recreated in pool fast", func(m *infrav1.LibvirtMachine) bool { return m.Spec.Pool == "fast" })
	s.waitVM(ctx, t, ns, "web-01", "PlacementValid=True", func(vm *banlieuev1.VirtualMachine) bool {
		return hasCondition(vm.Status.Conditions, banlieuev1.ConditionPlacementValid, metav1.ConditionTrue, banlieuev1.ReasonReconciled) &&
			vm.Status.Scheduled.ResolvedStorage[0].BackendID == "fast"
	})
}

// --- fixtures -------------------------------------------------------------------------------

func guideClass(name string, tpm bool) *banlieuev1.VMClass {
	c := testClass()
	c.ObjectMeta = metav1.ObjectMeta{Name: name}
	c.Spec.TPMEnabled = tpm
	c.Spec.Network.Interfaces[0].IPAM = banlieuev1.IpamShape{}
	return c
}

func guideVM(ns, name, class, image string, userData *banlieuev1.UserDataSource) *banlieuev1.VirtualMachine {
	return &banlieuev1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "web"}},
		Spec: banlieuev1.VirtualMachineSpec{
			ClassRef:          banlieuev1.LocalObjectReference{Name: class},
			ImageRef:          banlieuev1.LocalObjectReference{Name: image},
			DesiredPowerState: banlieuev1.PoweredOn,
			MigrationPolicy:   "never",
			UserData:          userData,
		},
	}
}

func readyRowIn(ns, provider string) banlieuev1.ProviderImageStatus {
	return banlieuev1.ProviderImageStatus{ProviderName: provider, ProviderNamespace: ns, Ready: true, Reason: "Reconciled", ResolvedRef: "ubuntu-2404.raw"}
}

func (s *suite) create(ctx context.Context, t *testing.T, obj client.Object) {
	t.Helper()
	if err := s.c.Create(ctx, obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

func (s *suite) namespace(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	s.create(ctx, t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

// provider creates the guide's Provider and publishes the failure domain the real provider
// would after narrowing (gold dropped: the host has no nvme-pool).
func (s *suite) provider(ctx context.Context, t *testing.T, ns, name, class string) {
	t.Helper()
	p := &banlieuev1.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: banlieuev1.ProviderSpec{
			ProviderClassRef: banlieuev1.LocalObjectReference{Name: class},
			Connection: banlieuev1.ProviderConnection{
				Endpoint:       "qemu+tls://kvm-7.edge.example/system",
				CredentialsRef: banlieuev1.LocalObjectReference{Name: "libvirt-edge-creds"},
				CABundle:       &banlieuev1.CABundleSource{ConfigMapRef: &banlieuev1.KeySelector{Name: "libvirt-edge-ca"}},
			},
			Capabilities: banlieuev1.ProviderCapabilities{
				StorageClasses: []banlieuev1.StorageClassMapping{
					{Name: "gold", Target: map[string]string{"pool": "nvme-pool"}},
					{Name: "standard", Target: map[string]string{"pool": "default"}},
				},
				NetworkClasses: []banlieuev1.NetworkClassMapping{{Name: "prod", Target: map[string]string{"network": "br-prod"}}},
			},
		},
	}
	s.create(ctx, t, p)
	status := banlieuev1.ProviderStatus{
		FailureDomains: []banlieuev1.FailureDomain{{
			Name:   name,
			Labels: map[string]string{"name": name},
			Attributes: banlieuev1.FailureDomainAttributes{
				AvailableStorageClasses: []string{"standard"},
				AvailableNetworkClasses: []string{"prod"},
				Raw:                     map[string]string{"domainType": "kvm"},
			},
		}},
		Conditions: []metav1.Condition{{Type: banlieuev1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Reconciled", LastTransitionTime: metav1.Now()}},
	}
	if err := ssa.ApplyStatus(ctx, s.c, p, &status, providerManager); err != nil {
		t.Fatal(err)
	}
}

func (s *suite) image(ctx context.Context, t *testing.T, name string, mode banlieuev1.InstallMode, rows ...banlieuev1.ProviderImageStatus) {
	t.Helper()
	s.create(ctx, t, &banlieuev1.VMImage{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: banlieuev1.VMImageSpec{
			OSFamily: "linux", OSDistribution: "ubuntu", OSVersion: "24.04", Architecture: "amd64", GuestAgent: "cloud-init",
			Sources: []banlieuev1.ImageSource{{ProviderClass: "libvirt", Kind: banlieuev1.SourceURL, Ref: "ubuntu-2404",
				ImportFrom: "https://cloud-images.ubuntu.com/noble/current/noble-server-cloudimg-amd64.img"}},
			Template: &banlieuev1.VMImageTemplate{InstallMode: mode},
		},
	})
	s.imageRows(ctx, t, name, rows...)
}

// imageRows writes the perProvider rows as the provider does: its own rows only.
func (s *suite) imageRows(ctx context.Context, t *testing.T, name string, rows ...banlieuev1.ProviderImageStatus) {
	t.Helper()
	img := &banlieuev1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := ssa.ApplyStatus(ctx, s.c, img, &banlieuev1.VMImageStatus{PerProvider: rows}, providerManager); err != nil {
		t.Fatal(err)
	}
}

func (s *suite) machineStatus(ctx context.Context, t *testing.T, m *infrav1.LibvirtMachine, status infrav1.LibvirtMachineStatus) {
	t.Helper()
	if err := ssa.ApplyStatus(ctx, s.c, m, &status, providerManager); err != nil {
		t.Fatal(err)
	}
}

// applyProviderID sets spec.providerID under the provider's manager, as the provider does after
// the first define.
func (s *suite) applyProviderID(ctx context.Context, t *testing.T, m *infrav1.LibvirtMachine, id string) {
	t.Helper()
	patch := fmt.Sprintf(`{"apiVersion":"infrastructure.banlieue.io/v1alpha1","kind":"LibvirtMachine","metadata":{"name":%q,"namespace":%q},"spec":{"providerID":%q}}`,
		m.Name, m.Namespace, id)
	target := &infrav1.LibvirtMachine{ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace}}
	if err := s.c.Patch(ctx, target, client.RawPatch("application/apply-patch+yaml", []byte(patch)),
		client.FieldOwner(providerManager), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
}

func (s *suite) patchVM(ctx context.Context, t *testing.T, ns, name string, mutate func(*banlieuev1.VirtualMachine)) {
	t.Helper()
	var vm banlieuev1.VirtualMachine
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &vm); err != nil {
		t.Fatal(err)
	}
	orig := vm.DeepCopy()
	mutate(&vm)
	if err := s.c.Patch(ctx, &vm, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
}

func patchMachine(ctx context.Context, t *testing.T, c client.Client, m *infrav1.LibvirtMachine, mutate func(*infrav1.LibvirtMachine)) {
	t.Helper()
	var cur infrav1.LibvirtMachine
	if err := c.Get(ctx, client.ObjectKeyFromObject(m), &cur); err != nil {
		t.Fatal(err)
	}
	orig := cur.DeepCopy()
	mutate(&cur)
	if err := c.Patch(ctx, &cur, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		t.Fatal(err)
	}
}

// --- waiting --------------------------------------------------------------------------------

func poll[T client.Object](ctx context.Context, t *testing.T, c client.Client, key client.ObjectKey, obj T, what string, ok func(T) bool) T {
	t.Helper()
	testenv.Eventually(t, waitTimeout, fmt.Sprintf("%T %s: %s", obj, key, what), func() error {
		err := c.Get(ctx, key, obj)
		return testenv.Unmet(err == nil && ok(obj), fmt.Sprintf("seen %+v (%v)", obj, err))
	})
	return obj
}

func (s *suite) waitVM(ctx context.Context, t *testing.T, ns, name, what string, ok func(*banlieuev1.VirtualMachine) bool) *banlieuev1.VirtualMachine {
	t.Helper()
	return poll(ctx, t, s.c, client.ObjectKey{Namespace: ns, Name: name}, &banlieuev1.VirtualMachine{}, what, ok)
}

func (s *suite) waitScheduledMessage(ctx context.Context, t *testing.T, ns, name, msg string) {
	t.Helper()
	s.waitVM(ctx, t, ns, name, "InfraBuildFailed: "+msg, func(vm *banlieuev1.VirtualMachine) bool {
		c := meta.FindStatusCondition(vm.Status.Conditions, banlieuev1.ConditionScheduled)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == banlieuev1.ReasonInfraBuildFailed && c.Message == msg &&
			hasCondition(vm.Status.Conditions, banlieuev1.ConditionReady, metav1.ConditionFalse, banlieuev1.ReasonInfraBuildFailed)
	})
}

func (s *suite) waitMachine(ctx context.Context, t *testing.T, ns, name string) *infrav1.LibvirtMachine {
	t.Helper()
	return s.waitMachineWhere(ctx, t, ns, name, "exists", func(*infrav1.LibvirtMachine) bool { return true })
}

func (s *suite) waitMachineWhere(ctx context.Context, t *testing.T, ns, name, what string, ok func(*infrav1.LibvirtMachine) bool) *infrav1.LibvirtMachine {
	t.Helper()
	return poll(ctx, t, s.c, client.ObjectKey{Namespace: ns, Name: name}, &infrav1.LibvirtMachine{}, what, ok)
}

func (s *suite) waitImage(ctx context.Context, t *testing.T, name string, ok func(*banlieuev1.VMImage) bool) *banlieuev1.VMImage {
	t.Helper()
	return poll(ctx, t, s.c, client.ObjectKey{Name: name}, &banlieuev1.VMImage{}, "aggregate Ready", ok)
}

func (s *suite) waitProvider(ctx context.Context, t *testing.T, ns, name, what string, ok func(*banlieuev1.Provider) bool) {
	t.Helper()
	poll(ctx, t, s.c, client.ObjectKey{Namespace: ns, Name: name}, &banlieuev1.Provider{}, what, ok)
}

// expectNoMachine checks, after the VM has reported, that no machine was created for it.
func (s *suite) expectNoMachine(ctx context.Context, t *testing.T, ns, name string) {
	t.Helper()
	time.Sleep(500 * time.Millisecond)
	err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &infrav1.LibvirtMachine{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("LibvirtMachine %s/%s: got %v, want NotFound", ns, name, err)
	}
}

func waitGone(ctx context.Context, t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	testenv.Eventually(t, waitTimeout, fmt.Sprintf("%T %s gone", obj, obj.GetName()), func() error {
		err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		return testenv.Unmet(apierrors.IsNotFound(err), fmt.Sprintf("still present (%v): %+v", err, obj))
	})
}

func hasCondition(conds []metav1.Condition, typ string, st metav1.ConditionStatus, reason string) bool {
	c := meta.FindStatusCondition(conds, typ)
	return c != nil && c.Status == st && c.Reason == reason
}
