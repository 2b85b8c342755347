//go:build node

package node

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/internal/testenv/labhost"
	"banlieue.io/banlieue/pkg/libvirt"
)

const (
	buildNS = "banlieue-imagebuild"
	// artifactsDir backs the artifacts PVC with a local PersistentVolume on the node, under the
	// node's own state directory (hack/node.sh down and hack/node-test.sh remove it).
	artifactsDir = "artifacts"
	// sourceCA is the ConfigMap of the guide's trust option (--build-ca-configmap).
	sourceCA = "node-test-source-ca"
)

// TestGuideImageFlowOnTheRealNode follows docs/guides/libvirt-provider.md, "6. Get an image
// onto the host", with nothing started by hand: the release's chart with the trust option for
// a private CA (imagebuilder.jobs.caBundleConfigMap) and the allow-list for the source's
// network; a VMImage of kind Url served over https from 10.244.0.1 → the build Job's pod writes
// the artifact to the artifacts PVC, a real local PersistentVolume on the node → one import Job
// pod per pool, with the guide's name and backoffLimit 1, under the Provider's import
// ServiceAccount token → the guide's kubectl commands print what the guide shows → a
// VirtualMachine of examples/17's shape (the tiny guest) → its domain runs on the lab host.
func TestGuideImageFlowOnTheRealNode(t *testing.T) {
	n := requireNode(t)
	lab := testenv.RequirePodLibvirtLab(t)
	start := time.Now()
	guest := guestImage(t)
	caPEM, baseURL, ociRef := httpsSource(t, filepath.Dir(guest), guest)

	// The export's registry: plain HTTP on the node's bridge, which the release lets export
	// Jobs push to and build Jobs pull from (each role's insecure registries, the port in
	// each policy).
	exports := plainRegistry(t)
	_, exportPort, _ := net.SplitHostPort(exports)
	c := installForSources(t, n, caPEM, "--set", "controller.exportJobs.insecureRegistries={"+exports+"}",
		"--set", "networkPolicy.exportRegistries.ports={443,"+exportPort+"}",
		"--set", "imagebuilder.limits.insecureRegistries={"+exports+"}",
		"--set", "networkPolicy.buildSources.ports={80,443,"+exportPort+"}")
	ctx := t.Context()
	t.Logf("release installed and Ready after %v", time.Since(start).Round(time.Second))

	host := labhost.Dial(t, lab)
	pool := "node-" + testenv.RunID()
	labhost.CreatePool(ctx, t, host, lab, pool)
	provider := labProvider(t, c, lab, banlieuev1.StorageClassMapping{Name: "standard", Target: map[string]string{"pool": pool}}).Name

	// The image, the class, the user-data and the machine of examples/17, with the tiny guest.
	const imageName, vmName = "node-guest", "node-vm-01"
	img := &banlieuev1.VMImage{
		ObjectMeta: metav1.ObjectMeta{Name: imageName},
		Spec: banlieuev1.VMImageSpec{
			OSFamily: "linux", OSDistribution: "busybox", OSVersion: "1.35", Architecture: "amd64", GuestAgent: "cloud-init",
			Sources: []banlieuev1.ImageSource{{ProviderClass: "libvirt", Kind: banlieuev1.SourceURL, Ref: imageName,
				ImportFrom: baseURL + "/guest.raw"}},
			Template: &banlieuev1.VMImageTemplate{InstallMode: "immediate"},
		},
	}
	class := &banlieuev1.VMClass{
		ObjectMeta: metav1.ObjectMeta{Name: "node-tiny"},
		Spec: banlieuev1.VMClassSpec{
			Firmware: "efi",
			Hardware: banlieuev1.ClassHardware{CPUs: 1, MemoryMiB: 256,
				Disks: []banlieuev1.ClassDisk{{Name: "os", SizeGiB: 1, StorageClass: "standard"}}},
		},
	}
	userData := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: vmName + "-user-data", Namespace: systemNS},
		Data: map[string]string{"user-data": "#cloud-config\nhostname: ${VM_NAME}\n"}}
	vm := &banlieuev1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: vmName, Namespace: systemNS},
		Spec: banlieuev1.VirtualMachineSpec{
			ClassRef: banlieuev1.LocalObjectReference{Name: class.Name}, ImageRef: banlieuev1.LocalObjectReference{Name: imageName},
			DesiredPowerState: banlieuev1.PoweredOn, MigrationPolicy: "never",
			UserData: &banlieuev1.UserDataSource{ConfigMapRef: &banlieuev1.KeySelector{Name: userData.Name}},
		},
	}
	create(t, c, img)

	// The build Job's pod: on the node, writing the artifact to the PVC.
	var built banlieuev1.VMImage
	testenv.Eventually(t, 5*time.Minute, "VMImage "+imageName+" buildArtifact Ready", func() error {
		if err := c.Get(ctx, client.ObjectKey{Name: imageName}, &built); err != nil {
			return err
		}
		a := built.Status.BuildArtifact
		if a != nil && a.Phase == banlieuev1.BuildFailed {
			t.Fatalf("build failed: %+v; pods: %s", *a, podStates(ctx, n, buildNS))
		}
		return testenv.Unmet(a != nil && a.Phase == banlieuev1.BuildReady, fmt.Sprintf("buildArtifact %+v; pods: %s", a, podStates(ctx, n, buildNS)))
	})
	a := built.Status.BuildArtifact
	want := testenv.FileSHA256(t, guest)
	if a.Checksum != "sha256:"+want || a.File != imageName+".raw" {
		t.Fatalf("buildArtifact %+v, want %s.raw with sha256:%s", *a, imageName, want)
	}
	if got := testenv.FileSHA256(t, filepath.Join(n.dir, artifactsDir, a.File)); got != want {
		t.Errorf("the artifact on the PersistentVolume has sha256 %s, want %s", got, want)
	}
	buildPod := jobPod(t, n, "build-"+imageName)
	if buildPod.Spec.NodeName != n.name || buildPod.Status.Phase != corev1.PodSucceeded {
		t.Errorf("build pod %s: node %q, phase %s; want %s, Succeeded", buildPod.Name, buildPod.Spec.NodeName, buildPod.Status.Phase, n.name)
	}
	t.Logf("built %s (%d bytes) after %v", a.File, a.SizeBytes, time.Since(start).Round(time.Second))

	// The import: one Job per pool, the guide's name, backoffLimit 1, the import account.
	var imported banlieuev1.VMImage
	testenv.Eventually(t, 5*time.Minute, "VMImage "+imageName+" imported", func() error {
		if err := c.Get(ctx, client.ObjectKey{Name: imageName}, &imported); err != nil {
			return err
		}
		for _, r := range imported.Status.PerProvider {
			if r.ProviderName == provider && r.Ready {
				return nil
			}
		}
		return fmt.Errorf("perProvider %+v; pods: %s", imported.Status.PerProvider, podStates(ctx, n, buildNS))
	})
	jobs, err := n.cs.BatchV1().Jobs(buildNS).List(ctx, metav1.ListOptions{
		LabelSelector: banlieuev1.LabelVMImage + "=" + imageName + "," + banlieuev1.LabelComponent + "=libvirt-import"})
	if err != nil || len(jobs.Items) != 1 {
		t.Fatalf("import Jobs: %v (%d, want one per pool)", err, len(jobs.Items))
	}
	job := jobs.Items[0]
	if !strings.HasPrefix(job.Name, "import-"+imageName+"-"+provider+"-") || job.Labels[banlieuev1.LabelStoragePool] != pool ||
		*job.Spec.BackoffLimit != 1 || !jobComplete(&job) {
		t.Errorf("import Job %s: pool %q, backoffLimit %d, complete %v; want import-%s-%s-<pool>-<hash>, pool %s, 1, true",
			job.Name, job.Labels[banlieuev1.LabelStoragePool], *job.Spec.BackoffLimit, jobComplete(&job), imageName, provider, pool)
	}
	importPod := jobPod(t, n, job.Name)
	if sa := importPod.Spec.ServiceAccountName; !strings.HasSuffix(sa, "-import") || !mountsServiceAccountToken(importPod.Spec.Containers[0]) ||
		importPod.Spec.NodeName != n.name {
		t.Errorf("import pod %s: ServiceAccount %q, token mounted %v, node %q; want the Provider's import account with its token on %s",
			importPod.Name, sa, mountsServiceAccountToken(importPod.Spec.Containers[0]), importPod.Spec.NodeName, n.name)
	}
	t.Logf("imported into %s by %s after %v", pool, job.Name, time.Since(start).Round(time.Second))

	// The guide's own commands.
	out := kubectl(t, n, "-n", buildNS, "get", "jobs", "-l", banlieuev1.LabelVMImage+"="+imageName)
	t.Logf("$ kubectl -n %s get jobs -l %s=%s\n%s", buildNS, banlieuev1.LabelVMImage, imageName, out)
	for _, want := range []string{"NAME", "STATUS", "COMPLETIONS", "build-" + imageName, job.Name, "Complete", "1/1"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get jobs printed no %q:\n%s", want, out)
		}
	}
	out = kubectl(t, n, "get", "vmimage", imageName, "-o", "jsonpath={.status.perProvider[*].zones[*]}")
	t.Logf("$ kubectl get vmimage %s -o jsonpath='{.status.perProvider[*].zones[*]}'\n%s", imageName, out)
	if !strings.Contains(out, `"name":"`+pool+`"`) || !strings.Contains(out, `"ready":true`) {
		t.Errorf("the zones jsonpath printed %q, want pool %s ready", out, pool)
	}
	if out := kubectl(t, n, "-n", buildNS, "logs", "job/"+job.Name); strings.TrimSpace(out) == "" {
		t.Errorf("kubectl logs of the import Job printed nothing")
	}

	// The machine.
	for _, o := range []client.Object{class, userData, vm} {
		create(t, c, o)
	}
	domain := systemNS + "-" + vmName
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_ = c.Delete(ctx, vm)
		testenv.Eventually(t, 2*time.Minute, "VirtualMachine "+vmName+" deleted", func() error {
			err := c.Get(ctx, client.ObjectKeyFromObject(vm), &banlieuev1.VirtualMachine{})
			return testenv.Unmet(apierrors.IsNotFound(err), fmt.Sprintf("still there (%v)", err))
		})
		labhost.RemoveDomains(ctx, labhost.Dial(t, lab), domain)
	})
	testenv.Eventually(t, 5*time.Minute, "VirtualMachine "+vmName+" Ready", func() error {
		var got banlieuev1.VirtualMachine
		if err := c.Get(ctx, client.ObjectKeyFromObject(vm), &got); err != nil {
			return err
		}
		return testenv.Unmet(meta.IsStatusConditionTrue(got.Status.Conditions, banlieuev1.ConditionReady),
			fmt.Sprintf("conditions %+v", got.Status.Conditions))
	})
	dom, err := host.DomainLookupByName(ctx, domain)
	if err != nil {
		t.Fatalf("domain %s on the lab host: %v", domain, err)
	}
	if st, _, err := host.DomainState(ctx, dom); err != nil || st != libvirt.DomainRunning {
		t.Fatalf("domain %s: state %v (%v), want running", domain, st, err)
	}
	t.Logf("domain %s running on the lab host %v after the VMImage was created", domain, time.Since(start).Round(time.Second))

	// An OCI containerDisk source (docs/guides/image-sources.md): the same guest pushed to the
	// registry on the same https address, pulled by digest by a build Job pod that trusts it
	// through the same CA option, then imported into the pool.
	start = time.Now()
	const ociImage = "node-oci"
	create(t, c, &banlieuev1.VMImage{
		ObjectMeta: metav1.ObjectMeta{Name: ociImage},
		Spec: banlieuev1.VMImageSpec{
			OSFamily: "linux", OSDistribution: "busybox", OSVersion: "1.35", Architecture: "amd64", GuestAgent: "cloud-init",
			Sources: []banlieuev1.ImageSource{{ProviderClass: "libvirt", Kind: banlieuev1.SourceURL, Ref: ociImage, ImportFrom: ociRef}},
		},
	})
	var oci banlieuev1.VMImage
	testenv.Eventually(t, 5*time.Minute, "VMImage "+ociImage+" built and imported", func() error {
		if err := c.Get(ctx, client.ObjectKey{Name: ociImage}, &oci); err != nil {
			return err
		}
		a := oci.Status.BuildArtifact
		if a != nil && a.Phase == banlieuev1.BuildFailed {
			t.Fatalf("build failed: %+v; pods: %s", *a, podStates(ctx, n, buildNS))
		}
		for _, r := range oci.Status.PerProvider {
			if r.ProviderName == provider && r.Ready {
				return nil
			}
		}
		return fmt.Errorf("buildArtifact %+v, perProvider %+v; pods: %s", a, oci.Status.PerProvider, podStates(ctx, n, buildNS))
	})
	_, digest, _ := strings.Cut(ociRef, "@")
	if a := oci.Status.BuildArtifact; a.SourceDigest != digest || a.Checksum != "sha256:"+want {
		t.Errorf("buildArtifact %+v, want sourceDigest %s and the guest's sha256:%s", *a, digest, want)
	}
	if p := jobPod(t, n, "build-"+ociImage); p.Status.Phase != corev1.PodSucceeded || p.Spec.NodeName != n.name {
		t.Errorf("build pod %s: node %q, phase %s", p.Name, p.Spec.NodeName, p.Status.Phase)
	}
	t.Logf("OCI containerDisk %s built and imported into %s in %v", ociRef, pool, time.Since(start).Round(time.Second))

	exported := exportStoppedVM(t, n, c, vm, exports)
	restoreFromExport(t, n, c, host, class, exported)
}

