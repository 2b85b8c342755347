package libvirt

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"banlieue.io/banlieue/internal/provider/libvirt/hostconn"
)

// The host protection series (docs/operations.md, "Host protection"; ADR-0132, ADR-0133). The
// Provider's namespace and name are two labels, as banlieue_provider_failure_domains has them;
// operation is domain or upload: a bounded set, one series per Provider and operation.
var (
	hostInFlight = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "banlieue_libvirt_host_operations_in_flight",
		Help: "Operations holding one of the host's slots (operation: domain = a machine pass, upload = a volume upload).",
	}, []string{"namespace", "name", "operation"})
	hostQueued = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "banlieue_libvirt_host_operations_queued",
		Help: "Operations waiting for one of the host's slots.",
	}, []string{"namespace", "name", "operation"})
	hostBreaker = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "banlieue_libvirt_host_breaker_state",
		Help: "The host's circuit breaker: 0 closed, 1 half-open (one probe dial under way), 2 open (no dial until the cool-down ends).",
	}, []string{"namespace", "name"})
)

func init() {
	metrics.Registry.MustRegister(hostInFlight, hostQueued, hostBreaker)
}

// HostObserver is the provider role's hostconn.Observer: it keeps the host series.
func HostObserver() hostconn.Observer { return hostSeries{} }

type hostSeries struct{}

func (hostSeries) HostOperations(p types.NamespacedName, op hostconn.Operation, inFlight, queued int) {
	hostInFlight.WithLabelValues(p.Namespace, p.Name, string(op)).Set(float64(inFlight))
	hostQueued.WithLabelValues(p.Namespace, p.Name, string(op)).Set(float64(queued))
}

func (hostSeries) HostBreaker(p types.NamespacedName, s hostconn.BreakerState) {
	hostBreaker.WithLabelValues(p.Namespace, p.Name).Set(float64(s))
}

func (hostSeries) HostForgotten(p types.NamespacedName) {
	for _, op := range []hostconn.Operation{hostconn.OperationDomain, hostconn.OperationUpload} {
		hostInFlight.DeleteLabelValues(p.Namespace, p.Name, string(op))
		hostQueued.DeleteLabelValues(p.Namespace, p.Name, string(op))
	}
	hostBreaker.DeleteLabelValues(p.Namespace, p.Name)
}
