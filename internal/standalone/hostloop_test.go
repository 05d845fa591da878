package standalone

import (
	"testing"

	"github.com/actgate/actgate/internal/gateconfig"
	"github.com/actgate/actgate/internal/hostloop"
)

// TestHostLoopLimitDefaults: serve's default host-loop bounds are the sidecar's
// (gateconfig does not import internal/hostloop, so the numbers are written twice).
func TestHostLoopLimitDefaults(t *testing.T) {
	if gateconfig.DefaultMaxHostLoopCalls != hostloop.DefaultMaxPending || gateconfig.DefaultMaxHostLoopCallsPerAgent != hostloop.DefaultMaxPendingPerAgent {
		t.Fatalf("gateconfig %d/%d, hostloop %d/%d", gateconfig.DefaultMaxHostLoopCalls, gateconfig.DefaultMaxHostLoopCallsPerAgent,
			hostloop.DefaultMaxPending, hostloop.DefaultMaxPendingPerAgent)
	}
}
