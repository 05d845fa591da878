//go:build unix

package conformance

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/failpoint"
	"github.com/actgate/actgate/internal/gateconfig"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/standalone"
	"github.com/actgate/actgate/test/testutil"
	"github.com/actgate/actgate/test/testutil/rig"
)

// durableGate is a real `actgate serve` process on the conformance policy, killed with SIGKILL
// and started again on the same data dir.
type durableGate struct {
	t       *testing.T
	bin     string
	u       *rig.Upstreams
	cfgFile string
	cfg     *gateconfig.Config
	p       *testutil.ServeProcess
}

// startDurable starts the gate (with env added); edit, when not nil, rewrites the rendered
// configuration.
func startDurable(t *testing.T, bin string, edit func(string) string, env ...string) *durableGate {
	t.Helper()
	g := &durableGate{t: t, bin: bin, u: startUpstreams(t)}
	dir := t.TempDir()
	g.cfgFile = filepath.Join(dir, "actgate.yaml")
	cfg := string(config(t, g.u, filepath.Join(dir, "data")))
	if edit != nil {
		cfg = edit(cfg)
	}
	if err := os.WriteFile(g.cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var err error
	if g.cfg, err = gateconfig.Load(g.cfgFile); err != nil {
		t.Fatal(err)
	}
	g.p = startServe(t, bin, g.cfgFile, g.cfg, env...)
	return g
}

// killAndRestart SIGKILLs the gate (no shutdown of any kind) and starts it again.
func (g *durableGate) killAndRestart() {
	g.t.Helper()
	if err := g.p.Cmd.Process.Kill(); err != nil {
		g.t.Fatal(err)
	}
	g.restartAfterCrash()
}

// restartAfterCrash waits for the gate to die by SIGKILL and starts it again, without
// failpoint.
func (g *durableGate) restartAfterCrash() {
	g.t.Helper()
	g.p.WaitKilled(g.t)
	g.p = startServe(g.t, g.bin, g.cfgFile, g.cfg)
	if !strings.Contains(g.p.Out.String(), "Restored binding moments") {
		g.t.Errorf("no restore logged:\n%s", g.p.Out.String())
	}
}

// pay is a new agent session to the pay server (a restart ends every earlier session).
func (g *durableGate) pay() *mcp.ClientSession {
	return agent(g.t, g.p.Base+mcpproxy.Path("pay"))
}

// resolve posts principal's choice of option through the moments API and returns the status
// and answer.
func (g *durableGate) resolve(principal, id, digest string, option int) (int, standalone.ResolveJSON, string) {
	g.t.Helper()
	st, rr, body, err := g.tryResolve(principal, id, digest, option)
	if err != nil {
		g.t.Fatal(err)
	}
	return st, rr, body
}

// tryResolve is resolve, returning a transport error (the gate died before it answered).
func (g *durableGate) tryResolve(principal, id, digest string, option int) (int, standalone.ResolveJSON, string, error) {
	g.t.Helper()
	tok, err := os.ReadFile(filepath.Join(g.cfg.DataDir, "principals", principal+".token"))
	if err != nil {
		g.t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, g.p.Base+standalone.APIMoments+"/"+id+"/resolve",
		bytes.NewReader(rig.OptionResolution(digest, option)))
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, standalone.ResolveJSON{}, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out standalone.ResolveJSON
	_ = json.Unmarshal(b, &out)
	return resp.StatusCode, out, string(b), nil
}

// pendingIDs lists the moments pending for alice through the moments API.
func (g *durableGate) pendingIDs() []string {
	g.t.Helper()
	tok, err := os.ReadFile(filepath.Join(g.cfg.DataDir, "principals", "alice.token"))
	if err != nil {
		g.t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, g.p.Base+standalone.APIMoments, nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Moments []struct{ ID string } `json:"moments"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		g.t.Fatal(err)
	}
	var ids []string
	for _, m := range out.Moments {
		ids = append(ids, m.ID)
	}
	return ids
}

const durablePayout = `{"to":"acme","amount":2500}`

// escalate makes the payout call and returns the moment id and envelope digest it escalated to.
func escalatePayout(t *testing.T, cs *mcp.ClientSession) (string, string) {
	t.Helper()
	r := call(t, cs, "payout_create", durablePayout, "user")
	if code(r) != string(ef.EFEscalationRequired) {
		t.Fatalf("not an escalation: %+v", r.Meta)
	}
	invokedFalse(t, r)
	id, _ := r.Meta[mcpproxy.MetaMomentID].(string)
	digest, _ := r.Meta[mcpproxy.MetaEnvelopeDigest].(string)
	if id == "" || digest == "" {
		t.Fatalf("no moment: %+v", r.Meta)
	}
	return id, digest
}

// runsOnceThenRefused: the authorised call runs in a new session, its retry there is answered
// with the recorded result, and from another session it does not run again.
func (g *durableGate) runsOnceThenRefused() {
	t := g.t
	t.Helper()
	cs, replays := rig.AgentReplays(t, "conformance-agent", g.p.Base+mcpproxy.Path("pay"))
	first, replayed := rig.Replayed(t, cs, replays, "payout_create", durablePayout, "user")
	if first.IsError || replayed {
		t.Fatalf("the authorised call after restart (replay marked %v): %+v\n%s", replayed, first.Meta, g.p.Out.String())
	}
	if n := g.u.Pay.Count("payout_create"); n != 1 {
		t.Fatalf("upstream ran payout_create %d times, want 1", n)
	}
	if r, replayed := rig.Replayed(t, cs, replays, "payout_create", durablePayout, "user"); r.IsError || !replayed {
		t.Errorf("retry in the session: replay marked %v, %+v", replayed, r.Meta)
	} else if err := rig.SameResult(first, r); err != nil {
		t.Errorf("retry in the session: %v", err)
	}
	r := call(t, g.pay(), "payout_create", durablePayout, "user")
	if code(r) != string(ef.EFEscalationRequired) {
		t.Errorf("replay from another session: %+v", r.Meta)
	}
	invokedFalse(t, r)
	if n := g.u.Pay.Count("payout_create"); n != 1 {
		t.Fatalf("upstream ran payout_create %d times after the replays, want 1", n)
	}
}

// T-G for binding moments (tool-use-binding §22 T-G; envelope-04 §12.5): a pending human
// decision and the authority it issues survive a SIGKILL of `actgate serve`. The authorised
// call runs exactly once, whether the principal resolved before or after the crash, and a
// quorum of two principals counts one vote cast before the crash and one after.
func TestTG_MomentsSurviveCrash(t *testing.T) {
	bin := buildActgate(t)

	t.Run("killed between resolution and call", func(t *testing.T) {
		g := startDurable(t, bin, nil)
		id, digest := escalatePayout(t, g.pay())
		if st, rr, body := g.resolve("alice", id, digest, 0); st != http.StatusOK || rr.AuthorityID == "" {
			t.Fatalf("resolve: %d %s", st, body)
		}
		g.killAndRestart()
		if n := g.u.Pay.Count("payout_create"); n != 0 {
			t.Fatalf("upstream ran %d times before the call", n)
		}
		g.runsOnceThenRefused()
		if st, _, body := g.resolve("alice", id, digest, 0); st != http.StatusConflict {
			t.Errorf("resolution replayed after restart: %d %s", st, body)
		}
	})

	t.Run("pending across restart", func(t *testing.T) {
		g := startDurable(t, bin, nil)
		id, digest := escalatePayout(t, g.pay())
		g.killAndRestart()
		if ids := g.pendingIDs(); len(ids) != 1 || ids[0] != id {
			t.Fatalf("pending after restart: %v, want [%s]", ids, id)
		}
		// The agent's call in its new session is held by the same moment, not a second one.
		if again, _ := escalatePayout(t, g.pay()); again != id {
			t.Fatalf("a new moment %s after restart, want %s", again, id)
		}
		if st, rr, body := g.resolve("alice", id, digest, 0); st != http.StatusOK || rr.AuthorityID == "" {
			t.Fatalf("resolve after restart: %d %s", st, body)
		}
		g.runsOnceThenRefused()
	})

	// The process dies inside the resolution, at the failpoints around its commit
	// (internal/failpoint MomentGranted, MomentStored); the principal gets no answer.
	t.Run("killed after the authority, before the resolution is stored", func(t *testing.T) {
		g := startDurable(t, bin, nil, failpoint.EnvVar+"="+string(failpoint.MomentGranted))
		id, digest := escalatePayout(t, g.pay())
		if st, _, body, err := g.tryResolve("alice", id, digest, 0); err == nil {
			t.Fatalf("the resolution was answered although the gate was killed: %d %s", st, body)
		}
		g.restartAfterCrash()
		// Nothing was decided: the moment is pending, and the orphaned authority is unusable.
		if ids := g.pendingIDs(); len(ids) != 1 || ids[0] != id {
			t.Fatalf("pending after the crash: %v, want [%s]", ids, id)
		}
		if r := call(t, g.pay(), "payout_create", durablePayout, "user"); code(r) != string(ef.EFEscalationRequired) {
			t.Fatalf("call before the resolution is stored: %+v", r.Meta)
		}
		if st, rr, body := g.resolve("alice", id, digest, 0); st != http.StatusOK || rr.AuthorityID == "" {
			t.Fatalf("resolve after restart: %d %s", st, body)
		}
		g.runsOnceThenRefused()
	})

	t.Run("killed after the resolution is stored, before the answer", func(t *testing.T) {
		g := startDurable(t, bin, nil, failpoint.EnvVar+"="+string(failpoint.MomentStored))
		id, digest := escalatePayout(t, g.pay())
		if st, _, body, err := g.tryResolve("alice", id, digest, 0); err == nil {
			t.Fatalf("the resolution was answered although the gate was killed: %d %s", st, body)
		}
		g.restartAfterCrash()
		if st, _, body := g.resolve("alice", id, digest, 0); st != http.StatusConflict {
			t.Fatalf("the stored resolution is not final after restart: %d %s", st, body)
		}
		g.runsOnceThenRefused()
	})

	t.Run("quorum across restart", func(t *testing.T) {
		g := startDurable(t, bin, func(cfg string) string {
			cfg = strings.Replace(cfg, "principals:\n- name: alice\n", "principals:\n- name: alice\n- name: bob\n", 1)
			return strings.Replace(cfg, "      principals: [alice]\n    arguments:",
				"      principals: [alice, bob]\n      minPrincipals: 2\n    arguments:", 1)
		})
		id, digest := escalatePayout(t, g.pay())
		if st, rr, body := g.resolve("alice", id, digest, 0); st != http.StatusOK || !rr.Pending || rr.Required != 2 {
			t.Fatalf("alice's vote: %d %s", st, body)
		}
		g.killAndRestart()
		if st, _, body := g.resolve("alice", id, digest, 0); st != http.StatusConflict {
			t.Fatalf("alice votes again after restart: %d %s", st, body)
		}
		if r := call(t, g.pay(), "payout_create", durablePayout, "user"); code(r) != string(ef.EFEscalationRequired) {
			t.Fatalf("one vote is not two: %+v", r.Meta)
		}
		st, rr, body := g.resolve("bob", id, digest, 0)
		if st != http.StatusOK || rr.Pending || rr.AuthorityID == "" || rr.Votes != 2 {
			t.Fatalf("bob's vote: %d %s", st, body)
		}
		g.runsOnceThenRefused()
	})
}
