package app

import (
	"context"
	"sync/atomic"
	"time"

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

// leadingSince is when this process was elected, in UnixNano; 0 until then.
var leadingSince atomic.Int64

// LeadingSince is when this process became its role's leader (with --no-leader-elect, when its
// manager started), and false before: the start of what its controllers may record once
// (ObservedOnce).
func LeadingSince() (time.Time, bool) {
	n := leadingSince.Load()
	return time.Unix(0, n), n != 0
}

// LeaderGauge is the runnable NewManager adds to every role's manager: it flips banlieue_leader
// and sets LeadingSince when mgr is elected. A test that builds its own manager adds it to have
// the once-only series recorded.
func LeaderGauge(mgr manager.Manager, role string) manager.Runnable {
	return leaderGauge{mgr: mgr, role: role}
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
		leadingSince.Store(time.Now().UnixNano())
		leaderMetric.WithLabelValues(g.role).Set(1)
	case <-ctx.Done():
	}
	<-ctx.Done()
	return nil
}
