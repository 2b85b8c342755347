package image

import (
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

func TestTargetPools(t *testing.T) {
	p := &banlieuev1.Provider{
		Spec: banlieuev1.ProviderSpec{Capabilities: banlieuev1.ProviderCapabilities{StorageClasses: []banlieuev1.StorageClassMapping{
			{Name: "gold", Target: map[string]string{"pool": "nvme"}},
			{Name: "standard", Target: map[string]string{"pool": "default"}},
			{Name: "std2", Target: map[string]string{"pool": "default"}},
			{Name: "absent", Target: map[string]string{"pool": "gone"}},
			{Name: "untargeted"},
		}}},
		Status: banlieuev1.ProviderStatus{FailureDomains: []banlieuev1.FailureDomain{{Attributes: banlieuev1.FailureDomainAttributes{
			AvailableStorageClasses: []string{"standard", "std2", "gold", "untargeted"}}}}},
	}
	if got := targetPools(p); !slices.Equal(got, []string{"nvme", "default"}) {
		t.Errorf("targetPools = %q", got)
	}
	p.Status.FailureDomains = nil
	if got := targetPools(p); len(got) != 0 {
		t.Errorf("without failure domains nothing is verified: %q", got)
	}
}

func TestBuildGate(t *testing.T) {
	p := &banlieuev1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	for _, tc := range []struct {
		artifact *banlieuev1.BuildArtifact
		reason   string
	}{
		{nil, banlieuev1.ReasonBuildPending},
		{&banlieuev1.BuildArtifact{Phase: banlieuev1.BuildPending}, banlieuev1.ReasonBuildPending},
		{&banlieuev1.BuildArtifact{Phase: banlieuev1.BuildBuilding}, banlieuev1.ReasonBuildPending},
		{&banlieuev1.BuildArtifact{Phase: banlieuev1.BuildFailed, Message: "404"}, banlieuev1.ReasonBuildFailed},
		// The volume is named by the artifact's sha256: without one there is no name.
		{&banlieuev1.BuildArtifact{Phase: banlieuev1.BuildReady, File: "x.raw", PVCRef: &banlieuev1.LocalObjectReference{Name: "pvc"}}, banlieuev1.ReasonBuildPending},
		{&banlieuev1.BuildArtifact{Phase: banlieuev1.BuildReady, File: "x.raw", PVCRef: &banlieuev1.LocalObjectReference{Name: "pvc"},
			Checksum: "sha512:" + strings.Repeat("ab", 64)}, banlieuev1.ReasonBuildPending},
	} {
		row, gated := buildGate(p, tc.artifact)
		if !gated || row.Ready || row.Reason != tc.reason || row.ProviderName != "p" || row.ProviderNamespace != "ns" {
			t.Errorf("%+v: row %+v gated %v", tc.artifact, row, gated)
		}
	}
	ready := &banlieuev1.BuildArtifact{Phase: banlieuev1.BuildReady, File: "x.raw", PVCRef: &banlieuev1.LocalObjectReference{Name: "pvc"},
		Checksum: "sha256:" + digestA}
	if _, gated := buildGate(p, ready); gated {
		t.Error("a Ready artifact must not be gated")
	}
}

func TestURLRowAndJobZones(t *testing.T) {
	p := &banlieuev1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	done := jobZone("a", &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j"}, Status: batchv1.JobStatus{Succeeded: 1}})
	running := jobZone("b", &batchv1.Job{Status: batchv1.JobStatus{Active: 1}})
	retrying := jobZone("b", &batchv1.Job{Status: batchv1.JobStatus{Active: 1, Failed: 1}})
	// The first pod failed and the retry is not created yet (the Job controller's back-off).
	backingOff := jobZone("b", &batchv1.Job{Status: batchv1.JobStatus{Failed: 1}})
	failed := jobZone("c", &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "jc"}, Status: batchv1.JobStatus{Failed: 2,
		Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded}}}})
	failing := jobZone("c", &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "jc"}, Status: batchv1.JobStatus{Failed: 2, Active: 0,
		Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded}}}})
	if !done.Ready || done.ResolvedRef != "a/j" || done.Reason != banlieuev1.ReasonReconciled {
		t.Errorf("succeeded: %+v", done)
	}
	if running.Reason != banlieuev1.ReasonImporting || retrying.Reason != banlieuev1.ReasonImporting || backingOff.Reason != banlieuev1.ReasonImporting ||
		failed.Reason != banlieuev1.ReasonImportFailed || failed.Message != "import Job jc failed" || failing != failed {
		t.Errorf("running %+v retrying %+v backing off %+v failed %+v failing %+v", running, retrying, backingOff, failed, failing)
	}
	if r := urlRow(p, "img.raw", []banlieuev1.ImageZoneStatus{done, done}); !r.Ready || r.ResolvedRef != "img.raw" || r.Reason != banlieuev1.ReasonReconciled {
		t.Errorf("all ready: %+v", r)
	}
	if r := urlRow(p, "img.raw", []banlieuev1.ImageZoneStatus{done, running}); r.Ready || r.ResolvedRef != "" || r.Reason != banlieuev1.ReasonImporting {
		t.Errorf("one running: %+v", r)
	}
	if r := urlRow(p, "img.raw", []banlieuev1.ImageZoneStatus{running, failed}); r.Ready || r.Reason != banlieuev1.ReasonImportFailed {
		t.Errorf("one failed: %+v", r)
	}
	notGranted := notReadyZone("d", banlieuev1.ReasonJobsNotGranted, "this provider may not read import Job x")
	if r := urlRow(p, "img.raw", []banlieuev1.ImageZoneStatus{failed, notGranted, done}); r.Ready || r.Reason != banlieuev1.ReasonJobsNotGranted ||
		r.Message != notGranted.Message {
		t.Errorf("the Jobs grant missing: %+v", r)
	}
}

