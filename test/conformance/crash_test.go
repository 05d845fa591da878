//go:build unix

package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/authority/boltstore"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/failpoint"
	"github.com/actgate/actgate/internal/gateconfig"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/test/testutil"
)

// buildActgate builds cmd/actgate with the failpoints tag into a temp dir.
func buildActgate(t testing.TB) string { return buildActgateTags(t, "failpoints") }

// buildActgateTags builds cmd/actgate with the given build tags ("" for the shipped binary).
func buildActgateTags(t testing.TB, tags string) string { return testutil.BuildActgate(t, tags) }

// startServe runs `actgate serve --verbose --config cfgFile` (with env added) and waits until
// it serves.
func startServe(t testing.TB, bin, cfgFile string, cfg *gateconfig.Config, env ...string) *testutil.ServeProcess {
	t.Helper()
	return startServeArgs(t, bin, []string{"serve", "--verbose", "--config", cfgFile}, cfg, env...)
}

// startServeArgs runs bin with args (an `actgate serve` command line for cfg) and waits until
// it serves.
func startServeArgs(t testing.TB, bin string, args []string, cfg *gateconfig.Config, env ...string) *testutil.ServeProcess {
	t.Helper()
	return testutil.StartServe(t, bin, args, cfg.Path(gateconfig.EndpointFile), env...)
}

// T-G (tool-use-binding §22; §9; action-evidence-boundary "Classify the Effect Outcome"): kill
// the host after consume and before invoke; on restart do not invoke again. The gate runs as a
// real `actgate serve` process built with -tags failpoints; ACTGATE_FAILPOINT makes it SIGKILL
// itself at the named instant (internal/failpoint; test/faults runs every boundary). A second case kills it after the upstream answered and before
// the outcome was recorded: the upstream ran once and never runs again.
func TestTG_CrashRecovery(t *testing.T) {
	bin := buildActgate(t)
	for _, tc := range []struct {
		failpoint string
		ranBefore int // the upstream's count when the process died
	}{
		// failpoint.AfterPending: consumed and DISPATCH_PENDING committed (one commit in the
		// embedded store), nothing sent.
		{string(failpoint.AfterPending), 0},
		{string(failpoint.AfterInvoke), 1},
	} {
		t.Run(tc.failpoint, func(t *testing.T) {
			u := startUpstreams(t)
			dir := t.TempDir()
			cfgFile := filepath.Join(dir, "actgate.yaml")
			if err := os.WriteFile(cfgFile, config(t, u, filepath.Join(dir, "data")), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := gateconfig.Load(cfgFile)
			if err != nil {
				t.Fatal(err)
			}
			const args = `{"title":"rotate the keys"}`

			// 1. The call: the process dies at the failpoint; the agent gets no answer.
			p1 := startServe(t, bin, cfgFile, cfg, "ACTGATE_FAILPOINT="+tc.failpoint)
			cs := agent(t, p1.Base+mcpproxy.Path("tools"))
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			res, callErr := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ticket_create", Arguments: json.RawMessage(args)})
			cancel()
			if callErr == nil {
				t.Fatalf("the call returned although the gate was killed: %s\n%s", js(res), p1.Out.String())
			}
			var ee *exec.ExitError
			if err := p1.Wait(t, 20*time.Second); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("the gate did not die by SIGKILL: %v\n%s", err, p1.Out.String())
			}
			if n := u.Tools.Count("ticket_create"); n != tc.ranBefore {
				t.Fatalf("upstream ran ticket_create %d times before the crash, want %d", n, tc.ranBefore)
			}

			// 2. Restart: the in-flight dispatch is INDETERMINATE before the gate listens.
			p2 := startServe(t, bin, cfgFile, cfg)
			if !strings.Contains(p2.Out.String(), "Recovered in-flight dispatches as INDETERMINATE") {
				t.Errorf("no recovery logged:\n%s", p2.Out.String())
			}
			// 3. The agent retries the same call in a new session: refused, not sent.
			r := call(t, agent(t, p2.Base+mcpproxy.Path("tools")), "ticket_create", args, "user")
			if code(r) != string(ef.EFIndeterminate) {
				t.Fatalf("retry after restart: %+v", r.Meta)
			}
			invokedFalse(t, r)
			if n := u.Tools.Count("ticket_create"); n != tc.ranBefore {
				t.Fatalf("the retry reached the upstream: count %d, want %d", n, tc.ranBefore)
			}

			// 4. SIGTERM: a graceful exit that removes the endpoint file.
			if err := p2.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if err := p2.Wait(t, 20*time.Second); err != nil {
				t.Fatalf("graceful shutdown: %v\n%s", err, p2.Out.String())
			}
			if _, err := os.Stat(cfg.Path(gateconfig.EndpointFile)); !os.IsNotExist(err) {
				t.Errorf("endpoint file after shutdown: %v", err)
			}

			// 5. The journal holds the act INDETERMINATE, recovered on start, and nothing else.
			signer, err := authority.LoadKey(cfg.Path(gateconfig.AuthorityKeyFile))
			if err != nil {
				t.Fatal(err)
			}
			st, err := boltstore.Open(cfg.Path(gateconfig.StoreFile), boltstore.Options{Verifier: signer.Verifier()})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			recs, err := st.InState(context.Background(), journal.StateIndeterminate)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != 1 || recs[0].Tool != "ticket_create" {
				t.Fatalf("INDETERMINATE records: %+v", recs)
			}
			rec := recs[0]
			if rec.Reason != journal.ReasonRecoveredOnStart {
				t.Errorf("reason %q, want %q", rec.Reason, journal.ReasonRecoveredOnStart)
			}
			if tc.failpoint == string(failpoint.AfterInvoke) {
				calls := u.Tools.Calls()
				if calls[len(calls)-1].OperationID != rec.OperationID {
					t.Errorf("the upstream saw operation %q, the journal has %q", calls[len(calls)-1].OperationID, rec.OperationID)
				}
			}
			for _, s := range []journal.State{journal.StateDispatchPending, journal.StateInvoked, journal.StateExecuted, journal.StateFailed} {
				if recs, _ := st.InState(context.Background(), s); len(recs) != 0 {
					t.Errorf("%d records in %s", len(recs), s)
				}
			}
		})
	}
}
