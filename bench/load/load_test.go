//go:build loadbench

// Package load is the load bench (docs/reliability.md, "Load"; docs/performance.md, "The fleet
// bench"): N powered-off VirtualMachines created, then deleted, all at once (or -rate R a second)
// on each host, with the controller role and the libvirt machine controller in this process, or
// with -processes as the real binary's roles, one process each: the controller, and a provider per
// host as the operator runs one per Provider. The host is the lab's, or with -hosts H that many
// libvirtds of their own (hosts.sh), each a Provider in a namespace of its own.
//
//	source /var/tmp/banlieue-lab/env
//	go test -tags loadbench ./bench/load -run TestLoad -v -timeout 60m -args -n 200 [-processes]
//	go test -tags loadbench ./bench/load -run TestLoad -v -timeout 90m -args -hosts 100 -n 50 -processes [-rate 5]
//	go test -tags loadbench ./bench/load -run TestLoad -v -timeout 60m -args -hosts 1 -n 200 -processes -virsh
//
// A PoweredOff machine's Ready is False (DomainNotRunning) by design, so "done" is: every
// LibvirtMachine has status.domainUuid and observedPowerState PoweredOff. Peak RSS (VmHWM) is
// recorded per process, reconcile latency per controller from the roles' own histograms, and API
// requests per VM from the API server's; then everything is deleted and every host must hold
// exactly the domains and volumes it held before.
package load

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/ssa"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/internal/testenv/labhost"
)

var (
	n      = flag.Int("n", 200, "VirtualMachines created on each host, at once unless -rate")
	hostsN = flag.Int("hosts", 0, "simulated hosts, each a libvirtd of its own started by bench/load/hosts.sh (0: the lab host of BANLIEUE_LIBVIRT_LAB)")
	wait   = flag.Duration("wait", 20*time.Minute, "how long to wait for all machines, and again for deletion")
	// rate paces creation and deletion below the machine's ceiling, so reconcile latency measures
	// a pass rather than the wait for a core that a burst beyond the ceiling makes
	// (docs/performance.md).
	rate = flag.Float64("rate", 0, "VirtualMachines created, then deleted, per second in all, the hosts interleaved (0: all at once)")
	// processes runs the controller and provider roles as the real binary, one process each (a
	// provider per host, as the operator runs one per Provider), so their memory is measured
	// apart; otherwise both run in the test process.
	processes = flag.Bool("processes", false, "run the controller and the providers as separate processes of the real binary")
	// The roles' --workers; 0 keeps each role's default (controller.DefaultWorkers,
	// libvirtrole.DefaultWorkers), so the bench measures what an install runs.
	controllerWorkers = flag.Int("controller-workers", 0, "the controller role's --workers (0: its default)")
	providerWorkers   = flag.Int("provider-workers", 0, "the provider role's --workers (0: its default)")
	// virshRef gives the one host's rates a reference measured in the same run: after banlieue's
	// deletion, the same libvirt work for as many VMs with a sequential virsh loop (bench/internal/virshloop,
	// each VM's seed uploaded as banlieue uploads one).
	virshRef = flag.Bool("virsh", false, "after banlieue, time the same libvirt work done by a sequential virsh loop (one host only)")
)

const (
	providerManager = banlieuev1.FieldManagerProviderLibvirt
	boot            = "tiny.raw"
)

