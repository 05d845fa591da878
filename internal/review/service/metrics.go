package service

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/actgate/actgate/internal/review"
)

// Metrics are the service's Prometheus metrics:
//
//   - actgate_authority_review_duration_seconds{operation}: latency of each review, API calls
//     included;
//   - actgate_authority_decisions_total{operation,decision,code,class,reason}: responses by
//     decision (Allowed, Denied, Escalated, AuditDenied), EF code, consequence class and reason.
//
// Every label takes values from a closed set (operations, decisions, EF codes, consequence
// classes, reasons), so the series stay bounded whatever callers send.
type Metrics struct {
	duration  *prometheus.HistogramVec
	decisions *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "actgate", Subsystem: "authority", Name: "review_duration_seconds",
			Help:    "Latency of ActReviews answered by the authority service, API server calls included.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14), // 1 ms … 8 s
		}, []string{"operation"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "actgate", Subsystem: "authority", Name: "decisions_total",
			Help: "ActReview responses by operation, decision, EF code, consequence class and reason.",
		}, []string{"operation", "decision", "code", "class", "reason"}),
	}
	for _, c := range []prometheus.Collector{m.duration, m.decisions} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// observe records one response. A nil Metrics records nothing.
func (m *Metrics) observe(op review.Operation, r review.Response, d time.Duration) {
	if m == nil {
		return
	}
	if op == "" {
		op = "Unknown"
	}
	m.duration.WithLabelValues(string(op)).Observe(d.Seconds())
	decision := string(r.Decision)
	if decision == "" {
		decision = "Denied"
	}
	m.decisions.WithLabelValues(string(op), decision, string(r.Code), string(r.ConsequenceClass), string(r.Reason)).Inc()
}