// exportStoppedVM follows docs/guides/libvirt-provider.md, "Exporting a disk off its host", on
// the real node: the VM powered off, a VirtualMachineExport to the registry at registryHost →
// the controller's export Job runs as a pod on the node under the Provider's export account,
// downloads the disk from the lab host and pushes it → the export is Ready with the digest the
// registry serves, and the VM stays off while the Job copies.
func exportStoppedVM(t *testing.T, n node, c client.Client, vm *banlieuev1.VirtualMachine, registryHost string) (imageRef string) {
	t.Helper()
	ctx := t.Context()
	start := time.Now()
	if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
		t.Fatal(err)
	}
	off := vm.DeepCopy()
	off.Spec.DesiredPowerState, off.Spec.PowerOffMode = banlieuev1.PoweredOff, banlieuev1.PowerOffHard
	if err := c.Patch(ctx, off, client.MergeFrom(vm)); err != nil {
		t.Fatalf("powering %s off: %v", vm.Name, err)
	}
	testenv.Eventually(t, 3*time.Minute, "VirtualMachine "+vm.Name+" Stopped", func() error {
		var got banlieuev1.VirtualMachine
		if err := c.Get(ctx, client.ObjectKeyFromObject(vm), &got); err != nil {
			return err
		}
		return testenv.Unmet(got.Status.Phase == banlieuev1.VMPhaseStopped, fmt.Sprintf("phase %s", got.Status.Phase))
	})
	repo := registryHost + "/exports/" + vm.Name
	export := &banlieuev1.VirtualMachineExport{ObjectMeta: metav1.ObjectMeta{Name: vm.Name + "-export", Namespace: vm.Namespace},
		Spec: banlieuev1.VirtualMachineExportSpec{VirtualMachineName: vm.Name,
			Target: banlieuev1.ExportTarget{Registry: &banlieuev1.ExportRegistryTarget{Repository: repo}}}}
	create(t, c, export)
	var got banlieuev1.VirtualMachineExport
	testenv.Eventually(t, 5*time.Minute, "VirtualMachineExport "+export.Name+" Ready", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(export), &got); err != nil {
			return err
		}
		if got.Status.Phase == banlieuev1.ExportFailed {
			t.Fatalf("export failed: %+v; pods: %s", got.Status, podStates(ctx, n, buildNS))
		}
		return testenv.Unmet(got.Status.Phase == banlieuev1.ExportReady,
			fmt.Sprintf("phase %s, conditions %+v; pods: %s", got.Status.Phase, got.Status.Conditions, podStates(ctx, n, buildNS)))
	})
	// The image the status names, by digest in the export's repository, is in the registry.
	ref, err := name.ParseReference(got.Status.ImageRef, name.Insecure)
	if _, byDigest := ref.(name.Digest); err != nil || !byDigest || ref.Context().String() != repo {
		t.Fatalf("status.imageRef %q (%v): want %s@sha256:…", got.Status.ImageRef, err, repo)
	}
	desc, err := remote.Head(ref, remote.WithContext(ctx))
	if err != nil {
		t.Fatalf("the registry does not serve the export's image %s: %v", ref, err)
	}
	if !strings.HasPrefix(got.Status.Digest, "sha256:") || got.Status.SizeBytes == nil || *got.Status.SizeBytes <= 0 {
		t.Errorf("status digest %q, size %v; want the disk's sha256 and size", got.Status.Digest, got.Status.SizeBytes)
	}
	pod := jobPod(t, n, got.Status.JobName)
	if sa := pod.Spec.ServiceAccountName; !strings.HasSuffix(sa, "-export") || pod.Spec.NodeName != n.name ||
		pod.Status.Phase != corev1.PodSucceeded {
		t.Errorf("export pod %s: ServiceAccount %q, node %q, phase %s; want the Provider's export account, %s, Succeeded",
			pod.Name, sa, pod.Spec.NodeName, pod.Status.Phase, n.name)
	}
	var after banlieuev1.VirtualMachine
	if err := c.Get(ctx, client.ObjectKeyFromObject(vm), &after); err != nil || after.Status.Phase != banlieuev1.VMPhaseStopped {
		t.Errorf("VirtualMachine %s after the export: phase %s (%v), want Stopped", vm.Name, after.Status.Phase, err)
	}
	t.Logf("exported %s (%d bytes, manifest %s) by pod %s in %v", vm.Name, *got.Status.SizeBytes, desc.Digest,
		pod.Name, time.Since(start).Round(time.Second))
	return got.Status.ImageRef
}

