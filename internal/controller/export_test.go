package controller

import (
	"encoding/json"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/vmexport/exportjob"
)

func readyOfExport(st banlieuev1.VirtualMachineExportStatus) (string, string) {
	for _, c := range st.Conditions {
		if c.Type == banlieuev1.ConditionReady {
			return string(c.Status) + "/" + c.Reason, c.Message
		}
	}
	return "", ""
}

func TestStepExport(t *testing.T) {
	now := metav1.Now()
	vm := func(phase banlieuev1.VirtualMachinePhase, deleting bool) *banlieuev1.VirtualMachine {
		v := &banlieuev1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "web-01"}}
		v.Status.Phase = phase
		if deleting {
			v.DeletionTimestamp = &now
		}
		return v
	}
	for _, tc := range []struct {
		name    string
		vm      *banlieuev1.VirtualMachine
		phase   banlieuev1.ExportPhase
		reason  string
		message string
		final   bool
	}{
		{"no such VM", nil, banlieuev1.ExportFailed, banlieuev1.ReasonExportTargetInvalid,
			"spec.virtualMachineName: VirtualMachine " + testNS + "/web-01 does not exist", true},
		{"VM being deleted", vm(banlieuev1.VMPhaseStopped, true), banlieuev1.ExportFailed, banlieuev1.ReasonExportTargetInvalid,
			"spec.virtualMachineName: VirtualMachine web-01 is being deleted", true},
		{"VM runs", vm(banlieuev1.VMPhaseReady, false), banlieuev1.ExportPending, banlieuev1.ReasonExportVMRunning,
			"spec.virtualMachineName: VirtualMachine web-01 is Ready, not Stopped", false},
		{"VM suspended", vm(banlieuev1.VMPhaseSuspended, false), banlieuev1.ExportPending, banlieuev1.ReasonExportVMRunning,
			"is Suspended, not Stopped", false},
		{"VM paused", vm(banlieuev1.VMPhasePaused, false), banlieuev1.ExportPending, banlieuev1.ReasonExportVMRunning,
			"is Paused, not Stopped", false},
		{"VM provisioning", vm(banlieuev1.VMPhaseProvisioning, false), banlieuev1.ExportPending, banlieuev1.ReasonExportVMRunning,
			"is Provisioning, not Stopped", false},
		{"VM without a phase yet", vm("", false), banlieuev1.ExportPending, banlieuev1.ReasonExportVMRunning,
			"is unknown, not Stopped", false},
		{"VM stopped", vm(banlieuev1.VMPhaseStopped, false), banlieuev1.ExportPending, banlieuev1.ReasonExportPending,
			"export Jobs are not configured (banlieue-controller --export-image)", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &banlieuev1.VirtualMachineExport{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "backup", Generation: 1},
				Spec: banlieuev1.VirtualMachineExportSpec{VirtualMachineName: "web-01"}}
			st := stepExport(e, tc.vm, now, false)
			ready, msg := readyOfExport(st)
			if st.Phase != tc.phase || ready != "False/"+tc.reason || !strings.Contains(msg, tc.message) {
				t.Errorf("phase %s Ready %s %q, want %s False/%s containing %q", st.Phase, ready, msg, tc.phase, tc.reason, tc.message)
			}
			if (st.CompletedAt != nil) != tc.final || st.ObservedGeneration != 1 {
				t.Errorf("completedAt %v observedGeneration %d, want completedAt set %v, generation 1", st.CompletedAt, st.ObservedGeneration, tc.final)
			}
			// A second pass on its own result changes nothing: the reconciler writes once.
			e.Status = st
			if again := stepExport(e, tc.vm, metav1.Now(), false); !equality.Semantic.DeepEqual(again, st) {
				t.Errorf("a second pass changed the status:\n%+v\n%+v", st, again)
			}
		})
	}
}

func TestStepExportWithJobs(t *testing.T) {
	e := &banlieuev1.VirtualMachineExport{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "backup", Generation: 1},
		Spec: banlieuev1.VirtualMachineExportSpec{VirtualMachineName: "web-01"}}
	vm := &banlieuev1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "web-01"}}
	vm.Status.Phase = banlieuev1.VMPhaseStopped
	st := stepExport(e, vm, metav1.Now(), true)
	if _, msg := readyOfExport(st); st.Phase != banlieuev1.ExportPending || !strings.Contains(msg, "being created") {
		t.Errorf("phase %s %q: with Jobs configured a stopped VM's export is about to start", st.Phase, msg)
	}
}

