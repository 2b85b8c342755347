//go:build loadbench

// Package fleet is the placement and drain bench (docs/performance.md, "Placement and drain
// over a fleet"): the controller role against a real API server and etcd, with hosts of
// different sizes shared by every tenant namespace, each publishing its capacity as the libvirt
// provider does. A burst of VMs of mixed classes is placed, every host's allocation is checked
// against what its overcommit allows, the spread is compared with an ideal proportional fill,
// and then the largest host is drained. The hosts' providers are not run (bench/load measures
// realisation): a machine is deleted at once, as a provider's teardown of a powered-off domain
// would be, and a host is as its status says.
//
//	go test -tags loadbench ./bench/fleet -run TestFleet -v -timeout 30m -args -hosts 24 -vms 1000
package fleet

import (
	"context"
	"flag"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/bench/internal/metric"
	"banlieue.io/banlieue/internal/controller"
	"banlieue.io/banlieue/internal/ssa"
	"banlieue.io/banlieue/internal/testenv"
)

var (
	hostsN   = flag.Int("hosts", 24, "hosts, of four sizes in turn (16, 32, 64 and 128 CPUs with 8 GiB of memory per CPU)")
	vmsN     = flag.Int("vms", 1000, "VirtualMachines created at once, of four classes in turn, over ten namespaces")
	workers  = flag.Int("workers", controller.DefaultWorkers, "the controller's --workers")
	strategy = flag.String("strategy", banlieuev1.PlacementSpread, "spec.placement.strategy of every VM")
	drainMax = flag.Int("drain-concurrency", 8, "spec.drain.maxConcurrent of the drained host")
	wait     = flag.Duration("wait", 10*time.Minute, "how long to wait for the placement, and again for the drain")
)

const infra = "fleet-hosts"

// classes are the burst's VM sizes: vCPUs and MiB.
var classes = []struct {
	name      string
	cpus      int32
	memoryMiB int32
}{{"fleet-s", 1, 1024}, {"fleet-m", 2, 4096}, {"fleet-l", 4, 8192}, {"fleet-xl", 8, 16384}}

func TestFleet(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	c := env.Client
	mgr := env.NewManager(t)
	if err := controller.Setup(mgr, controller.Options{Workers: *workers}); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)

	hosts := makeHosts(ctx, t, c)
	tenants := make([]string, 10)
	for i := range tenants {
		tenants[i] = fmt.Sprintf("team-%02d", i)
		must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenants[i]}}))
	}
	for _, k := range classes {
		must(t, c.Create(ctx, class(k.name, k.cpus, k.memoryMiB)))
	}
	image(ctx, t, c, hosts)

	before := reconcileHistogram(t)
	start := time.Now()
	for i := range *vmsN {
		k := classes[i%len(classes)]
		vm := &banlieuev1.VirtualMachine{
			ObjectMeta: metav1.ObjectMeta{Namespace: tenants[i%len(tenants)], Name: fmt.Sprintf("vm-%04d", i)},
			Spec: banlieuev1.VirtualMachineSpec{
				ClassRef: banlieuev1.LocalObjectReference{Name: k.name}, ImageRef: banlieuev1.LocalObjectReference{Name: "fleet-image"},
				DesiredPowerState: banlieuev1.PoweredOff, MigrationPolicy: "recreate",
				Placement: &banlieuev1.Placement{Strategy: *strategy},
			},
		}
		must(t, c.Create(ctx, vm))
	}
	created := time.Since(start)
	vms := waitPlaced(ctx, t, c, func(vms []banlieuev1.VirtualMachine) bool { return scheduled(vms) == len(vms) && len(vms) == *vmsN })
	placed := time.Since(start)
	h := reconcileHistogram(t).Minus(before)
	t.Logf("placement: %d VMs created in %s, all scheduled in %s (%.0f/s); virtualmachine passes %.0f, p50 %s, p99 %s",
		*vmsN, created.Round(time.Millisecond), placed.Round(time.Millisecond), float64(*vmsN)/placed.Seconds(), h.N,
		h.Quantile(0.5).Round(time.Microsecond), h.Quantile(0.99).Round(time.Microsecond))
	report(t, "after the burst", hosts, vms, "")

	// The largest, fullest host is drained; every VM moves (migrationPolicy recreate).
	drained := hosts[0]
	for _, hst := range hosts {
		if hst.cpus > drained.cpus || hst.cpus == drained.cpus && len(on(vms, hst.name)) > len(on(vms, drained.name)) {
			drained = hst
		}
	}
	n := len(on(vms, drained.name))
	var p banlieuev1.Provider
	must(t, c.Get(ctx, client.ObjectKey{Namespace: infra, Name: drained.name}, &p))
	orig := p.DeepCopy()
	p.Spec.Unschedulable = true
	p.Spec.Drain = &banlieuev1.ProviderDrain{MaxConcurrent: ptr.To(int32(*drainMax))}
	before = reconcileHistogram(t)
	start = time.Now()
	must(t, c.Patch(ctx, &p, client.MergeFrom(orig)))
	deadline := time.Now().Add(*wait)
	for {
		must(t, c.Get(ctx, client.ObjectKeyFromObject(&p), &p))
		if st := p.Status.Drain; st != nil && st.Phase != banlieuev1.DrainDraining {
			if st.Phase != banlieuev1.DrainDrained {
				t.Fatalf("drain ended %s: %+v", st.Phase, st.Blocked)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("drain of %s not done after %s: %+v", drained.name, *wait, p.Status.Drain)
		}
		time.Sleep(200 * time.Millisecond)
	}
	took := time.Since(start)
	vms = waitPlaced(ctx, t, c, func(vms []banlieuev1.VirtualMachine) bool {
		return scheduled(vms) == len(vms) && len(on(vms, drained.name)) == 0
	})
	h = reconcileHistogram(t).Minus(before)
	t.Logf("drain of %s (%d CPUs): %d VMs moved in %s (%.1f/s, %d at a time; the burst placed %.0f/s: %.2f× the rate); virtualmachine p99 %s",
		drained.name, drained.cpus, n, took.Round(time.Millisecond), float64(n)/took.Seconds(), *drainMax,
		float64(*vmsN)/placed.Seconds(), (float64(n)/took.Seconds())/(float64(*vmsN)/placed.Seconds()), h.Quantile(0.99).Round(time.Microsecond))
	report(t, "after the drain", hosts, vms, drained.name)
}

