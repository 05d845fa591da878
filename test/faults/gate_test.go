//go:build unix

package faults

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
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
	"github.com/actgate/actgate/internal/gateconfig"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/test/testutil"
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
type serveProcess struct {
	cmd    *exec.Cmd
	stderr *testutil.Buffer
	base   string
	done   chan struct{}
	err    error
}

// start runs `actgate serve` (env added, e.g. ACTGATE_FAILPOINT) and waits until it serves.
func (s *standalone) start(t *testing.T, env ...string) *serveProcess {
	t.Helper()
	endpoint := s.cfg.Path(gateconfig.EndpointFile)
	_ = os.Remove(endpoint) // a killed process leaves its own behind
	p := &serveProcess{stderr: &testutil.Buffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(actgateBin, "serve", "--verbose", "--config", s.cfgFile)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout = &testutil.Buffer{}
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(endpoint); err == nil && len(bytes.TrimSpace(b)) > 0 {
			p.base = strings.TrimSpace(string(b))
			return p
		}
		select {
		case <-p.done:
			t.Fatalf("actgate serve exited: %v\n%s", p.err, p.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("actgate serve did not start:\n%s", p.stderr.String())
		}
	}
}

// endpoint is the agent-facing MCP endpoint of the tools server.
func (p *serveProcess) endpoint() string { return p.base + mcpproxy.Path("tools") }

// waitKilled waits for the process to die by SIGKILL (a failpoint's kill).
func (p *serveProcess) waitKilled(t *testing.T) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("actgate serve still running:\n%s", p.stderr.String())
	}
	var ee *exec.ExitError
	if !errors.As(p.err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("actgate serve did not die by SIGKILL: %v\n%s", p.err, p.stderr.String())
	}
}

// stop ends the process with SIGTERM (a graceful exit) and waits.
func (p *serveProcess) stop(t *testing.T) {
	t.Helper()
	select {
	case <-p.done:
		return
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
		if p.err != nil {
			t.Fatalf("graceful shutdown: %v\n%s", p.err, p.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("actgate serve did not stop:\n%s", p.stderr.String())
	}
}

// alive reports whether the process is still running.
func (p *serveProcess) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// agent is an MCP client session (the SDK's) to endpoint: a new session each time.
func agent(t *testing.T, endpoint string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "faults-agent", Version: "v1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
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

// eventually polls cond until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
