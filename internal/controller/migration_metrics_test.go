package controller

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
)

// A migration is counted once, by its final phase, the first time a written status is final;
// a success adds the provider's downtime and total time to the histograms.
func TestRecordMigrationEnd(t *testing.T) {
	initMigrationMetrics()
	now := time.Now()
	endedMigrations = app.NewObservedOnce(func() (time.Time, bool) { return now, true })
	mig := func(uid string) *banlieuev1.VirtualMachineMigration {
		return &banlieuev1.VirtualMachineMigration{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}}
	}
	st := func(phase banlieuev1.MigrationPhase, at time.Time, downtime, total *int64) *banlieuev1.VirtualMachineMigrationStatus {
		s := &banlieuev1.VirtualMachineMigrationStatus{Phase: phase, DowntimeMilliseconds: downtime, TotalMilliseconds: total}
		if phase.Final() {
			s.CompletedAt = &metav1.Time{Time: at}
		}
		return s
	}
	migrating := st(banlieuev1.MigrationMigrating, now, nil, nil)
	succeeded := st(banlieuev1.MigrationSucceeded, now, ptr.To[int64](250), ptr.To[int64](12000))
	for _, s := range []struct {
		name          string
		m             *banlieuev1.VirtualMachineMigration
		before, after *banlieuev1.VirtualMachineMigrationStatus
		result        string  // counter incremented, "" none
		downtime      float64 // seconds observed, 0 none
		total         float64
	}{
		{"still moving", mig("a"), st(banlieuev1.MigrationPending, now, nil, nil), migrating, "", 0, 0},
		{"succeeds", mig("a"), migrating, succeeded, "Succeeded", 0.25, 12},
		{"a pass over the final status", mig("a"), succeeded, succeeded, "", 0, 0},
		{"a lagging cache shows it moving again", mig("a"), migrating, succeeded, "", 0, 0},
		{"fails", mig("b"), migrating, st(banlieuev1.MigrationFailed, now, nil, nil), "Failed", 0, 0},
		{"cancelled", mig("c"), st(banlieuev1.MigrationPending, now, nil, nil), st(banlieuev1.MigrationCancelled, now, nil, nil), "Cancelled", 0, 0},
		{"succeeded without the provider's figures", mig("d"), migrating, st(banlieuev1.MigrationSucceeded, now, nil, nil), "Succeeded", 0, 0},
		{"ended before this process led", mig("e"), migrating, st(banlieuev1.MigrationFailed, now.Add(-time.Hour), nil, nil), "", 0, 0},
	} {
		c0 := migrationCounts(t)
		d0, ds0 := migrationHistogram(t, "banlieue_vm_migration_downtime_seconds")
		t0, ts0 := migrationHistogram(t, "banlieue_vm_migration_duration_seconds")
		recordMigrationEnd(s.m, s.before, s.after)
		c := migrationCounts(t)
		for _, r := range migrationResults {
			want := c0[string(r)]
			if string(r) == s.result {
				want++
			}
			if c[string(r)] != want {
				t.Errorf("%s: %s = %v, want %v", s.name, r, c[string(r)], want)
			}
		}
		d, ds := migrationHistogram(t, "banlieue_vm_migration_downtime_seconds")
		tt, ts := migrationHistogram(t, "banlieue_vm_migration_duration_seconds")
		if (d-d0 == 1) != (s.downtime > 0) || ds-ds0 != s.downtime || (tt-t0 == 1) != (s.total > 0) || ts-ts0 != s.total {
			t.Errorf("%s: downtime +%d of %vs, total +%d of %vs; want %vs and %vs", s.name, d-d0, ds-ds0, tt-t0, ts-ts0, s.downtime, s.total)
		}
	}
}

func migrationCounts(t *testing.T) map[string]float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "banlieue_vm_migrations_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" {
					out[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	if len(out) != len(migrationResults) {
		t.Fatalf("banlieue_vm_migrations_total has results %v, want one series per final phase", out)
	}
	return out
}

func migrationHistogram(t *testing.T, name string) (uint64, float64) {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			h := f.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
	}
	t.Fatalf("%s is not in the registry", name)
	return 0, 0
}
