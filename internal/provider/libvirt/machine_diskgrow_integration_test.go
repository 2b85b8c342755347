package libvirt

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/pkg/libvirt"
)

// testDiskGrow raises disk sizes of one machine: its data disk while the domain runs (grown
// live, the domain never restarted), its OS overlay while the domain is off (the volume grown),
// then a size a pass already reached on the host before it could record it (the provider
// killed between the resize and the status write): it is recorded, not grown again.
func (s *machineSuite) testDiskGrow(ctx context.Context, t *testing.T) {
	m := s.machine(testNamespace, "grow")
	m.Spec.Disks = append(m.Spec.Disks, infrav1.LibvirtDisk{Name: "data", SizeGiB: 1})
	s.env.Create(ctx, t, m)
	t.Cleanup(func() { s.deleteAndWait(context.Background(), t, m) })
	key := client.ObjectKeyFromObject(m)
	sizes := func(os, data int32, more ...infrav1.DiskSize) func(*infrav1.LibvirtMachine) bool {
		want := append([]infrav1.DiskSize{{Name: "os", SizeGiB: os}, {Name: "data", SizeGiB: data}}, more...)
		return func(m *infrav1.LibvirtMachine) bool {
			return m.Status.ObservedGeneration == m.Generation && slices.Equal(m.Status.DiskSizes, want)
		}
	}
	got := s.waitMachine(ctx, t, key, 60*time.Second, func(m *infrav1.LibvirtMachine) bool { return machineReady(m) && sizes(1, 1)(m) })
	dom, err := s.host.DomainLookupByName(ctx, got.Spec.DomainName)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := s.host.StoragePoolLookupByName(ctx, s.pool)
	if err != nil {
		t.Fatal(err)
	}
	vol := func(disk string) libvirt.StorageVol {
		v, err := s.host.StorageVolLookupByName(ctx, pool, diskVolume(m.Spec.DomainName, disk))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	update := func(change func(*infrav1.LibvirtMachine)) {
		t.Helper()
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var cur infrav1.LibvirtMachine
			if err := s.env.Client.Get(ctx, key, &cur); err != nil {
				return err
			}
			change(&cur)
			return s.env.Client.Update(ctx, &cur)
		}); err != nil {
			t.Fatal(err)
		}
	}

	// Live: the running domain's disk grows through QEMU; the domain keeps its ID (no restart).
	start := time.Now()
	update(func(m *infrav1.LibvirtMachine) { m.Spec.Disks[1].SizeGiB = 2 })
	got = s.waitMachine(ctx, t, key, 30*time.Second, sizes(1, 2))
	t.Logf("live growth recorded %v after the spec change", time.Since(start).Round(time.Millisecond))
	data := vol("data")
	info, err := s.host.DomainGetBlockInfo(ctx, dom, data.Key)
	if err != nil || info.Capacity != 2<<30 {
		t.Errorf("the running domain's data disk: %+v, %v; want capacity 2 GiB", info, err)
	}
	if now, err := s.host.DomainLookupByName(ctx, dom.Name); err != nil || now.ID != dom.ID || !machineReady(got) {
		t.Errorf("domain %+v (%v) after the live growth, was %+v: it must run on, unrestarted; Ready %+v", now, err, dom,
			meta.FindStatusCondition(got.Status.Conditions, banlieuev1.ConditionReady))
	}

	// A disk added while the domain runs is in its definition only, attached at the next boot:
	// raised before that, it grows through the pool, QEMU not holding it.
	update(func(m *infrav1.LibvirtMachine) {
		m.Spec.Disks = append(m.Spec.Disks, infrav1.LibvirtDisk{Name: "extra", SizeGiB: 1})
	})
	s.waitMachine(ctx, t, key, 30*time.Second, sizes(1, 2, infrav1.DiskSize{Name: "extra", SizeGiB: 1}))
	update(func(m *infrav1.LibvirtMachine) { m.Spec.Disks[2].SizeGiB = 2 })
	got = s.waitMachine(ctx, t, key, 30*time.Second, sizes(1, 2, infrav1.DiskSize{Name: "extra", SizeGiB: 2}))
	if info, err := s.host.StorageVolGetInfo(ctx, vol("extra")); err != nil || info.Capacity != 2<<30 {
		t.Errorf("the data disk added while running: %+v, %v; want capacity 2 GiB", info, err)
	}
	if now, err := s.host.DomainLookupByName(ctx, dom.Name); err != nil || now.ID != dom.ID || !machineReady(got) {
		t.Errorf("domain %+v (%v) after growing a disk it does not run with yet, was %+v", now, err, dom)
	}
	update(func(m *infrav1.LibvirtMachine) { m.Spec.Disks = m.Spec.Disks[:2] })
	s.waitMachine(ctx, t, key, 30*time.Second, sizes(1, 2))

	// Off: the OS overlay grows through the pool.
	update(func(m *infrav1.LibvirtMachine) {
		m.Spec.DesiredPowerState = banlieuev1.PoweredOff
		m.Spec.PowerOffMode = banlieuev1.PowerOffHard
	})
	s.waitMachine(ctx, t, key, 60*time.Second, func(m *infrav1.LibvirtMachine) bool {
		return m.Status.ObservedPowerState == banlieuev1.PoweredOff && m.Status.ObservedGeneration == m.Generation
	})
	update(func(m *infrav1.LibvirtMachine) { m.Spec.Disks[0].SizeGiB = 3 })
	s.waitMachine(ctx, t, key, 30*time.Second, sizes(3, 2))
	if info, err := s.host.StorageVolGetInfo(ctx, vol("os")); err != nil || info.Capacity != 3<<30 {
		t.Errorf("the off domain's OS overlay: %+v, %v; want capacity 3 GiB", info, err)
	}

	// Resumed: the volume already has the size a pass died before recording.
	if err := s.host.StorageVolResize(ctx, data, 4<<30, 0); err != nil {
		t.Fatal(err)
	}
	update(func(m *infrav1.LibvirtMachine) { m.Spec.Disks[1].SizeGiB = 4 })
	got = s.waitMachine(ctx, t, key, 30*time.Second, sizes(3, 4))
	if info, err := s.host.StorageVolGetInfo(ctx, data); err != nil || info.Capacity != 4<<30 {
		t.Errorf("the data volume: %+v, %v; want capacity 4 GiB", info, err)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, infrav1.ConditionDisksGrown); c != nil {
		t.Errorf("DisksGrown %+v on a machine whose disks all grew", c)
	}
	if v := fmt.Sprint(got.Status.Volumes); !slices.Contains(got.Status.Volumes, data.Name) {
		t.Errorf("status.volumes %s lost the data volume", v)
	}
}
