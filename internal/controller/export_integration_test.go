package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/operator"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/internal/vmexport/exportjob"
)

func (s *suite) waitExport(ctx context.Context, t *testing.T, ns, name, what string,
	ok func(*banlieuev1.VirtualMachineExport) bool) *banlieuev1.VirtualMachineExport {
	t.Helper()
	var e banlieuev1.VirtualMachineExport
	testenv.Eventually(t, 3*waitTimeout, "export "+name+" "+what, func() error {
		if err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &e); err != nil {
			return err
		}
		ready, msg := readyOfExport(e.Status)
		return testenv.Unmet(ok(&e), fmt.Sprintf("phase %s, Ready %s: %s", e.Status.Phase, ready, msg))
	})
	return &e
}

// testExport: an export is owned by its VM, refused while the VM runs and let through once it
// stops; one naming no VM fails naming the field.
func (s *suite) testExport(ctx context.Context, t *testing.T) {
	ns := "export"
	s.namespace(ctx, t, ns)
	s.provider(ctx, t, ns, guideProvider, "libvirt")
	s.image(ctx, t, "export", banlieuev1.InstallImmediate, readyRowIn(ns, guideProvider))
	vm := guideVM(ns, "web-01", "small", "export", nil)
	s.create(ctx, t, vm)
	m := s.waitMachine(ctx, t, ns, vm.Name)
	machineStatus := func(power banlieuev1.PowerState, ready metav1.ConditionStatus, reason, msg string) {
		s.machineStatus(ctx, t, m, infrav1.LibvirtMachineStatus{
			Initialization:     &banlieuev1.InitializationStatus{Provisioned: ptr.To(true)},
			DomainUUID:         "6f1c0f43-7d3c-4c36-9f3f-1b7f0e4a8c13",
			ObservedPowerState: power,
			Conditions: []metav1.Condition{{Type: banlieuev1.ConditionReady, Status: ready, Reason: reason, Message: msg,
				LastTransitionTime: metav1.Now()}},
		})
	}
	machineStatus(banlieuev1.PoweredOn, metav1.ConditionTrue, infrav1.ReasonDomainRunning, "domain is defined and running")
	s.waitVM(ctx, t, ns, vm.Name, "phase Ready", func(vm *banlieuev1.VirtualMachine) bool {
		return vm.Status.Phase == banlieuev1.VMPhaseReady
	})

	exp := &banlieuev1.VirtualMachineExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-01-backup"},
		Spec: banlieuev1.VirtualMachineExportSpec{VirtualMachineName: vm.Name,
			Target: banlieuev1.ExportTarget{PersistentVolumeClaim: &banlieuev1.ExportPVCTarget{ClaimName: "backups"}}}}
	s.create(ctx, t, exp)
	got := s.waitExport(ctx, t, ns, exp.Name, "refused while the VM runs", func(e *banlieuev1.VirtualMachineExport) bool {
		ready, _ := readyOfExport(e.Status)
		return e.Status.Phase == banlieuev1.ExportPending && ready == "False/"+banlieuev1.ReasonExportVMRunning
	})
	if _, msg := readyOfExport(got.Status); !strings.Contains(msg, "spec.virtualMachineName: VirtualMachine web-01 is Ready, not Stopped") {
		t.Errorf("ExportVMRunning message %q does not name the field and the VM's phase", msg)
	}
	var owner banlieuev1.VirtualMachine
	if err := s.c.Get(ctx, client.ObjectKeyFromObject(vm), &owner); err != nil {
		t.Fatal(err)
	}
	refs := got.OwnerReferences
	if len(refs) != 1 || refs[0].UID != owner.UID || refs[0].Kind != "VirtualMachine" || refs[0].Name != vm.Name {
		t.Errorf("export's owner references %+v, want the VirtualMachine %s (uid %s) alone", refs, vm.Name, owner.UID)
	}

	// The VM stops: a claim cannot reach the Job in the build namespace, so that export fails
	// naming the field.
	s.patchVM(ctx, t, ns, vm.Name, func(vm *banlieuev1.VirtualMachine) { vm.Spec.DesiredPowerState = banlieuev1.PoweredOff })
	machineStatus(banlieuev1.PoweredOff, metav1.ConditionFalse, infrav1.ReasonDomainNotRunning,
		"domain is defined and off (ShutOff), as spec.desiredPowerState PoweredOff asks")
	got = s.waitExport(ctx, t, ns, exp.Name, "refused: a claim is not served by the Job", func(e *banlieuev1.VirtualMachineExport) bool {
		return e.Status.Phase == banlieuev1.ExportFailed
	})
	if ready, msg := readyOfExport(got.Status); ready != "False/"+banlieuev1.ReasonExportTargetInvalid ||
		!strings.HasPrefix(msg, "spec.target.persistentVolumeClaim: claim export/backups cannot be mounted") {
		t.Errorf("claim export: Ready %s %q", ready, msg)
	}

	s.testExportJob(ctx, t, ns, vm.Name, m)

	orphan := &banlieuev1.VirtualMachineExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nothing"},
		Spec: banlieuev1.VirtualMachineExportSpec{VirtualMachineName: "absent",
			Target: banlieuev1.ExportTarget{Registry: &banlieuev1.ExportRegistryTarget{Repository: "registry.example/absent"}}}}
	s.create(ctx, t, orphan)
	got = s.waitExport(ctx, t, ns, orphan.Name, "Failed naming the field", func(e *banlieuev1.VirtualMachineExport) bool {
		return e.Status.Phase == banlieuev1.ExportFailed
	})
	if ready, msg := readyOfExport(got.Status); ready != "False/"+banlieuev1.ReasonExportTargetInvalid ||
		msg != "spec.virtualMachineName: VirtualMachine export/absent does not exist" || got.Status.CompletedAt == nil {
		t.Errorf("export of a missing VM: Ready %s %q completedAt %v", ready, msg, got.Status.CompletedAt)
	}
	if len(got.OwnerReferences) != 0 {
		t.Errorf("export of a missing VM has owner references %+v", got.OwnerReferences)
	}
}

