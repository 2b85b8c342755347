package libvirt

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/provider/libvirt/hostconn"
	"banlieue.io/banlieue/internal/ssa"
	"banlieue.io/banlieue/internal/testenv"
)

// TestMachineAuthorityDuringOutage is what TestFaultLibvirtdIdle (test/hardening) met when the
// authority check was first merged, on the real API server and the real machine reconciler
// with a host it cannot connect to (no credentials, nothing listening at the endpoint) and the
// VMImage row as the provider writes it then: not ready, no resolvedRef. A machine the
// provider accepted before keeps its boot volume, so its pass gets past the check to the host
// and fails there, as ReconcileFailed naming the connection, with its recorded status intact;
// a machine never accepted waits (WaitingForImage); another machine's disk is NotPermitted;
// and a realised machine edited onto an unmapped bridge is refused with nothing but Ready
// changed. No refusal gives a machine a finalizer.
func TestMachineAuthorityDuringOutage(t *testing.T) {
	env := testenv.Start(t)
	testenv.SetLogger(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	mgr := env.NewManager(t)
	conns := hostconn.NewConnections()
	t.Cleanup(conns.Close)
	r := &MachineReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Connections: conns, Resync: time.Second}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)

	const ns, pool = "tenant-y", "vms"
	p := &banlieuev1.Provider{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "down"},
		Spec: banlieuev1.ProviderSpec{
			ProviderClassRef: banlieuev1.LocalObjectReference{Name: ClassName},
			Connection: banlieuev1.ProviderConnection{
				Endpoint:       "qemu+tls://127.0.0.1:1/system",
				CredentialsRef: banlieuev1.LocalObjectReference{Name: "creds"},
			},
			Capabilities: banlieuev1.ProviderCapabilities{
				StorageClasses: []banlieuev1.StorageClassMapping{{Name: "standard", Target: map[string]string{targetPool: pool}}},
			},
		},
	}
	img := &banlieuev1.VMImage{
		ObjectMeta: metav1.ObjectMeta{Name: "tiny"},
		Spec: banlieuev1.VMImageSpec{OSFamily: "linux", OSDistribution: "tiny", OSVersion: "1", Architecture: "amd64",
			Sources: []banlieuev1.ImageSource{{ProviderClass: ClassName, Kind: banlieuev1.SourceBackingFile, Ref: "/images/tiny.raw"}}},
	}
	env.Create(ctx, t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, p, img)
	img.Status.PerProvider = []banlieuev1.ProviderImageStatus{{ProviderNamespace: ns, ProviderName: p.Name,
		Reason: banlieuev1.ReasonVolumeNotFound, Message: "cannot reach the Provider's host to look for volume tiny.raw: connection refused"}}
	if err := env.Client.Status().Update(ctx, img); err != nil {
		t.Fatal(err)
	}

	machine := func(name, volume string) *infrav1.LibvirtMachine {
		return &infrav1.LibvirtMachine{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: infrav1.LibvirtMachineSpec{
				ProviderRef: &infrav1.ProviderReference{Name: p.Name}, Pool: pool, DomainName: ns + "-" + name,
				BootSource: infrav1.BootSource{Kind: infrav1.BootBackingVolume, Volume: volume},
				VCPUs:      1, MemoryMiB: 128, Firmware: banlieuev1.FirmwareBIOS,
				Disks:             []infrav1.LibvirtDisk{{Name: "os", SizeGiB: 1}},
				DesiredPowerState: banlieuev1.PoweredOff,
			},
		}
	}
	ready := func(m *infrav1.LibvirtMachine) metav1.Condition {
		if c := meta.FindStatusCondition(m.Status.Conditions, banlieuev1.ConditionReady); c != nil {
			return *c
		}
		return metav1.Condition{}
	}
	wait := func(t *testing.T, m *infrav1.LibvirtMachine, what string, ok func(*infrav1.LibvirtMachine) bool) *infrav1.LibvirtMachine {
		t.Helper()
		var got infrav1.LibvirtMachine
		testenv.Eventually(t, 30*time.Second, "LibvirtMachine "+m.Name+" "+what, func() error {
			err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), &got)
			return testenv.Unmet(err == nil && ok(&got), ready(&got).Reason+" "+ready(&got).Message)
		})
		return &got
	}

	// A realised machine, its status as the provider recorded it before the host went away.
	const uuid = "6c8f7f2e-1b7a-4d8e-9a55-0c0f6d1e2a3b"
	accepted := machine("accepted", "tiny.raw")
	accepted.Spec.ProviderID = "libvirt://down/" + uuid
	env.Create(ctx, t, accepted)
	recorded := infrav1.LibvirtMachineStatus{
		Initialization:     &banlieuev1.InitializationStatus{Provisioned: ptr.To(false)},
		DomainUUID:         uuid,
		ObservedPowerState: banlieuev1.PoweredOff,
		Volumes:            []string{ns + "-accepted-os.qcow2", ns + "-accepted-cidata.iso"},
		BootVolume:         "tiny.raw",
		ObservedGeneration: accepted.Generation,
	}
	banlieuev1.SetCondition(&recorded.Conditions, accepted.Generation, metav1.Condition{Type: banlieuev1.ConditionReady,
		Status: metav1.ConditionFalse, Reason: infrav1.ReasonDomainNotRunning, Message: "domain is defined but shut off"})
	if err := ssa.ApplyStatus(ctx, env.Client, accepted, &recorded, banlieuev1.FieldManagerProviderLibvirt); err != nil {
		t.Fatal(err)
	}

	keeps := func(t *testing.T, got *infrav1.LibvirtMachine) {
		t.Helper()
		want := recorded.DeepCopy()
		want.Conditions = got.Status.Conditions
		if !equality.Semantic.DeepEqual(want, &got.Status) || got.Spec.ProviderID != accepted.Spec.ProviderID {
			t.Errorf("the recorded status changed:\nwant %+v\n got %+v (providerID %q)", *want, got.Status, got.Spec.ProviderID)
		}
	}

	t.Run("an accepted machine keeps its boot volume and reaches the host", func(t *testing.T) {
		got := wait(t, accepted, "failing at the host", func(m *infrav1.LibvirtMachine) bool {
			c := ready(m)
			return c.Reason == infrav1.ReasonReconcileFailed && strings.HasPrefix(c.Message, `connecting to Provider "down"`)
		})
		keeps(t, got)
	})

	for _, tc := range []struct{ name, volume, reason, msg string }{
		{"fresh", "tiny.raw", infrav1.ReasonWaitingForImage,
			`spec.bootSource.volume: "tiny.raw" is the source of VMImage tiny, whose row for Provider tenant-y/down is not ready; checking again`},
		{"attack", ns + "-accepted-os.qcow2", infrav1.ReasonNotPermitted,
			`invalid spec.bootSource.volume: "tenant-y-accepted-os.qcow2" is not a volume any VMImage resolved to for Provider tenant-y/down and pool "vms"`},
	} {
		t.Run("a machine never accepted: "+tc.reason, func(t *testing.T) {
			m := machine(tc.name, tc.volume)
			env.Create(ctx, t, m)
			got := wait(t, m, tc.reason, func(m *infrav1.LibvirtMachine) bool { return ready(m).Reason == tc.reason })
			if c := ready(got); c.Status != metav1.ConditionFalse || c.Message != tc.msg {
				t.Errorf("Ready %s %q, want False %q", c.Status, c.Message, tc.msg)
			}
			if len(got.Finalizers) > 0 || got.Status.BootVolume != "" || got.Status.DomainUUID != "" {
				t.Errorf("a machine not accepted holds nothing: finalizers %v, status %+v", got.Finalizers, got.Status)
			}
		})
	}

	t.Run("a refusal of a realised machine changes Ready only", func(t *testing.T) {
		var live infrav1.LibvirtMachine
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(accepted), &live); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(live.DeepCopy())
		live.Spec.Network = []infrav1.LibvirtNetworkInterface{{Name: "nic0", Source: infrav1.NetworkSource{Kind: infrav1.SourceBridge, Name: "br-mgmt"}}}
		if err := env.Client.Patch(ctx, &live, patch); err != nil {
			t.Fatal(err)
		}
		got := wait(t, accepted, "NotPermitted", func(m *infrav1.LibvirtMachine) bool {
			c := ready(m)
			return c.Reason == infrav1.ReasonNotPermitted && c.ObservedGeneration == m.Generation
		})
		if want := `invalid spec.network[0].source: bridge "br-mgmt" is not the target of any network class of Provider tenant-y/down`; ready(got).Message != want {
			t.Errorf("Ready %q, want %q", ready(got).Message, want)
		}
		keeps(t, got)
	})
}