func TestRowHelpers(t *testing.T) {
	if backingFileVolume("/var/lib/libvirt/images/golden.qcow2") != "golden.qcow2" {
		t.Error("BackingFile volume is the ref's basename")
	}
	rows := []banlieuev1.ProviderImageStatus{{ProviderNamespace: "b", ProviderName: "a"}, {ProviderNamespace: "a", ProviderName: "z"}, {ProviderNamespace: "a", ProviderName: "b"}}
	sortRows(rows)
	if rows[0].ProviderName != "b" || rows[1].ProviderName != "z" || rows[2].ProviderNamespace != "b" {
		t.Errorf("sorted %+v", rows)
	}
}

func TestGatedZones(t *testing.T) {
	p := &banlieuev1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	row, _ := buildGate(p, nil)
	got := gatedZones(row, []string{"nvme", "default"})
	if got.Reason != banlieuev1.ReasonBuildPending || len(got.Zones) != 2 {
		t.Fatalf("row %+v", got)
	}
	for i, pool := range []string{"nvme", "default"} {
		if z := got.Zones[i]; z.Name != pool || z.Ready || z.Reason != got.Reason || z.Message != got.Message || z.ResolvedRef != "" {
			t.Errorf("zone %d = %+v", i, z)
		}
	}
	if got := gatedZones(row, nil); len(got.Zones) != 0 {
		t.Errorf("without a verified pool the row has no zones: %+v", got.Zones)
	}
}

func TestRowsApplied(t *testing.T) {
	row := func(name string, ready bool) banlieuev1.ProviderImageStatus {
		return banlieuev1.ProviderImageStatus{ProviderName: name, ProviderNamespace: "ns", Ready: ready, ResolvedRef: "debian.qcow2",
			Zones: []banlieuev1.ImageZoneStatus{{Name: "default", Ready: ready}}}
	}
	status := func(gen int64, rows ...banlieuev1.ProviderImageStatus) *banlieuev1.VMImageStatus {
		return &banlieuev1.VMImageStatus{ObservedGeneration: gen, PerProvider: rows}
	}
	for _, tc := range []struct {
		name   string
		status *banlieuev1.VMImageStatus
		rows   []banlieuev1.ProviderImageStatus
		one    bool
		want   bool
	}{
		{"own row as applied, among others'", status(2, row("a", true), row("b", false)), []banlieuev1.ProviderImageStatus{row("b", false)}, true, true},
		{"own row missing", status(2, row("a", true)), []banlieuev1.ProviderImageStatus{row("b", true)}, true, false},
		{"own row differs", status(2, row("b", false)), []banlieuev1.ProviderImageStatus{row("b", true)}, true, false},
		{"a zone differs", status(2, row("b", true)), []banlieuev1.ProviderImageStatus{func() banlieuev1.ProviderImageStatus {
			r := row("b", true)
			r.Zones[0].Message = "verified"
			return r
		}()}, true, false},
		{"same rows, older generation", status(1, row("b", true)), []banlieuev1.ProviderImageStatus{row("b", true)}, true, false},
		{"every Provider's rows as applied", status(2, row("a", true), row("b", true)), []banlieuev1.ProviderImageStatus{row("a", true), row("b", true)}, false, true},
		{"every Provider's: a gone Provider's row left to remove", status(2, row("a", true), row("b", true)), []banlieuev1.ProviderImageStatus{row("b", true)}, false, false},
		{"nothing applied yet", status(0), []banlieuev1.ProviderImageStatus{row("b", true)}, true, false},
	} {
		if got := rowsApplied(tc.status, 2, tc.rows, tc.one); got != tc.want {
			t.Errorf("%s: rowsApplied = %t, want %t", tc.name, got, tc.want)
		}
	}
}
