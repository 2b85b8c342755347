//go:build loadbench

// Package load is issue 10's load row: N powered-off VirtualMachines created at once against one
// lab host, with the controller role and the libvirt machine controller in this process, or with
// -processes as the real binary's controller and provider roles, one process each.
//
//	source /var/tmp/banlieue-lab/env
//	go test -tags loadbench ./bench/load -run TestLoad -v -timeout 60m -args -n 200 [-processes]
//
// A PoweredOff machine's Ready is False (DomainNotRunning) by design, so "done" is: every
// LibvirtMachine has status.domainUuid and observedPowerState PoweredOff. Peak RSS (VmHWM) is
// recorded per process; then everything is deleted and the host must hold exactly the domains
// and volumes it held before.
package load

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/ssa"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/internal/testenv/labhost"
	"banlieue.io/banlieue/pkg/libvirt"
)

var (
	n    = flag.Int("n", 200, "VirtualMachines created at once")
	wait = flag.Duration("wait", 20*time.Minute, "how long to wait for all machines, and again for deletion")
	// processes runs the controller and provider roles as the real binary, one process each, so
	// their memory is measured apart; otherwise both run in the test process.
	processes = flag.Bool("processes", false, "run the controller and the provider as separate processes of the real binary")
	// The roles' --workers; 0 keeps each role's default (controller.DefaultWorkers,
	// libvirtrole.DefaultWorkers), so the bench measures what an install runs.
	controllerWorkers = flag.Int("controller-workers", 0, "the controller role's --workers (0: its default)")
	providerWorkers   = flag.Int("provider-workers", 0, "the provider role's --workers (0: its default)")
)

const (
	providerManager = banlieuev1.FieldManagerProviderLibvirt
	boot            = "tiny.raw"
)