// restoreFromExport is the restore of a lost host (docs/guides/libvirt-provider.md, "Exporting a
// disk off its host"): a VMImage whose source is the export's status.imageRef, built by a build
// Job pod and imported, and a new VirtualMachine of it whose domain runs on the lab host.
func restoreFromExport(t *testing.T, n node, c client.Client, host *libvirt.Client, class *banlieuev1.VMClass, imageRef string) {
	t.Helper()
	ctx := t.Context()
	start := time.Now()
	const imageName, vmName = "node-restored", "node-vm-02"
	create(t, c, &banlieuev1.VMImage{
		ObjectMeta: metav1.ObjectMeta{Name: imageName},
		Spec: banlieuev1.VMImageSpec{
			OSFamily: "linux", OSDistribution: "busybox", OSVersion: "1.35", Architecture: "amd64", GuestAgent: "cloud-init",
			Sources:  []banlieuev1.ImageSource{{ProviderClass: "libvirt", Kind: banlieuev1.SourceURL, Ref: imageName, ImportFrom: imageRef}},
			Template: &banlieuev1.VMImageTemplate{InstallMode: "immediate"},
		},
	})
	vm := &banlieuev1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: vmName, Namespace: systemNS},
		Spec: banlieuev1.VirtualMachineSpec{
			ClassRef: banlieuev1.LocalObjectReference{Name: class.Name}, ImageRef: banlieuev1.LocalObjectReference{Name: imageName},
			DesiredPowerState: banlieuev1.PoweredOn, MigrationPolicy: "never",
		},
	}
	if err := c.Create(ctx, vm); err != nil {
		t.Fatalf("creating VirtualMachine %s: %v", vmName, err)
	}
	domain := systemNS + "-" + vmName
	t.Cleanup(func() { // the VM deleted by banlieue first; a domain it left is then removed
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_ = c.Delete(ctx, vm)
		testenv.WaitGone(ctx, t, c, vm, 2*time.Minute)
		labhost.RemoveDomains(ctx, host, domain)
	})
	testenv.Eventually(t, 8*time.Minute, "VirtualMachine "+vmName+" Ready from the export", func() error {
		var img banlieuev1.VMImage
		if err := c.Get(ctx, client.ObjectKey{Name: imageName}, &img); err != nil {
			return err
		}
		if a := img.Status.BuildArtifact; a != nil && a.Phase == banlieuev1.BuildFailed {
			t.Fatalf("the build of the export failed: %+v; pods: %s", *a, podStates(ctx, n, buildNS))
		}
		var got banlieuev1.VirtualMachine
		if err := c.Get(ctx, client.ObjectKeyFromObject(vm), &got); err != nil {
			return err
		}
		return testenv.Unmet(meta.IsStatusConditionTrue(got.Status.Conditions, banlieuev1.ConditionReady),
			fmt.Sprintf("VM conditions %+v; image %+v; pods: %s", got.Status.Conditions, img.Status.BuildArtifact, podStates(ctx, n, buildNS)))
	})
	dom, err := host.DomainLookupByName(ctx, domain)
	if err != nil {
		t.Fatalf("domain %s on the lab host: %v", domain, err)
	}
	if st, _, err := host.DomainState(ctx, dom); err != nil || st != libvirt.DomainRunning {
		t.Fatalf("domain %s: state %v (%v), want running", domain, st, err)
	}
	t.Logf("VirtualMachine %s from the export %s running after %v", vmName, imageRef, time.Since(start).Round(time.Second))
}

