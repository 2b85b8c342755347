package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
)

var (
	// timeToReady is banlieue_vm_time_to_ready_seconds: how long a VirtualMachine took from its
	// creation to its first Ready=True, the whole path (scheduling, the machine, the host's
	// domain start and its address) in one number (ADR 0116). No labels: a VM's namespace or
	// class would make a series per tenant. The vector stays empty until Setup, so only the
	// controller role exports it.
	timeToReady = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "banlieue_vm_time_to_ready_seconds",
		Help: "Time from a VirtualMachine's creation to its first Ready=True condition seen by this controller.",
		// 1 s to ~68 min: a VM on an imported image is Ready in tens of seconds; one that
		// waited for its image's build and import, in many minutes.
		Buckets: prometheus.ExponentialBuckets(1, 2, 13),
	}, nil)
	// readyVMs are the VMs already recorded, since this process leads.
	readyVMs = app.NewObservedOnce(app.LeadingSince)
)

func init() {
	metrics.Registry.MustRegister(timeToReady)
}

// initReadyMetrics creates the histogram with no observation: no VM has become Ready yet.
func initReadyMetrics() { timeToReady.WithLabelValues() }

// recordTimeToReady records a VM the first time this process writes its Ready condition going
// to True (before is the status it read, after the one it wrote): from creationTimestamp to the
// condition's lastTransitionTime. A VM Ready again after a NotReady spell is not recorded again
// by this process; a restarted one has forgotten it, and records its next Ready with its whole
// age (docs/operations.md, "banlieue's series").
func recordTimeToReady(vm *banlieuev1.VirtualMachine, before, after []metav1.Condition) {
	next := meta.FindStatusCondition(after, banlieuev1.ConditionReady)
	if next == nil || next.Status != metav1.ConditionTrue || meta.IsStatusConditionTrue(before, banlieuev1.ConditionReady) {
		return
	}
	at := next.LastTransitionTime.Time
	if !readyVMs.First(vm.UID, at) {
		return
	}
	timeToReady.WithLabelValues().Observe(max(at.Sub(vm.CreationTimestamp.Time), 0).Seconds())
}
