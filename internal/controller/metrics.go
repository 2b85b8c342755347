package controller

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

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
	counts := make(map[banlieuev1.VirtualMachinePhase]int, len(vmPhases))
	var vms banlieuev1.VirtualMachineList
	if err := c.reader.List(ctx, &vms, client.InNamespace(c.namespace)); err != nil {
		// A standby replica's cache is not started; it reports zeros rather than failing the scrape.
		ctrl.Log.V(1).Info("counting VirtualMachines for metrics", "error", err.Error())
	}
	for i := range vms.Items {
		counts[vmPhase(&vms.Items[i], &vms.Items[i].Status)]++
	}
	for _, phase := range vmPhases {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[phase]), string(phase))
	}
}
