//go:build unix

package conformance

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/standalone"
)

// momentTTL is the moments' lifetime in TestTG_ExpiredMomentStaysExpired: short enough to wait
// out, long enough to escalate and kill the gate inside it.
const momentTTL = 2 * time.Second

// T-G for an expired binding moment (envelope-04 §12.5; docs/api.md `momentTTL`): a moment that
// expires across a SIGKILL of `actgate serve` and a restart stays expired, whether it expired
// while the gate was down or before it was killed. Its resolution is refused with
// MOMENT_EXPIRED (HTTP 410), it is no longer pending, the call it held never runs, and the same
// call escalates to a new moment.
func TestTG_ExpiredMomentStaysExpired(t *testing.T) {
	bin := buildActgate(t)
	withTTL := func(cfg string) string { return cfg + "momentTTL: " + momentTTL.String() + "\n" }

	// stillExpired asserts the state after the restart.
	stillExpired := func(t *testing.T, g *durableGate, id, digest string) {
		t.Helper()
		if ids := g.pendingIDs(); len(ids) != 0 {
			t.Errorf("pending after restart: %v, want none (%s expired)", ids, id)
		}
		st, _, body := g.resolve("alice", id, digest, 0)
		if st != http.StatusGone || !strings.Contains(body, standalone.CodeExpired) {
			t.Fatalf("resolution of the expired moment after restart: %d %s", st, body)
		}
		r := call(t, g.pay(), "payout_create", durablePayout, "user")
		again, _ := r.Meta[mcpproxy.MetaMomentID].(string)
		if code(r) != string(ef.EFEscalationRequired) || again == "" || again == id {
			t.Errorf("the held call after expiry: code %q moment %q (expired %s)", code(r), again, id)
		}
		invokedFalse(t, r)
		if n := g.u.Pay.Count("payout_create"); n != 0 {
			t.Fatalf("upstream ran payout_create %d times, want 0", n)
		}
	}

	t.Run("expires while the gate is down", func(t *testing.T) {
		g := startDurable(t, bin, withTTL)
		if got := g.cfg.MomentExpiry(); got != momentTTL {
			t.Fatalf("momentTTL parsed as %v", got)
		}
		escalated := time.Now()
		id, digest := escalatePayout(t, g.pay())
		if err := g.p.Cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		g.p.WaitKilled(t)
		if time.Since(escalated) >= momentTTL {
			t.Fatalf("the gate died %s after the escalation, after the moment's expiry", time.Since(escalated))
		}
		time.Sleep(time.Until(escalated.Add(momentTTL + 500*time.Millisecond)))
		g.restartAfterCrash()
		stillExpired(t, g, id, digest)
	})

	t.Run("expired before the kill", func(t *testing.T) {
		g := startDurable(t, bin, withTTL)
		escalated := time.Now()
		id, digest := escalatePayout(t, g.pay())
		time.Sleep(time.Until(escalated.Add(momentTTL + 500*time.Millisecond)))
		if st, _, body := g.resolve("alice", id, digest, 0); st != http.StatusGone || !strings.Contains(body, standalone.CodeExpired) {
			t.Fatalf("resolution of the expired moment before the kill: %d %s", st, body)
		}
		g.killAndRestart()
		stillExpired(t, g, id, digest)
	})
}