func TestLoad(t *testing.T) {
	env := testenv.Start(t)
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel))) // thousands of machines log a lot
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := env.Client

	run := "load-" + testenv.RunID()
	hosts := prepareHosts(ctx, t, run)
	total := *n * len(hosts)
	if *virshRef && len(hosts) != 1 {
		t.Fatalf("-virsh needs one host, not %d", len(hosts))
	}

	class := &banlieuev1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: run}, Spec: banlieuev1.VMClassSpec{
		Firmware: banlieuev1.FirmwareBIOS,
		Hardware: banlieuev1.ClassHardware{CPUs: 1, MemoryMiB: 128, Disks: []banlieuev1.ClassDisk{{Name: "os", SizeGiB: 1, StorageClass: "standard"}}},
		Network:  banlieuev1.ClassNetwork{Interfaces: []banlieuev1.ClassInterface{}},
	}}
	img := &banlieuev1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: run}, Spec: banlieuev1.VMImageSpec{
		OSFamily: "linux", OSDistribution: "debian", OSVersion: "12", Architecture: "amd64",
		Sources:  []banlieuev1.ImageSource{{ProviderClass: "libvirt", Kind: banlieuev1.SourceBackingFile, Ref: "/images/" + boot}},
		Template: &banlieuev1.VMImageTemplate{InstallMode: banlieuev1.InstallImmediate},
	}}
	must(t, c.Create(ctx, class))
	must(t, c.Create(ctx, img))
	caps := banlieuev1.ProviderCapabilities{StorageClasses: []banlieuev1.StorageClassMapping{{Name: "standard", Target: map[string]string{"pool": run}}}}
	for _, h := range hosts {
		env.CreateLabNamespace(ctx, t, h.lab, h.ns, "lab-creds", "lab-ca")
		must(t, c.Create(ctx, h.lab.Provider(h.ns, h.provider, "lab-creds", "lab-ca", caps)))
	}
	var r roles
	if *processes {
		r = startRoles(t, env, hosts)
		waitProvidersAndImage(ctx, t, c, hosts, img)
	} else {
		r = startInProcess(t, env)
		var rows []banlieuev1.ProviderImageStatus
		for _, h := range hosts {
			p := &banlieuev1.Provider{ObjectMeta: metav1.ObjectMeta{Name: h.provider, Namespace: h.ns}}
			must(t, ssa.ApplyStatus(ctx, c, p, &banlieuev1.ProviderStatus{
				FailureDomains: []banlieuev1.FailureDomain{{Name: h.provider, Labels: map[string]string{"name": h.provider},
					Attributes: banlieuev1.FailureDomainAttributes{AvailableStorageClasses: []string{"standard"}}}},
				Conditions: []metav1.Condition{{Type: banlieuev1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Reconciled", LastTransitionTime: metav1.Now()}},
			}, providerManager))
			rows = append(rows, banlieuev1.ProviderImageStatus{ProviderName: h.provider, ProviderNamespace: h.ns, Ready: true, Reason: "Reconciled", ResolvedRef: boot})
		}
		must(t, ssa.ApplyStatus(ctx, c, img, &banlieuev1.VMImageStatus{PerProvider: rows}, providerManager))
	}
	// Polling lists every machine: at most a few lists a second, fewer for a large fleet.
	poll := max(250*time.Millisecond, time.Duration(total)*time.Millisecond)
	// CPU by process group: the roles, the control plane, and the hosts' libvirtds with the
	// qemu-img each runs per overlay.
	procs := controlPlane(t)
	maps.Copy(procs, r.pids)
	for _, h := range hosts {
		procs["libvirtd"] = append(procs["libvirtd"], h.lab.DaemonPID(t))
	}
	atStart := take(t, env.Config, r.families(), procs)

	// All at once (or -rate a second), created from 16 goroutines, the hosts' VMs interleaved.
	start := time.Now()
	each(ctx, t, hosts, func(key client.ObjectKey) error {
		return c.Create(ctx, &banlieuev1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace},
			Spec: banlieuev1.VirtualMachineSpec{ClassRef: banlieuev1.LocalObjectReference{Name: run},
				ImageRef: banlieuev1.LocalObjectReference{Name: run}, DesiredPowerState: banlieuev1.PoweredOff, MigrationPolicy: "never"}})
	})
	created := time.Since(start)

	var half time.Duration
	deadline := time.Now().Add(*wait)
	for {
		var ms infrav1.LibvirtMachineList
		must(t, c.List(ctx, &ms))
		doneN := 0
		for _, m := range ms.Items {
			if strings.HasPrefix(m.Namespace, run) && m.Status.DomainUUID != "" && m.Status.ObservedPowerState == banlieuev1.PoweredOff {
				doneN++
			}
		}
		if half == 0 && doneN >= total/2 {
			half = time.Since(start)
		}
		if doneN == total {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d machines done after %s", doneN, total, *wait)
		}
		time.Sleep(poll)
	}
	all := time.Since(start)
	atDone := take(t, env.Config, r.families(), procs)
	peak := r.memory()
	for _, h := range hosts {
		doms := 0
		for _, d := range must1(h.conn.ListAllDomains(ctx))(t) {
			if strings.HasPrefix(d.Name, h.ns+"-") {
				doms++
			}
		}
		vols := len(must1(h.conn.StoragePoolListAllVolumes(ctx, h.pool))(t))
		if doms != *n || vols != 2**n+1 {
			t.Errorf("host %s holds %d domains and %d volumes, want %d and %d", h.lab.Endpoint, doms, vols, *n, 2**n+1)
		}
	}
	var ref *reference
	if *virshRef {
		ref = newReference(t, hosts[0], run)
	}
	// VMs mirror; a VM's Ready needs a powered-on machine, so only the mirror is checked.
	var vms banlieuev1.VirtualMachineList
	must(t, c.List(ctx, &vms))
	mirrored := 0
	for _, vm := range vms.Items {
		if strings.HasPrefix(vm.Namespace, run) && vm.Status.ObservedPowerState == banlieuev1.PoweredOff {
			mirrored++
		}
	}

	// All at once, one DELETECOLLECTION per host; or at -rate a second, one VM at a time in the
	// creation's order.
	delStart := time.Now()
	if *rate > 0 {
		each(ctx, t, hosts, func(key client.ObjectKey) error {
			return c.Delete(ctx, &banlieuev1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace}})
		})
	} else {
		for _, h := range hosts {
			must(t, c.DeleteAllOf(ctx, &banlieuev1.VirtualMachine{}, client.InNamespace(h.ns)))
		}
	}
	deadline = time.Now().Add(*wait)
	for {
		var vl banlieuev1.VirtualMachineList
		var ml infrav1.LibvirtMachineList
		must(t, c.List(ctx, &vl))
		must(t, c.List(ctx, &ml))
		left := 0
		for _, vm := range vl.Items {
			if strings.HasPrefix(vm.Namespace, run) {
				left++
			}
		}
		for _, m := range ml.Items {
			if strings.HasPrefix(m.Namespace, run) {
				left++
			}
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d VMs and machines left after %s", left, *wait)
		}
		time.Sleep(poll)
	}
	deleted := time.Since(delStart)
	atEnd := take(t, env.Config, r.families(), procs)
	t.Logf("n=%d hosts=%d created-in=%s half-done=%s all-done=%s delete-all=%s %s", *n, len(hosts), created.Round(time.Millisecond),
		half.Round(time.Millisecond), all.Round(time.Millisecond), deleted.Round(time.Millisecond), peak)

	if ref != nil {
		ref.measure(t, all, deleted)
	}

	// Every host as it was: a fresh connection each, as the lab daemon may have been restarted by
	// another suite sharing it. On the lab, changes that are not the run's are other suites'.
	var ours, foreign []string
	changed := 0
	for _, h := range hosts {
		after := must1(hostState(ctx, labhost.Dial(t, h.lab)))(t)
		mine := 0
		for _, x := range diff(h.before, after) {
			if strings.Contains(x, run) || *hostsN > 0 {
				ours = append(ours, h.lab.Endpoint+": "+x)
				mine++
			} else {
				foreign = append(foreign, x)
			}
		}
		if mine > 0 {
			changed++
		}
	}
	if len(ours) > 0 {
		t.Errorf("%d hosts differ from before the run: %v", changed, ours[:min(len(ours), 20)])
	}
	if len(foreign) > 0 {
		t.Logf("changes by other suites sharing the lab (ignored): %v", foreign)
	}
	cw, pw := workers()
	t.Logf("RESULT processes=%t workers controller=%d provider=%d hosts=%d n=%d per host (%d in all) rate=%g/s (0: at once) created-in=%s half-done=%s all-done=%s (%.1f machines/s) vm-mirrored=%d "+
		"delete-all=%s (%.1f machines/s, %.2fx the creation time) when-all-done: %s; after deletion: %s; hosts-changed=%d",
		*processes, cw, pw, len(hosts), *n, total, *rate, created.Round(time.Millisecond), half.Round(time.Millisecond), all.Round(time.Millisecond),
		float64(total)/all.Seconds(), mirrored, deleted.Round(time.Millisecond), float64(total)/deleted.Seconds(), deleted.Seconds()/all.Seconds(),
		peak, r.memory(), changed)
	t.Logf("RESULT creation: %s", phase(atStart, atDone, total, "POST virtualmachines"))
	t.Logf("RESULT deletion: %s", phase(atDone, atEnd, total, "DELETE virtualmachines"))
}

