package controller

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// VM phases of banlieue_virtualmachines (docs/operations.md), in the order they are derived.
var vmPhases = []string{"Deleting", "Paused", "Ready", "Provisioning", "Pending"}

// vmPhase is the first phase that applies to vm.
func vmPhase(vm *banlieuev1.VirtualMachine) string {
	switch {
	case !vm.DeletionTimestamp.IsZero():
		return "Deleting"
	case vm.Spec.Paused:
		return "Paused"
	case meta.IsStatusConditionTrue(vm.Status.Conditions, banlieuev1.ConditionReady):
		return "Ready"
	case vm.Status.Scheduled != nil:
		return "Provisioning"
	}
	return "Pending"
}

// vmPhaseCollector counts VMs per phase from the cache at scrape time, so the gauge can never
// drift from the objects the way an incrementally maintained one could.
type vmPhaseCollector struct {
	reader    client.Reader
	namespace string
	desc      *prometheus.Desc
}

func newVMPhaseCollector(reader client.Reader, namespace string) *vmPhaseCollector {
	return &vmPhaseCollector{reader: reader, namespace: namespace, desc: prometheus.NewDesc(
		"banlieue_virtualmachines", "VirtualMachines per derived phase.", []string{"phase"}, nil)}
}

func (c *vmPhaseCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *vmPhaseCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts := make(map[string]int, len(vmPhases))
	var vms banlieuev1.VirtualMachineList
	if err := c.reader.List(ctx, &vms, client.InNamespace(c.namespace)); err != nil {
		// A standby replica's cache is not started; it reports zeros rather than failing the scrape.
		ctrl.Log.V(1).Info("counting VirtualMachines for metrics", "error", err.Error())
	}
	for i := range vms.Items {
		counts[vmPhase(&vms.Items[i])]++
	}
	for _, phase := range vmPhases {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[phase]), phase)
	}
}