type host struct {
	name      string
	cpus      int32
	memoryMiB int64
}

// allowed is what the scheduler may place on h under the default overcommit: 400 % of the
// CPUs, 100 % of the memory less 1 024 MiB.
func (h host) allowed() (cpus, memoryMiB int64) {
	return int64(h.cpus) * banlieuev1.DefaultCPUAllocationPercent / 100,
		(h.memoryMiB - banlieuev1.DefaultReservedMemoryMiB) * banlieuev1.DefaultMemoryAllocationPercent / 100
}

func makeHosts(ctx context.Context, t *testing.T, c client.Client) []host {
	must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: infra}}))
	var hosts []host
	for i := range *hostsN {
		cpus := int32(16 << (i % 4))
		h := host{name: fmt.Sprintf("kvm-%02d", i), cpus: cpus, memoryMiB: int64(cpus) * 8192}
		hosts = append(hosts, h)
		p := &banlieuev1.Provider{
			ObjectMeta: metav1.ObjectMeta{Namespace: infra, Name: h.name},
			Spec: banlieuev1.ProviderSpec{
				ProviderClassRef: banlieuev1.LocalObjectReference{Name: "libvirt"},
				Connection: banlieuev1.ProviderConnection{Endpoint: "qemu+tls://" + h.name + ".example/system",
					CredentialsRef: banlieuev1.LocalObjectReference{Name: "creds"}},
				Capabilities: banlieuev1.ProviderCapabilities{
					StorageClasses: []banlieuev1.StorageClassMapping{{Name: "standard", Target: map[string]string{"pool": "default"}}},
					NetworkClasses: []banlieuev1.NetworkClassMapping{{Name: "prod", Target: map[string]string{"network": "default"}}},
				},
				AllowedNamespaces: &banlieuev1.AllowedNamespaces{From: banlieuev1.NamespacesFromAll},
			},
		}
		must(t, c.Create(ctx, p))
		st := &banlieuev1.ProviderStatus{
			FailureDomains: []banlieuev1.FailureDomain{{Name: h.name, Labels: map[string]string{"name": h.name},
				Attributes: banlieuev1.FailureDomainAttributes{AvailableStorageClasses: []string{"standard"}, AvailableNetworkClasses: []string{"prod"}},
				Capacity:   &banlieuev1.FailureDomainCapacity{CPUs: h.cpus, MemoryMiB: h.memoryMiB}}},
			Conditions: []metav1.Condition{{Type: banlieuev1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Reconciled", LastTransitionTime: metav1.Now()}},
		}
		must(t, ssa.ApplyStatus(ctx, c, p, st, banlieuev1.FieldManagerProviderLibvirt))
	}
	return hosts
}

func class(name string, cpus, memoryMiB int32) *banlieuev1.VMClass {
	return &banlieuev1.VMClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: banlieuev1.VMClassSpec{
			Firmware: banlieuev1.FirmwareEFI,
			Hardware: banlieuev1.ClassHardware{CPUs: cpus, MemoryMiB: memoryMiB,
				Disks: []banlieuev1.ClassDisk{{Name: "os", SizeGiB: 20, StorageClass: "standard"}}},
			Network: banlieuev1.ClassNetwork{Interfaces: []banlieuev1.ClassInterface{{Name: "nic0", NetworkClass: "prod"}}},
		},
	}
}

