package hardening

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// TestLongestNamesRealise is the other side of the name limits: admission bounds a namespace and
// a VM name to 63 characters and a class disk name to 32, so the longest names the API accepts
// make a 127-character domain and a 166-character volume. Those must be accepted by libvirt, by
// the dir pool's file system and by QEMU (which starts under that name), and be removed again
// without residue. Anything longer is refused at admission (test/api).
func TestLongestNamesRealise(t *testing.T) {
	ctx, s := startLabSuite(t)

	ns := s.ns + "-" + strings.Repeat("n", 63-len(s.ns)-1)
	s.setupNamespace(ctx, t, ns)
	disk := strings.Repeat("d", 32)
	class := &banlieuev1.VMClass{
		ObjectMeta: metav1.ObjectMeta{Name: s.class + "-longdisk"},
		Spec: banlieuev1.VMClassSpec{
			Firmware: banlieuev1.FirmwareBIOS,
			Hardware: banlieuev1.ClassHardware{CPUs: 1, MemoryMiB: 128,
				Disks: []banlieuev1.ClassDisk{{Name: disk, SizeGiB: 1, StorageClass: "standard"}}},
			Network: banlieuev1.ClassNetwork{Interfaces: []banlieuev1.ClassInterface{}},
		},
	}
	if err := s.c.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	vm := s.vm(ns, "v"+strings.Repeat("m", 62), banlieuev1.PoweredOn)
	vm.Spec.ClassRef.Name = class.Name
	if err := s.c.Create(ctx, vm); err != nil {
		t.Fatalf("creating a VM with a 63-character name in a 63-character namespace: %v", err)
	}
	domName := ns + "-" + vm.Name
	if len(domName) != 127 {
		t.Fatalf("domain name is %d characters, want the longest possible, 127", len(domName))
	}

	start := time.Now()
	s.waitRunning(ctx, t, vm, 90*time.Second)
	t.Logf("domain of %d characters running %s after apply", len(domName), time.Since(start).Round(time.Millisecond))
	m, err := s.getMachine(ctx, vm)
	if err != nil {
		t.Fatal(err)
	}
	doms := s.domainsNamed(ctx, t, domName)
	if len(doms) != 1 || doms[0].Name != domName || doms[0].UUID.String() != m.Status.DomainUUID {
		t.Errorf("domains named %s: %v, status.domainUuid %s", domName, doms, m.Status.DomainUUID)
	}
	wantVols := []string{domName + "-cidata.iso", domName + "-" + disk + ".qcow2"}
	if got := s.volumesOf(ctx, t, domName); !slices.Equal(got, wantVols) {
		t.Errorf("volumes %v, want %v", got, wantVols)
	}
	if n := len(wantVols[1]); n != 166 {
		t.Errorf("the disk volume name is %d characters, want 166", n)
	}

	s.deleteVM(ctx, t, vm, 60*time.Second)
	s.checkNothingLeft(ctx, t, domName)
}
