package sidecar

import (
	"context"
	"time"

	"github.com/actgate/actgate/internal/diag"
)

// While the sidecar serves, it checks its own readiness every readinessCheckInterval and logs
// each not-ready reason (a diag code, about the authority service, the policy or an upstream)
// when it first appears and then at most once per readinessLogPeriod while it lasts; a reason
// that goes away is logged as cleared, and becoming ready is logged once. The readiness answer
// (ReadyPath) and so the kubelet's probe Events carry the same codes (docs/operations.md
// "Troubleshooting a pod that does not start").
var (
	readinessCheckInterval = 5 * time.Second
	readinessLogPeriod     = 30 * time.Second
)

// reportReadiness logs why the sidecar is not ready until ctx ends.
func (s *Sidecar) reportReadiness(ctx context.Context) {
	lim := diag.NewLimiter(readinessLogPeriod)
	active := map[string]bool{}
	ready := false
	t := time.NewTicker(readinessCheckInterval)
	defer t.Stop()
	for {
		body := s.ready.check(ctx, false)
		if ctx.Err() != nil {
			return
		}
		now := time.Now()
		seen := map[string]bool{}
		for _, p := range body.Problems {
			key := p.Reason + "\x00" + p.Subject
			seen[key] = true
			if lim.Allow(key, now) {
				s.log.Info(notReadyMsg(body.Ready), "reason", p.Reason, "subject", p.Subject, "message", p.Message, "fix", p.Fix)
			}
		}
		for key := range active {
			if !seen[key] {
				lim.Forget(key)
			}
		}
		if len(active) > 0 && len(seen) == 0 {
			s.log.Info("Not-ready reasons cleared")
		}
		active = seen
		if body.Ready && !ready {
			s.log.Info("Ready", "policy", body.Policy, "epoch", body.Epoch, "upstreams", len(body.Upstreams))
		}
		ready = body.Ready
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// notReadyMsg is the log message of a problem: the sidecar may still be ready with one (it
// keeps the policy it holds while the authority service is unreachable).
func notReadyMsg(ready bool) string {
	if ready {
		return "Degraded"
	}
	return "Not ready"
}
