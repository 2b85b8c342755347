package vm

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
)

// TestDrainOnLab drains a Provider whose VMs run on the lab libvirtd: a second Provider on the
// same host (another name, the same pool) takes the running VM whose migrationPolicy is
// recreate, which runs again there from its image; the powered-off VM under never keeps its
// domain (the same UUID) and is listed MigrationPolicyNever, and the drain ends Blocked.
func TestDrainOnLab(t *testing.T) {
	ctx, s := newSuite(t)
	ex := loadExample17(t)
	img := ex.image
	img.Spec.Sources = []banlieuev1.ImageSource{{ProviderClass: "libvirt", Kind: banlieuev1.SourceBackingFile, Ref: "/images/" + s.diskVol}}
	small := ex.class
	small.Name, small.Spec.Firmware = "drain-small", banlieuev1.FirmwareBIOS
	small.Spec.Hardware.CPUs, small.Spec.Hardware.MemoryMiB = 1, 256
	small.Spec.Network.Interfaces = nil
	ex.userData.Namespace = s.ns
	ex.userData.Data["user-data"] = userData
	// The second host is cordoned until the drain, so both VMs are placed on the first.
	second := s.provider()
	second.Name = "libvirt-lab-b"
	second.Spec.Unschedulable = true
	for _, obj := range []client.Object{img, small, ex.userData, second} {
		if err := s.env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}

	moved := vmLike(ex.vm, "moved-01", small.Name, img.Name)
	moved.Namespace, moved.Spec.MigrationPolicy = s.ns, "recreate"
	kept := vmLike(ex.vm, "kept-01", small.Name, img.Name)
	kept.Namespace, kept.Spec.MigrationPolicy, kept.Spec.DesiredPowerState = s.ns, "never", banlieuev1.PoweredOff
	for _, vm := range []*banlieuev1.VirtualMachine{moved, kept} {
		if err := s.env.Client.Create(ctx, vm); err != nil {
			t.Fatal(err)
		}
	}
	s.waitVMReady(ctx, t, moved)
	s.waitVMPower(ctx, t, kept, banlieuev1.PoweredOff)
	before := map[string]string{}
	for _, vm := range []*banlieuev1.VirtualMachine{moved, kept} {
		m := s.machine(ctx, t, vm)
		if m.Spec.ProviderRef.Name != "libvirt-edge-host-7" || m.Status.DomainUUID == "" {
			t.Fatalf("%s: machine on %s, domain %q; want a domain on libvirt-edge-host-7", vm.Name, m.Spec.ProviderRef.Name, m.Status.DomainUUID)
		}
		before[vm.Name] = m.Status.DomainUUID
	}

	start := time.Now()
	patchProvider(ctx, t, s.env.Client, s.ns, second.Name, func(p *banlieuev1.Provider) { p.Spec.Unschedulable = false })
	patchProvider(ctx, t, s.env.Client, s.ns, "libvirt-edge-host-7", func(p *banlieuev1.Provider) {
		p.Spec.Unschedulable, p.Spec.Drain = true, &banlieuev1.ProviderDrain{MaxConcurrent: ptr.To[int32](2)}
	})
	var st *banlieuev1.ProviderDrainStatus
	testenv.Eventually(t, 3*time.Minute, "the drain Blocked with kept-01 alone left", func() error {
		var p banlieuev1.Provider
		if err := s.env.Client.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: "libvirt-edge-host-7"}, &p); err != nil {
			return err
		}
		st = p.Status.Drain
		return testenv.Unmet(st != nil && st.Phase == banlieuev1.DrainBlocked && st.Remaining == 1, fmt.Sprintf("%+v", st))
	})
	if len(st.Blocked) != 1 || st.Blocked[0].Name != kept.Name || st.Blocked[0].Reason != banlieuev1.ReasonDrainMigrationNever {
		t.Fatalf("blocked = %+v, want kept-01 MigrationPolicyNever", st.Blocked)
	}
	s.waitVMReady(ctx, t, moved)
	m := s.machine(ctx, t, moved)
	if m.Spec.ProviderRef.Name != second.Name || m.Status.DomainUUID == "" || m.Status.DomainUUID == before[moved.Name] {
		t.Fatalf("moved-01: machine on %s, domain %q (was %s); want a new domain from libvirt-lab-b", m.Spec.ProviderRef.Name,
			m.Status.DomainUUID, before[moved.Name])
	}
	t.Logf("drain: moved-01 running again from %s %s after the drain began", second.Name, time.Since(start).Round(time.Millisecond))
	if m := s.machine(ctx, t, kept); m.Spec.ProviderRef.Name != "libvirt-edge-host-7" || m.Status.DomainUUID != before[kept.Name] ||
		!m.DeletionTimestamp.IsZero() {
		t.Fatalf("kept-01: machine on %s, domain %s (was %s), deleting %v; want it untouched", m.Spec.ProviderRef.Name,
			m.Status.DomainUUID, before[kept.Name], !m.DeletionTimestamp.IsZero())
	}
	// The kept domain is still defined on the host, with its UUID.
	dom, err := s.host.DomainLookupByName(ctx, s.ns+"-"+kept.Name)
	if err != nil || dom.UUID.String() != before[kept.Name] {
		t.Fatalf("kept-01's domain on the host: %v, %v; want UUID %s", dom.UUID, err, before[kept.Name])
	}
}

func patchProvider(ctx context.Context, t *testing.T, c client.Client, ns, name string, mutate func(*banlieuev1.Provider)) {
	t.Helper()
	testenv.Patch(ctx, t, c, client.ObjectKey{Namespace: ns, Name: name}, &banlieuev1.Provider{}, mutate)
}
