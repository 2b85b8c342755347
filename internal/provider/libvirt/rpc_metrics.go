package libvirt

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"banlieue.io/banlieue/pkg/libvirt"
)

// The libvirt RPC series (docs/operations.md, "banlieue's series"; ADR 0116). Labels are the
// procedure, from pkg/libvirt's typed table, and the call's outcome: a bounded set whatever the
// hosts answer. A provider process serves one Provider in the shipped install, so the scrape's
// own target labels (the monitoring guide's `workload`) say whose host it is.
var (
	rpcDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "banlieue_libvirt_rpc_duration_seconds",
		Help: "Time from sending a libvirt RPC call to its answer, by procedure and outcome (code).",
		// 1 ms to ~60 s: a lookup on a local host answers in a millisecond or two, a pool
		// refresh or a domain start in seconds, and pkg/libvirt's call timeout is 30 s.
		Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 13),
	}, []string{"procedure", "code"})
	rpcErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "banlieue_libvirt_rpc_errors_total",
		Help: "libvirt RPC calls that failed, by procedure and outcome (code: libvirt_error, transport).",
	}, []string{"procedure", "code"})
)

func init() {
	metrics.Registry.MustRegister(rpcDuration, rpcErrors)
}

// The values of the code label.
const (
	rpcOK           = "ok"            // libvirtd answered with a result
	rpcNotFound     = "not_found"     // libvirtd answered that the object does not exist: an answer, not a failure
	rpcLibvirtError = "libvirt_error" // libvirtd answered with any other error
	rpcTransport    = "transport"     // no answer: connection lost, protocol violation, timeout, caller gave up
)

// rpcCode classifies a call's error for the code label.
func rpcCode(err error) string {
	var le *libvirt.Error
	switch {
	case err == nil:
		return rpcOK
	case libvirt.IsNotFound(err):
		return rpcNotFound
	case errors.As(err, &le):
		return rpcLibvirtError
	}
	return rpcTransport
}

// observeRPC records one call: its duration under its outcome, and a failure in the errors
// counter. A not-found answer is not a failure: the provider looks objects up to learn whether
// they exist.
func observeRPC(procedure string, elapsed time.Duration, err error) {
	code := rpcCode(err)
	rpcDuration.WithLabelValues(procedure, code).Observe(elapsed.Seconds())
	if code == rpcLibvirtError || code == rpcTransport {
		rpcErrors.WithLabelValues(procedure, code).Inc()
	}
}

// RPCObserver is the provider role's libvirt.CallObserver. It first creates every procedure's
// error counters at 0, so that a rate over them is defined before the first failure, which is
// when an alert needs it; the histogram's series appear with each procedure's first call. Only
// the provider role calls it, so no other role exports these series.
func RPCObserver() libvirt.CallObserver {
	for _, p := range libvirt.Procedures() {
		rpcErrors.WithLabelValues(p, rpcLibvirtError)
		rpcErrors.WithLabelValues(p, rpcTransport)
	}
	return observeRPC
}
