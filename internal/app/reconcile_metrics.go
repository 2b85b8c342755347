package app

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The reconcile series every banlieue controller reports (docs/operations.md).
var (
	reconcileTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "banlieue_reconcile_total",
		Help: "Reconciles by controller and result (success, error, requeue).",
	}, []string{"controller", "result"})
	reconcileDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "banlieue_reconcile_duration_seconds",
		Help:    "Time spent in one reconcile.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
	}, []string{"controller"})
	reconcileErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "banlieue_reconcile_errors_total",
		Help: "Failed reconciles by controller and kind of error.",
	}, []string{"controller", "kind"})
)

func init() {
	metrics.Registry.MustRegister(reconcileTotal, reconcileDuration, reconcileErrors)
}

// shortRequeue is the longest requeue still counted as "requeue" rather than "success": the
// error interval; the default and long resyncs of a healthy object are successes.
const shortRequeue = 5 * time.Second

// Instrument wraps a reconciler so each pass is counted and timed under the controller's name.
func Instrument(controller string, r reconcile.Reconciler) reconcile.Reconciler {
	for _, result := range []string{"success", "error", "requeue"} {
		reconcileTotal.WithLabelValues(controller, result)
	}
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		start := time.Now()
		res, err := r.Reconcile(ctx, req)
		reconcileDuration.WithLabelValues(controller).Observe(time.Since(start).Seconds())
		switch {
		case err != nil:
			reconcileTotal.WithLabelValues(controller, "error").Inc()
			reconcileErrors.WithLabelValues(controller, errorKind(err)).Inc()
		case res.RequeueAfter > 0 && res.RequeueAfter <= shortRequeue:
			reconcileTotal.WithLabelValues(controller, "requeue").Inc()
		default:
			reconcileTotal.WithLabelValues(controller, "success").Inc()
		}
		return res, err
	})
}

// errorKind names the error variant for the kind label.
func errorKind(err error) string {
	var status apierrors.APIStatus
	switch {
	case errors.As(err, &status):
		return "Kube"
	case errors.Is(err, context.DeadlineExceeded):
		return "Timeout"
	}
	return "Other"
}