// plainRegistry serves an in-memory OCI registry over plain HTTP on the node's bridge address,
// where pods reach the host, until t ends, and returns its host:port.
func plainRegistry(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(nodeIP, "0"))
	if err != nil {
		t.Fatalf("listening on the node's bridge: %v", err)
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0))), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String()
}

// installForSources installs the release for builds from hack/labsource on the node's bridge:
// the artifacts PersistentVolume, the chart with the trust option for a private CA
// (imagebuilder.jobs.caBundleConfigMap) and the allow-list for the source's network, and then
// the trust option as the guide gives it, a ConfigMap of CA bundles in the build namespace; extra
// are more of the chart's flags. It returns a client of the node's API server.
func installForSources(t *testing.T, n node, caPEM []byte, extra ...string) client.Client {
	t.Helper()
	importImage(t)
	artifactsPV(t, n)
	installChart(t, n, append([]string{"--set", "imagebuilder.jobs.caBundleConfigMap=" + sourceCA,
		"--set", "imagebuilder.limits.allowNetworks={" + nodeIP + "/32}"}, extra...)...)
	waitRolesReady(t, n, corev1.PullNever)
	c := n.client(t)
	create(t, c, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: sourceCA, Namespace: buildNS},
		Data: map[string]string{"ca.crt": string(caPEM)}})
	return c
}

