//go:build unix

package faults

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/authority/boltstore"
	"github.com/actgate/actgate/internal/gateconfig"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/test/testutil"
	"github.com/actgate/actgate/test/testutil/rig"
)

// Tools of testdata/actgate.yaml.
const (
	protectedTool = "ticket_create" // machine permit: consumed and journaled
	hotTool       = "search"        // hot path: nothing consumed
	ticketArgs    = `{"title":"rotate the keys"}`
)

// standalone is one gate's configuration and data dir; each start is a new `actgate serve`
// process over the same data.
type standalone struct {
	cfgFile string
	cfg     *gateconfig.Config
}

// newStandalone writes the configuration for an upstream at url with the given call timeout.
func newStandalone(t *testing.T, url string, callTimeout time.Duration) *standalone {
	t.Helper()
	raw, err := os.ReadFile("testdata/actgate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	data := strings.NewReplacer("{{DATA}}", filepath.Join(dir, "data"), "{{TOOLS}}", url,
		"{{TIMEOUT}}", callTimeout.String()).Replace(string(raw))
	s := &standalone{cfgFile: filepath.Join(dir, "actgate.yaml")}
	if err := os.WriteFile(s.cfgFile, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if s.cfg, err = gateconfig.Load(s.cfgFile); err != nil {
		t.Fatal(err)
	}
	return s
}

// serveProcess is one `actgate serve` process.
type serveProcess struct{ *testutil.ServeProcess }

// start runs `actgate serve` (env added, e.g. ACTGATE_FAILPOINT) and waits until it serves.
func (s *standalone) start(t *testing.T, env ...string) *serveProcess {
	t.Helper()
	return &serveProcess{testutil.StartServe(t, actgateBin, []string{"serve", "--verbose", "--config", s.cfgFile},
		s.cfg.Path(gateconfig.EndpointFile), env...)}
}

// endpoint is the agent-facing MCP endpoint of the tools server.
func (p *serveProcess) endpoint() string { return p.Base + mcpproxy.Path("tools") }

// stop ends the process with SIGTERM and waits: the exit must be graceful.
func (p *serveProcess) stop(t *testing.T) {
	t.Helper()
	if err := p.Stop(t); err != nil {
		t.Fatalf("graceful shutdown: %v\n%s", err, p.Out.String())
	}
}

// agent is an MCP client session (the SDK's) to endpoint: a new session each time.
func agent(t *testing.T, endpoint string) *mcp.ClientSession {
	return rig.Agent(t, "faults-agent", endpoint)
}

// callTool makes one tools/call with user provenance and returns what the agent got.
func callTool(cs *mcp.ClientSession, tool, args string, timeout time.Duration) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(args),
		Meta: mcp.Meta{mcpproxy.MetaProvenance: "user"}})
}

// mustCall is callTool that fails the test on a transport error.
func mustCall(t *testing.T, cs *mcp.ClientSession, tool, args string) *mcp.CallToolResult {
	t.Helper()
	r, err := callTool(cs, tool, args, 30*time.Second)
	if err != nil {
		t.Fatalf("tools/call %s: %v", tool, err)
	}
	return r
}

// efCode is the EF code of a result (tool-use-binding §23), "" when none.
func efCode(r *mcp.CallToolResult) string { return testutil.MetaString(r, mcpproxy.MetaEFCode) }

// metaState is the dispatch state the gate reported, "" when none.
func metaState(r *mcp.CallToolResult) string { return testutil.MetaString(r, mcpproxy.MetaState) }

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// world is what the gate's data dir holds after its process exited: the journal's records by
// state and the authorities they consumed (the embedded store is one bbolt file that only one
// process may open).
type world struct {
	records     map[journal.State][]journal.DispatchRecord
	authorities map[string]authority.Record
}

func (w world) all() []journal.DispatchRecord {
	var out []journal.DispatchRecord
	for _, s := range []journal.State{journal.StateDispatchPending, journal.StateInvoked, journal.StateIndeterminate,
		journal.StateExecuted, journal.StateFailed, journal.StateConsumed} {
		out = append(out, w.records[s]...)
	}
	return out
}

// readWorld opens the stopped gate's store and reads every journal record and the authority
// each names.
func (s *standalone) readWorld(t *testing.T) world {
	t.Helper()
	signer, err := authority.LoadKey(s.cfg.Path(gateconfig.AuthorityKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	st, err := boltstore.Open(s.cfg.Path(gateconfig.StoreFile), boltstore.Options{Verifier: signer.Verifier()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	w := world{records: map[journal.State][]journal.DispatchRecord{}, authorities: map[string]authority.Record{}}
	for _, state := range []journal.State{journal.StateDispatchPending, journal.StateInvoked, journal.StateIndeterminate,
		journal.StateExecuted, journal.StateFailed, journal.StateConsumed} {
		recs, err := st.InState(ctx, state)
		if err != nil {
			t.Fatal(err)
		}
		w.records[state] = recs
		for _, r := range recs {
			a, err := st.Get(ctx, "", r.AuthorityID)
			if err != nil {
				t.Fatalf("authority %s of operation %s: %v", r.AuthorityID, r.OperationID, err)
			}
			w.authorities[r.AuthorityID] = a
		}
	}
	return w
}

// verifyReceipts runs `actgate receipts verify --key` on the gate's receipt log: it must exit 0
// (every digest, the chain and every checkpoint signature hold). It returns the log's lines.
func (s *standalone) verifyReceipts(t *testing.T) []string {
	t.Helper()
	log := s.cfg.Path(gateconfig.ReceiptsFile)
	cmd := exec.Command(actgateBin, "receipts", "verify", "--key", s.cfg.Path(gateconfig.ReceiptPubFile), log)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("actgate receipts verify: %v\n%s", err, out)
	}
	f, err := os.Open(log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

// mentioning returns the receipt lines that name the operation.
func mentioning(lines []string, operationID string) []string {
	var out []string
	for _, l := range lines {
		if strings.Contains(l, `"`+operationID+`"`) {
			out = append(out, l)
		}
	}
	return out
}

// upstream is a counting MCP server (internal/mcpproxy/mcptest) with the fault tests' tools;
// hold, when set, makes ticket_create block until its context ends or release is closed.
type upstream struct {
	*mcptest.Server
	release chan struct{}
}

func startUpstream(t *testing.T, hold bool, intercept func(http.ResponseWriter, *http.Request) bool) *upstream {
	t.Helper()
	u := &upstream{release: make(chan struct{})}
	ticket := func(ctx context.Context, args json.RawMessage) (*mcp.CallToolResult, error) {
		if hold {
			select {
			case <-ctx.Done():
			case <-u.release:
			}
		}
		return mcptest.Text("ticket " + string(args)), nil
	}
	s, err := mcptest.Start([]mcptest.Tool{
		{Name: protectedTool, Handler: ticket},
		{Name: hotTool},
	}, mcptest.Options{Name: "faults-upstream", Intercept: intercept})
	if err != nil {
		t.Fatal(err)
	}
	u.Server = s
	t.Cleanup(func() {
		select {
		case <-u.release:
		default:
			close(u.release)
		}
		_ = s.Close()
	})
	return u
}

// toolsCallBody reports whether an HTTP request to the upstream carries a tools/call, leaving
// the body readable for the real handler.
func toolsCallBody(r *http.Request) (bool, []byte) {
	if r.Method != http.MethodPost || r.Body == nil {
		return false, nil
	}
	b, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(b))
	if err != nil {
		return false, b
	}
	var m struct {
		Method string `json:"method"`
	}
	_ = json.Unmarshal(b, &m)
	return m.Method == "tools/call", b
}