func TestLoad(t *testing.T) {
	lab := testenv.RequireLibvirtLab(t)
	env := testenv.Start(t)
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel))) // 200 machines log a lot
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := env.Client
	host := labhost.Dial(t, lab)

	run := "load-" + testenv.RunID()
	poolDir := filepath.Join(lab.Dir, "pools", run)
	must(t, os.MkdirAll(poolDir, 0o711))
	pool, err := host.StoragePoolCreateXML(ctx, fmt.Sprintf(`<pool type='dir'><name>%s</name><target><path>%s</path></target></pool>`, run, poolDir), 0)
	must(t, err)
	t.Cleanup(func() {
		// A connection of its own: host is dialled again below, and cleanups run last-in first-out,
		// so by now whichever connection host names has been closed and the pool would be leaked.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		defer func() { _ = os.RemoveAll(poolDir) }()
		h, err := labhost.Dialer(t, lab).Dial(ctx)
		if err != nil {
			t.Errorf("removing pool %s: %v", run, err)
			return
		}
		defer func() { _ = h.Close() }()
		if vols, err := h.StoragePoolListAllVolumes(ctx, pool); err == nil {
			for _, v := range vols {
				_ = h.StorageVolDelete(ctx, v)
			}
		}
		if err := h.StoragePoolDestroy(ctx, pool); err != nil {
			t.Errorf("removing pool %s: %v", run, err)
		}
	})
	_, err = host.StorageVolCreateXML(ctx, pool, fmt.Sprintf(`<volume type='file'><name>%s</name><capacity unit='bytes'>%d</capacity>`+
		`<target><format type='raw'/></target></volume>`, boot, 1<<20), 0)
	must(t, err)
	before := hostState(ctx, t, host)

	ns := run
	p := &banlieuev1.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: "lab", Namespace: ns},
		Spec: banlieuev1.ProviderSpec{
			ProviderClassRef: banlieuev1.LocalObjectReference{Name: "libvirt"},
			Connection: banlieuev1.ProviderConnection{Endpoint: lab.Endpoint,
				CredentialsRef: banlieuev1.LocalObjectReference{Name: "lab-creds"},
				CABundle:       &banlieuev1.CABundleSource{ConfigMapRef: &banlieuev1.KeySelector{Name: "lab-ca"}}},
			Capabilities: banlieuev1.ProviderCapabilities{StorageClasses: []banlieuev1.StorageClassMapping{{Name: "standard", Target: map[string]string{"pool": run}}}},
		},
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
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "lab-creds", Namespace: ns},
			Data: map[string][]byte{"tls.crt": lab.Read(t, "clientcert.pem"), "tls.key": lab.Read(t, "clientkey.pem")}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "lab-ca", Namespace: ns}, Data: map[string]string{"ca.crt": string(lab.Read(t, "cacert.pem"))}},
		p, class, img,
	} {
		must(t, c.Create(ctx, o))
	}
	var memory func() string
	if *processes {
		memory = startRoles(ctx, t, env, ns)
		waitProviderAndImage(ctx, t, c, p, img)
	} else {
		memory = startInProcess(t, env)
		must(t, ssa.ApplyStatus(ctx, c, p, &banlieuev1.ProviderStatus{
			FailureDomains: []banlieuev1.FailureDomain{{Name: "lab", Labels: map[string]string{"name": "lab"},
				Attributes: banlieuev1.FailureDomainAttributes{AvailableStorageClasses: []string{"standard"}}}},
			Conditions: []metav1.Condition{{Type: banlieuev1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Reconciled", LastTransitionTime: metav1.Now()}},
		}, providerManager))
		must(t, ssa.ApplyStatus(ctx, c, img, &banlieuev1.VMImageStatus{PerProvider: []banlieuev1.ProviderImageStatus{
			{ProviderName: "lab", ProviderNamespace: ns, Ready: true, Reason: "Reconciled", ResolvedRef: boot}}}, providerManager))
	}

	// All at once: created from 16 goroutines.
	start := time.Now()
	names := make(chan string, *n)
	for i := range *n {
		names <- fmt.Sprintf("vm-%03d", i)
	}
	close(names)
	errs := make(chan error, *n)
	for range 16 {
		go func() {
			for name := range names {
				errs <- c.Create(ctx, &banlieuev1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
					Spec: banlieuev1.VirtualMachineSpec{ClassRef: banlieuev1.LocalObjectReference{Name: run},
						ImageRef: banlieuev1.LocalObjectReference{Name: run}, DesiredPowerState: banlieuev1.PoweredOff, MigrationPolicy: "never"}})
			}
		}()
	}
	for range *n {
		must(t, <-errs)
	}
	created := time.Since(start)

	var half time.Duration
	deadline := time.Now().Add(*wait)
	for {
		var ms infrav1.LibvirtMachineList
		must(t, c.List(ctx, &ms, client.InNamespace(ns)))
		doneN := 0
		for _, m := range ms.Items {
			if m.Status.DomainUUID != "" && m.Status.ObservedPowerState == banlieuev1.PoweredOff {
				doneN++
			}
		}
		if half == 0 && doneN >= *n/2 {
			half = time.Since(start)
		}
		if doneN == *n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d machines done after %s", doneN, *n, *wait)
		}
		time.Sleep(250 * time.Millisecond)
	}
	all := time.Since(start)
	peak := memory()
	doms := 0
	for _, d := range must1(host.ListAllDomains(ctx))(t) {
		if strings.HasPrefix(d.Name, ns+"-") {
			doms++
		}
	}
	vols := len(must1(host.StoragePoolListAllVolumes(ctx, pool))(t))
	if doms != *n || vols != 2**n+1 {
		t.Errorf("host holds %d domains and %d volumes, want %d and %d", doms, vols, *n, 2**n+1)
	}
	// VMs mirror; a VM's Ready needs a powered-on machine, so only the mirror is checked.
	var vms banlieuev1.VirtualMachineList
	must(t, c.List(ctx, &vms, client.InNamespace(ns)))
	mirrored := 0
	for _, vm := range vms.Items {
		if vm.Status.ObservedPowerState == banlieuev1.PoweredOff {
			mirrored++
		}
	}

	delStart := time.Now()
	must(t, c.DeleteAllOf(ctx, &banlieuev1.VirtualMachine{}, client.InNamespace(ns)))
	deadline = time.Now().Add(*wait)
	for {
		var vl banlieuev1.VirtualMachineList
		var ml infrav1.LibvirtMachineList
		must(t, c.List(ctx, &vl, client.InNamespace(ns)))
		must(t, c.List(ctx, &ml, client.InNamespace(ns)))
		if len(vl.Items) == 0 && len(ml.Items) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d VMs and %d machines left after %s", len(vl.Items), len(ml.Items), *wait)
		}
		time.Sleep(250 * time.Millisecond)
	}
	deleted := time.Since(delStart)
	t.Logf("n=%d created-in=%s half-done=%s all-done=%s delete-all=%s %s", *n, created.Round(time.Millisecond),
		half.Round(time.Millisecond), all.Round(time.Millisecond), deleted.Round(time.Millisecond), peak)
	// A fresh connection: the shared lab daemon may have been restarted by another suite.
	host = labhost.Dial(t, lab)
	after := hostState(ctx, t, host)
	var ours, foreign []string
	for _, d := range diff(before, after) {
		if strings.Contains(d, run) {
			ours = append(ours, d)
		} else {
			foreign = append(foreign, d)
		}
	}
	if len(ours) > 0 {
		t.Errorf("host differs from before the run: %v", ours)
	}
	if len(foreign) > 0 {
		t.Logf("changes by other suites sharing the lab (ignored): %v", foreign)
	}
	cw, pw := workers()
	t.Logf("RESULT processes=%t workers controller=%d provider=%d n=%d created-in=%s half-done=%s all-done=%s (%.1f machines/s) vm-mirrored=%d "+
		"delete-all=%s (%.1f machines/s, %.2fx the creation time) when-all-done: %s; after deletion: %s host-diff=%d",
		*processes, cw, pw, *n, created.Round(time.Millisecond), half.Round(time.Millisecond), all.Round(time.Millisecond),
		float64(*n)/all.Seconds(), mirrored, deleted.Round(time.Millisecond), float64(*n)/deleted.Seconds(), deleted.Seconds()/all.Seconds(),
		peak, memory(), len(ours))
}

// hostState is every domain on the host and every volume of every active pool.
func hostState(ctx context.Context, t *testing.T, c *libvirt.Client) []string {
	t.Helper()
	var out []string
	for _, d := range must1(c.ListAllDomains(ctx))(t) {
		out = append(out, "domain "+d.Name)
	}
	for _, p := range must1(c.ListAllStoragePools(ctx))(t) {
		vols, err := c.StoragePoolListAllVolumes(ctx, p)
		if err != nil {
			continue // a pool another suite is tearing down
		}
		for _, v := range vols {
			out = append(out, "volume "+p.Name+"/"+v.Name)
		}
	}
	slices.Sort(out)
	return out
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
