package libvirt

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// failureDomainsMetric is banlieue_provider_failure_domains{namespace,name,backend}: how many
// failure domains a Provider publishes. It drops to 0 the moment a host stops answering, which is
// what an alert on an unreachable host wants to see. The Provider's namespace and name are two
// labels, as kube-state-metrics names an object, so a query can select or group by either.
var failureDomainsMetric = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "banlieue_provider_failure_domains",
	Help: "Failure domains a Provider publishes (0 while its host is unverified).",
}, []string{"namespace", "name", "backend"})

func init() {
	metrics.Registry.MustRegister(failureDomainsMetric)
}

func recordFailureDomains(namespace, name string, n int) {
	failureDomainsMetric.WithLabelValues(namespace, name, ClassName).Set(float64(n))
}

// forgetFailureDomains drops a deleted Provider's series.
func forgetFailureDomains(namespace, name string) {
	failureDomainsMetric.DeleteLabelValues(namespace, name, ClassName)
}
