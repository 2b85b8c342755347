package app

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// leaderMetric is banlieue_leader{role}: 1 while this process holds its role's lease.
var leaderMetric = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "banlieue_leader",
	Help: "1 while this process leads its role, else 0.",
}, []string{"role"})

func init() {
	metrics.Registry.MustRegister(leaderMetric)
}

// leaderGauge flips banlieue_leader when the manager is elected; it runs on every replica.
type leaderGauge struct {
	mgr  manager.Manager
	role string
}

func (g leaderGauge) NeedLeaderElection() bool { return false }

func (g leaderGauge) Start(ctx context.Context) error {
	leaderMetric.WithLabelValues(g.role).Set(0)
	select {
	case <-g.mgr.Elected():
		leaderMetric.WithLabelValues(g.role).Set(1)
	case <-ctx.Done():
	}
	<-ctx.Done()
	return nil
}