// TestExportJobStatus: the export's status from its Job: the result of its own Job only, the
// published fields written once Ready, and a Job gone before it reported a failure.
func TestExportJobStatus(t *testing.T) {
	now := metav1.Now()
	e := &banlieuev1.VirtualMachineExport{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "backup", Generation: 1, UID: "u-1"},
		Spec: banlieuev1.VirtualMachineExportSpec{VirtualMachineName: "web-01",
			Target: banlieuev1.ExportTarget{Registry: &banlieuev1.ExportRegistryTarget{Repository: "registry.example/team/web"}}}}
	e.Status.Phase, e.Status.JobName = banlieuev1.ExportExporting, exportjob.JobName("u-1")
	digest, image := "sha256:"+strings.Repeat("1", 64), "registry.example/team/web@sha256:"+strings.Repeat("2", 64)
	job := func(annotation string, done bool) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "banlieue-imagebuild", Name: exportjob.JobName("u-1"),
			Annotations: map[string]string{exportjob.AnnotationExport: annotation}}}
		if done {
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
		}
		return j
	}
	ours := exportjob.ExportRef(testNS, "backup", "u-1")
	encoded, err := json.Marshal(exportjob.Report{MachineResult: &exportjob.MachineResult{Result: exportjob.Result{Size: 42, Digest: digest}, Image: image}})
	if err != nil {
		t.Fatal(err)
	}
	report := string(encoded)
	for _, tc := range []struct {
		name   string
		job    *batchv1.Job
		msg    string
		phase  banlieuev1.ExportPhase
		ready  string
		inMsg  string
		result bool
	}{
		{"running", job(ours, false), "", banlieuev1.ExportExporting, "False/" + banlieuev1.ReasonExporting, "held stopped", false},
		{"running, its start unwritten", func() *batchv1.Job { j := job(ours, false); j.CreationTimestamp = now; return j }(), "",
			banlieuev1.ExportExporting, "False/" + banlieuev1.ReasonExporting, "held stopped", false},
		{"done", job(ours, true), report, banlieuev1.ExportReady, "True/" + banlieuev1.ReasonExportSucceeded, image, true},
		{"gone", nil, "", banlieuev1.ExportFailed, "False/" + banlieuev1.ReasonExportJobFailed, "deleted before it reported", false},
		{"another's", job("other/backup/u-2", true), report, banlieuev1.ExportFailed, "False/" + banlieuev1.ReasonExportJobFailed,
			"not this export's", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := exportJobStatus(e, tc.job, tc.msg, now)
			ready, msg := readyOfExport(st)
			if st.Phase != tc.phase || ready != tc.ready || !strings.Contains(msg, tc.inMsg) {
				t.Errorf("phase %s Ready %s %q, want %s %s containing %q", st.Phase, ready, msg, tc.phase, tc.ready, tc.inMsg)
			}
			if got := st.Digest == digest && st.ImageRef == image && st.SizeBytes != nil && *st.SizeBytes == 42; got != tc.result {
				t.Errorf("result written %v (digest %q image %q), want %v", got, st.Digest, st.ImageRef, tc.result)
			}
			if tc.job != nil && tc.job.Annotations[exportjob.AnnotationExport] == ours && st.StartedAt == nil {
				t.Errorf("a status read from Job %s has no startedAt", st.JobName)
			}
			if tc.phase.Final() != (st.CompletedAt != nil) {
				t.Errorf("completedAt %v for phase %s", st.CompletedAt, st.Phase)
			}
			e2 := e.DeepCopy()
			e2.Status = st
			if again := exportJobStatus(e2, tc.job, tc.msg, metav1.Now()); !equality.Semantic.DeepEqual(again, st) {
				t.Errorf("a second pass changed the status:\n%+v\n%+v", st, again)
			}
		})
	}
}

func TestExportTargetRefusal(t *testing.T) {
	for _, tc := range []struct {
		name   string
		target banlieuev1.ExportTarget
		want   string
	}{
		{"anonymous registry", banlieuev1.ExportTarget{Registry: &banlieuev1.ExportRegistryTarget{Repository: "r.example/x"}}, ""},
		{"claim", banlieuev1.ExportTarget{PersistentVolumeClaim: &banlieuev1.ExportPVCTarget{ClaimName: "backups"}},
			"spec.target.persistentVolumeClaim: claim " + testNS + "/backups cannot be mounted"},
		{"credentials", banlieuev1.ExportTarget{Registry: &banlieuev1.ExportRegistryTarget{Repository: "r.example/x",
			CredentialsSecretRef: &banlieuev1.ExportSecretReference{Name: "push"}}}, "spec.target.registry.credentialsSecretRef: Secret " + testNS + "/push"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &banlieuev1.VirtualMachineExport{ObjectMeta: metav1.ObjectMeta{Namespace: testNS}, Spec: banlieuev1.VirtualMachineExportSpec{Target: tc.target}}
			got := exportTargetRefusal(e)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("refusal %q, want %q", got, tc.want)
			}
		})
	}
}

func TestExportHolds(t *testing.T) {
	now := metav1.Now()
	exp := func(phase banlieuev1.ExportPhase, deleting bool) banlieuev1.VirtualMachineExport {
		e := banlieuev1.VirtualMachineExport{Spec: banlieuev1.VirtualMachineExportSpec{VirtualMachineName: "web-01"},
			Status: banlieuev1.VirtualMachineExportStatus{Phase: phase}}
		if deleting {
			e.DeletionTimestamp = &now
		}
		return e
	}
	other := exp(banlieuev1.ExportExporting, false)
	other.Spec.VirtualMachineName = "web-02"
	for _, tc := range []struct {
		name    string
		exports []banlieuev1.VirtualMachineExport
		want    bool
	}{
		{"none", nil, false},
		{"pending and done", []banlieuev1.VirtualMachineExport{exp(banlieuev1.ExportPending, false), exp(banlieuev1.ExportReady, false), exp(banlieuev1.ExportFailed, false)}, false},
		{"one copying", []banlieuev1.VirtualMachineExport{exp(banlieuev1.ExportReady, false), exp(banlieuev1.ExportExporting, false)}, true},
		{"copying but deleted", []banlieuev1.VirtualMachineExport{exp(banlieuev1.ExportExporting, true)}, false},
		{"another VM's copying", []banlieuev1.VirtualMachineExport{other}, false},
	} {
		if got := exportHolds("web-01", tc.exports); got != tc.want {
			t.Errorf("%s: exportHolds = %v, want %v", tc.name, got, tc.want)
		}
	}
}