// testExportJob: a registry export of the stopped VM gets its Job in the build namespace (the
// machine's own volume, the Provider's export account, bounded, marked with the export), the VM
// is held off while it copies whatever its desiredPowerState says, and the Job's report (played
// here: envtest runs no Job controller or kubelet) is the export's result; the hold then lifts.
func (s *suite) testExportJob(ctx context.Context, t *testing.T, ns, vmName string, m *infrav1.LibvirtMachine) {
	s.machineStatus(ctx, t, m, infrav1.LibvirtMachineStatus{
		Initialization:     &banlieuev1.InitializationStatus{Provisioned: ptr.To(true)},
		DomainUUID:         "6f1c0f43-7d3c-4c36-9f3f-1b7f0e4a8c13",
		ObservedPowerState: banlieuev1.PoweredOff,
		Volumes:            []string{m.Spec.DomainName + "-" + m.Spec.Disks[0].Name + ".qcow2"},
		Conditions: []metav1.Condition{{Type: banlieuev1.ConditionReady, Status: metav1.ConditionFalse, Reason: infrav1.ReasonDomainNotRunning,
			Message: "domain is defined and off (ShutOff), as spec.desiredPowerState PoweredOff asks", LastTransitionTime: metav1.Now()}},
	})
	const repo = "registry.example:5000/export/web-01"
	exp := &banlieuev1.VirtualMachineExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-01-push"},
		Spec: banlieuev1.VirtualMachineExportSpec{VirtualMachineName: vmName,
			Target: banlieuev1.ExportTarget{Registry: &banlieuev1.ExportRegistryTarget{Repository: repo}}}}
	s.create(ctx, t, exp)
	got := s.waitExport(ctx, t, ns, exp.Name, "Exporting with its Job", func(e *banlieuev1.VirtualMachineExport) bool {
		return e.Status.Phase == banlieuev1.ExportExporting
	})
	if got.Status.JobName != exportjob.JobName(string(got.UID)) || got.Status.StartedAt == nil {
		t.Errorf("jobName %q startedAt %v", got.Status.JobName, got.Status.StartedAt)
	}
	var job batchv1.Job
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: exportBuildNamespace, Name: got.Status.JobName}, &job); err != nil {
		t.Fatal(err)
	}
	var p banlieuev1.Provider
	if err := s.c.Get(ctx, m.ProviderKey(), &p); err != nil {
		t.Fatal(err)
	}
	wantSA := operator.ExportAccountName(operator.WorkloadName(p.Spec.ProviderClassRef.Name, p.Namespace, p.Name))
	pod := job.Spec.Template.Spec
	args := strings.Join(pod.Containers[0].Args, " ")
	if pod.ServiceAccountName != wantSA || job.Spec.ActiveDeadlineSeconds == nil ||
		job.Annotations[exportjob.AnnotationExport] != exportjob.ExportRef(ns, exp.Name, string(got.UID)) ||
		!strings.Contains(args, "--volume "+m.Spec.DomainName+"-"+m.Spec.Disks[0].Name+".qcow2 --pool "+m.Spec.Pool+" --domain "+m.Spec.DomainName+
			" --provider "+p.Name+" --provider-namespace "+p.Namespace+" --id "+string(got.UID)+" --registry "+repo) {
		t.Errorf("Job: account %q (want %q), deadline %v, annotations %v, args %q", pod.ServiceAccountName, wantSA,
			job.Spec.ActiveDeadlineSeconds, job.Annotations, args)
	}

	// The user asks for the VM to run while the disk is copied: the machine stays off.
	s.patchVM(ctx, t, ns, vmName, func(vm *banlieuev1.VirtualMachine) { vm.Spec.DesiredPowerState = banlieuev1.PoweredOn })
	s.waitVM(ctx, t, ns, vmName, "desiredPowerState PoweredOn seen", func(vm *banlieuev1.VirtualMachine) bool {
		return vm.Status.ObservedGeneration == vm.Generation
	})
	held := s.waitMachineWhere(ctx, t, ns, vmName, "held off", func(lm *infrav1.LibvirtMachine) bool {
		return lm.Spec.DesiredPowerState == banlieuev1.PoweredOff
	})
	if held.Spec.DesiredPowerState != banlieuev1.PoweredOff {
		t.Fatalf("the machine of a VM being exported is %s", held.Spec.DesiredPowerState)
	}

	// The Job's pod reports and the Job completes.
	digest, image := "sha256:"+strings.Repeat("c", 64), repo+"@sha256:"+strings.Repeat("d", 64)
	// The report as the export command writes it (vmexport.EncodeReport, whose round trip
	// through JobOutcome internal/vmexport's tests hold).
	report, err := json.Marshal(exportjob.Report{MachineResult: &exportjob.MachineResult{Result: exportjob.Result{Size: 5 << 20, Digest: digest}, Image: image}})
	if err != nil {
		t.Fatal(err)
	}
	jobPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: exportBuildNamespace, Name: job.Name + "-x",
		Labels: map[string]string{batchv1.JobNameLabel: job.Name}}, Spec: pod}
	s.create(ctx, t, jobPod)
	jobPod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: exportjob.ContainerName, Image: pod.Containers[0].Image,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Message: string(report)}}}}
	jobPod.Status.Phase = corev1.PodSucceeded
	if err := s.c.Status().Update(ctx, jobPod); err != nil {
		t.Fatal(err)
	}
	start := metav1.NewTime(time.Now().Add(-time.Minute))
	end := metav1.Now()
	job.Status = batchv1.JobStatus{StartTime: &start, CompletionTime: &end, Succeeded: 1, Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: end},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: end}}}
	if err := s.c.Status().Update(ctx, &job); err != nil {
		t.Fatal(err)
	}
	got = s.waitExport(ctx, t, ns, exp.Name, "Ready with the Job's result", func(e *banlieuev1.VirtualMachineExport) bool {
		return e.Status.Phase == banlieuev1.ExportReady
	})
	if ready, _ := readyOfExport(got.Status); ready != "True/"+banlieuev1.ReasonExportSucceeded || got.Status.Digest != digest ||
		got.Status.ImageRef != image || got.Status.SizeBytes == nil || *got.Status.SizeBytes != 5<<20 || got.Status.CompletedAt == nil {
		t.Errorf("Ready export: %s, digest %q image %q size %v", ready, got.Status.Digest, got.Status.ImageRef, got.Status.SizeBytes)
	}
	s.waitMachineWhere(ctx, t, ns, vmName, "the hold lifted: the user's PoweredOn applies", func(lm *infrav1.LibvirtMachine) bool {
		return lm.Spec.DesiredPowerState == banlieuev1.PoweredOn
	})
}