// create creates o and, when t ends, deletes it and waits until it is gone: a Provider's
// workload and a VMImage's finalizer are the release's to remove before helm uninstall runs
// (cleanups run last first).
func create(t *testing.T, c client.Client, o client.Object) {
	t.Helper()
	if err := c.Create(t.Context(), o); err != nil {
		t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
	}
	deleteWhenDone(t, c, o)
}

// deleteWhenDone deletes o when t ends and waits until it is gone.
func deleteWhenDone(t *testing.T, c client.Client, o client.Object) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_ = c.Delete(ctx, o)
		testenv.WaitGone(ctx, t, c, o, 2*time.Minute)
	})
}

// guestImage is the tiny guest of hack/test-guest-image.sh (built once, cached).
func guestImage(t *testing.T) string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), filepath.Join(testenv.RepoRoot(), "hack", "test-guest-image.sh")).Output()
	if err != nil {
		t.Fatalf("hack/test-guest-image.sh: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return filepath.Join(lines[len(lines)-1], "guest.raw")
}

// httpsSource serves dir over https on the node's bridge address, where pods reach the host,
// with hack/labsource (as hack/lab.sh up serves its guest): a certificate from a CA of its own,
// which no system trusts. On the same address its registry holds containerDisk as an OCI
// image. It returns the CA's PEM, the base URL and the image's reference by digest.
func httpsSource(t *testing.T, dir, containerDisk string) (caPEM []byte, baseURL, ociRef string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "labsource")
	build := exec.Command("go", "build", "-o", bin, "./hack/labsource")
	build.Dir = testenv.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./hack/labsource: %v\n%s", err, out)
	}
	pki := t.TempDir()
	cmd := exec.Command(bin, "--dir", dir, "--listen", net.JoinHostPort(nodeIP, "0"), "--pki", pki, "--containerdisk", containerDisk)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	out := bufio.NewReader(stdout)
	line, err := out.ReadString('\n')
	if err != nil {
		t.Fatalf("hack/labsource printed no address: %v", err)
	}
	base, _, _ := strings.Cut(strings.TrimSpace(line), " ")
	if line, err = out.ReadString('\n'); err != nil {
		t.Fatalf("hack/labsource printed no containerDisk reference: %v", err)
	}
	ref := strings.TrimSpace(line)
	caPEM, err = os.ReadFile(filepath.Join(pki, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	return caPEM, base, ref
}

// nodeIP is hack/node.sh's bridge address, the node IP: the host as pods reach it.
const nodeIP = "10.244.0.1"

// artifactsPV gives the chart's artifacts PVC a local PersistentVolume on the node, under the
// node's state directory; the build pod's fsGroup makes it writable for the non-root build.
func artifactsPV(t *testing.T, n node) {
	t.Helper()
	testenv.LocalVolume(t, n.client(t), "banlieue-node-artifacts", n.name, filepath.Join(n.dir, artifactsDir), buildNS, "banlieue-artifacts")
}

// jobPod is the last pod of the Job name in the build namespace.
func jobPod(t *testing.T, n node, name string) corev1.Pod {
	t.Helper()
	pods, err := n.cs.CoreV1().Pods(buildNS).List(t.Context(), metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + name})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("pods of Job %s: %v (%d)", name, err, len(pods.Items))
	}
	return pods.Items[len(pods.Items)-1]
}

func jobComplete(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// kubectl runs the envtest kubectl (hack/envtest-assets.sh) with the node's kubeconfig, as the
// guide's commands run.
func kubectl(t *testing.T, n node, args ...string) string {
	t.Helper()
	return kubectlIn(t.Context(), t, n, args...)
}

// kubectlIn is kubectl under ctx: a cleanup's, which outlives t.Context().
func kubectlIn(ctx context.Context, t *testing.T, n node, args ...string) string {
	t.Helper()
	assets, err := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "envtest-assets.sh")).Output()
	if err != nil {
		t.Fatalf("hack/envtest-assets.sh: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(assets)), "\n")
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(lines[len(lines)-1], "kubectl"), append([]string{"--kubeconfig", filepath.Join(n.dir, "kubeconfig")}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}