// each calls op for every VM of the run, vm-000 of every host first, from 16 goroutines: all at
// once, or -rate a second in all.
func each(ctx context.Context, t *testing.T, hosts []*benchHost, op func(client.ObjectKey) error) {
	keys := make(chan client.ObjectKey)
	go func() {
		defer close(keys)
		var tick <-chan time.Time
		if *rate > 0 {
			ticker := time.NewTicker(max(time.Duration(float64(time.Second) / *rate), time.Microsecond))
			defer ticker.Stop()
			tick = ticker.C
		}
		for i := range *n {
			for _, h := range hosts {
				if tick != nil {
					select {
					case <-tick:
					case <-ctx.Done():
						return
					}
				}
				select {
				case keys <- client.ObjectKey{Namespace: h.ns, Name: fmt.Sprintf("vm-%03d", i)}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	errs := make(chan error, *n*len(hosts))
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for key := range keys {
				errs <- op(key)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, err)
	}
}

func diff(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, "- "+x)
		}
	}
	for _, x := range b {
		if !slices.Contains(a, x) {
			out = append(out, "+ "+x)
		}
	}
	return out
}

// procStatus reads one field of /proc/<pid>/status ("self" for this process), e.g. VmHWM.
func procStatus(t *testing.T, pid, field string) string {
	data, err := os.ReadFile("/proc/" + pid + "/status")
	must(t, err)
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.Join(strings.Fields(v), " ")
		}
	}
	return "?"
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// must1 is must for a call returning a value: must1(f())(t).
func must1[T any](v T, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		must(t, err)
		return v
	}
}
