package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
)

var (
	// migrationsTotal counts VirtualMachineMigrations by how they ended (ADR 0116: bounded
	// labels, each migration once).
	migrationsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "banlieue_vm_migrations_total",
		Help: "VirtualMachineMigrations that reached a final phase, by phase.",
	}, []string{"result"})
	// migrationDowntime and migrationDuration are the provider's measures of a succeeded move:
	// the guest's pause, and the whole move. No labels: a VM's namespace or Provider would
	// make a series per tenant or host.
	migrationDowntime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "banlieue_vm_migration_downtime_seconds",
		Help: "How long the guest was paused by each succeeded live migration, as the provider measured it.",
		// 10 ms to ~20 s: a live move pauses the guest for tens to hundreds of milliseconds.
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 12),
	}, nil)
	migrationDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "banlieue_vm_migration_duration_seconds",
		Help: "Total time of each succeeded live migration, as the provider measured it.",
		// 1 s to ~68 min: memory and overlays of gigabytes take minutes.
		Buckets: prometheus.ExponentialBuckets(1, 2, 13),
	}, nil)
	// endedMigrations are the migrations already recorded, since this process leads.
	endedMigrations = app.NewObservedOnce(app.LeadingSince)
)

// migrationResults are the values of banlieue_vm_migrations_total's result label.
var migrationResults = []banlieuev1.MigrationPhase{banlieuev1.MigrationSucceeded, banlieuev1.MigrationFailed, banlieuev1.MigrationCancelled}

func init() {
	metrics.Registry.MustRegister(migrationsTotal, migrationDowntime, migrationDuration)
}

// initMigrationMetrics creates the series with nothing recorded, so a rate is defined before
// the first migration ends.
func initMigrationMetrics() {
	for _, r := range migrationResults {
		migrationsTotal.WithLabelValues(string(r))
	}
	migrationDowntime.WithLabelValues()
	migrationDuration.WithLabelValues()
}

// recordMigrationEnd records a migration the first time this process writes it final (before
// is the status it read, after the one it wrote): its result, and for a success the provider's
// downtime and total time when it reported them.
func recordMigrationEnd(m *banlieuev1.VirtualMachineMigration, before, after *banlieuev1.VirtualMachineMigrationStatus) {
	if !after.Phase.Final() || before.Phase.Final() || after.CompletedAt == nil {
		return
	}
	if !endedMigrations.First(m.UID, after.CompletedAt.Time) {
		return
	}
	migrationsTotal.WithLabelValues(string(after.Phase)).Inc()
	if after.Phase != banlieuev1.MigrationSucceeded {
		return
	}
	if after.DowntimeMilliseconds != nil {
		migrationDowntime.WithLabelValues().Observe(float64(*after.DowntimeMilliseconds) / 1000)
	}
	if after.TotalMilliseconds != nil {
		migrationDuration.WithLabelValues().Observe(float64(*after.TotalMilliseconds) / 1000)
	}
}