// image is one image, ready on every host, its rows written as each provider writes its own.
func image(ctx context.Context, t *testing.T, c client.Client, hosts []host) {
	img := &banlieuev1.VMImage{
		ObjectMeta: metav1.ObjectMeta{Name: "fleet-image"},
		Spec: banlieuev1.VMImageSpec{
			OSFamily: "linux", OSDistribution: "debian", OSVersion: "12", Architecture: "amd64", GuestAgent: "cloud-init",
			Sources: []banlieuev1.ImageSource{{ProviderClass: "libvirt", Kind: banlieuev1.SourceURL, Ref: "debian-12",
				ImportFrom: "https://cloud.debian.org/images/cloud/bookworm/latest/debian-12-genericcloud-amd64.qcow2"}},
			Template: &banlieuev1.VMImageTemplate{InstallMode: banlieuev1.InstallImmediate},
		},
	}
	must(t, c.Create(ctx, img))
	var rows []banlieuev1.ProviderImageStatus
	for _, h := range hosts {
		rows = append(rows, banlieuev1.ProviderImageStatus{ProviderName: h.name, ProviderNamespace: infra, Ready: true,
			Reason: "Reconciled", ResolvedRef: "debian-12.raw"})
	}
	must(t, ssa.ApplyStatus(ctx, c, img, &banlieuev1.VMImageStatus{PerProvider: rows}, banlieuev1.FieldManagerProviderLibvirt))
}

// waitPlaced lists the VMs until done holds of them, or fails after -wait.
func waitPlaced(ctx context.Context, t *testing.T, c client.Client, done func([]banlieuev1.VirtualMachine) bool) []banlieuev1.VirtualMachine {
	deadline := time.Now().Add(*wait)
	for {
		var list banlieuev1.VirtualMachineList
		must(t, c.List(ctx, &list))
		if done(list.Items) {
			return list.Items
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d VMs scheduled after %s", scheduled(list.Items), len(list.Items), *wait)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func scheduled(vms []banlieuev1.VirtualMachine) int {
	n := 0
	for _, vm := range vms {
		if s := vm.Status.Scheduled; s != nil && vm.Status.InfrastructureRef != nil {
			n++
		}
	}
	return n
}

func on(vms []banlieuev1.VirtualMachine, name string) []banlieuev1.VirtualMachine {
	var out []banlieuev1.VirtualMachine
	for _, vm := range vms {
		if s := vm.Status.Scheduled; s != nil && s.ProviderName == name {
			out = append(out, vm)
		}
	}
	return out
}

// report logs each host's allocation against what it allows, fails on a host over it, and
// compares the memory shares with the ideal fill, where every host holds the same share (the
// fleet's total demand over its total allowance); a drained host, which holds nothing, is left
// out of the comparison.
func report(t *testing.T, when string, hosts []host, vms []banlieuev1.VirtualMachine, drained string) {
	var demand, allowance float64
	shares := make([]float64, 0, len(hosts))
	var lines []string
	for _, h := range hosts {
		maxCPU, maxMem := h.allowed()
		var cpu, mem int64
		for _, vm := range on(vms, h.name) {
			cpu += int64(vm.Status.Scheduled.CPUs)
			mem += int64(vm.Status.Scheduled.MemoryMiB)
		}
		if cpu > maxCPU || mem > maxMem {
			t.Errorf("%s: host %s holds %d vCPUs and %d MiB, over its allowed %d and %d", when, h.name, cpu, mem, maxCPU, maxMem)
		}
		if h.name == drained {
			continue
		}
		demand += float64(mem)
		allowance += float64(maxMem)
		share := float64(mem) / float64(maxMem)
		shares = append(shares, share)
		lines = append(lines, fmt.Sprintf("%s(%d) %.0f%%", h.name, h.cpus, 100*share))
	}
	ideal := demand / allowance
	var sq, worst float64
	for _, s := range shares {
		sq += (s - ideal) * (s - ideal)
		worst = max(worst, math.Abs(s-ideal))
	}
	sd := math.Sqrt(sq / float64(len(shares)))
	t.Logf("%s: memory share per host (ideal %.1f%%): %s", when, 100*ideal, strings.Join(lines, " "))
	t.Logf("%s: deviation from the ideal fill: standard %.2f points, worst %.2f points (%.3f× and %.3f× the ideal share)",
		when, 100*sd, 100*worst, sd/ideal, worst/ideal)
}

// reconcileHistogram is the virtualmachine controller's reconcile-time histogram in this process.
func reconcileHistogram(t *testing.T) metric.Histogram {
	families, err := metrics.Registry.Gather()
	must(t, err)
	var h metric.Histogram
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_time_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			if metric.Label(m, "controller") == "virtualmachine" {
				h.Add(m.GetHistogram())
			}
		}
	}
	return h
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
