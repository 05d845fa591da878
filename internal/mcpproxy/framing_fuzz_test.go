package mcpproxy

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/authority/boltstore"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/jcs"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/policy"
	"github.com/actgate/actgate/internal/sink"
)

// The fuzz targets of this file cover the MCP JSON-RPC framing of the sink (docs/security.md
// "Fuzz targets for untrusted bytes"): the bytes an agent POSTs to /mcp/{server} (FuzzAgentMessage)
// and the bytes the upstream answers a tools/call with (FuzzUpstreamAnswer). Both run the real
// stack — SDK streamable-HTTP handler, proxy, sink, bbolt journal, an SDK upstream — over loopback,
// built once per fuzz worker.

// fuzzRig is the stack one fuzz worker drives.
type fuzzRig struct {
	up       *mcptest.Server
	store    *boltstore.Store
	endpoint string
	proxy    *Proxy
}

// newFuzzRig builds gate, proxy and server around an mcptest upstream with bankTools and the
// given interceptor; callTimeout bounds one dispatched call.
func newFuzzRig(f testing.TB, intercept func(http.ResponseWriter, *http.Request) bool, callTimeout time.Duration) *fuzzRig {
	f.Helper()
	up, err := mcptest.Start(bankTools(), mcptest.Options{Intercept: intercept})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = up.Close() })
	raw, err := os.ReadFile("testdata/policy.yaml")
	if err != nil {
		f.Fatal(err)
	}
	spec, err := policy.ParseSpec(bytes.ReplaceAll(raw, []byte("{{BANK}}"), []byte(up.URL)))
	if err != nil {
		f.Fatal(err)
	}
	compiled, err := policy.Compile("default/proxy-fuzz", spec, 1)
	if err != nil {
		f.Fatal(err)
	}
	seed := sha256.Sum256([]byte("mcpproxy fuzz"))
	signer, err := authority.NewSigner(ed25519.NewKeyFromSeed(seed[:]))
	if err != nil {
		f.Fatal(err)
	}
	st, err := boltstore.Open(filepath.Join(fuzzDir(f), "actgate.db"), boltstore.Options{Verifier: signer.Verifier()})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = st.Close() })
	ids, err := act.NewIDIssuer([]byte("0123456789abcdef0123456789abcdef"), nil)
	if err != nil {
		f.Fatal(err)
	}
	g, err := sink.New(sink.Options{SinkID: "proxy-test", Policy: sink.CompiledPolicy(compiled), Store: st, Journal: st, Signer: signer, IDs: ids})
	if err != nil {
		f.Fatal(err)
	}
	p, _, endpoint := serveProxy(f, Config{Server: "bank", URL: up.URL, Gate: g, Agent: agentName, TrustDeclaredProvenance: true, CallTimeout: callTimeout})
	return &fuzzRig{up: up, store: st, endpoint: endpoint, proxy: p}
}

// fuzzDir is a folder for the rig's bbolt file: on tmpfs when the machine has one, so that a
// journaled call's fsync costs microseconds and a loaded disk cannot stall a fuzz worker past
// the fuzzer's hang detector; the durability of the journal is not what these targets test.
func fuzzDir(f testing.TB) string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "actgate-fuzz-"); err == nil {
			f.Cleanup(func() { _ = os.RemoveAll(dir) })
			return dir
		}
	}
	return f.TempDir()
}

// fuzzSession is a hand-written agent session (raw JSON-RPC over HTTP) that reopens itself
// when the proxy no longer knows it.
type fuzzSession struct {
	endpoint string
	client   *http.Client
	mu       sync.Mutex
	id       string
}

func (s *fuzzSession) post(sessionID string, body []byte) (int, []byte, http.Header, error) {
	req, err := http.NewRequest(http.MethodPost, s.endpoint, bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sessionID != "" {
		req.Header.Set("Mcp-Session-Id", sessionID)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header, err
}

// session returns an initialized session id.
func (s *fuzzSession) session() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.id != "" {
		return s.id, nil
	}
	status, b, hdr, err := s.post("", []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"fuzz","version":"1"}}}`))
	if err != nil || status != http.StatusOK || hdr.Get("Mcp-Session-Id") == "" {
		return "", fmt.Errorf("initialize: HTTP %d %v: %s", status, err, b)
	}
	id := hdr.Get("Mcp-Session-Id")
	if status, b, _, err := s.post(id, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)); err != nil || status >= 300 {
		return "", fmt.Errorf("initialized: HTTP %d %v: %s", status, err, b)
	}
	s.id = id
	return id, nil
}

func (s *fuzzSession) forget(id string) {
	s.mu.Lock()
	if s.id == id {
		s.id = ""
	}
	s.mu.Unlock()
}

// toolsCalls extracts the tools/call requests a body holds, as the JSON-RPC layer could read
// them: one object, or the objects of a batch.
func toolsCalls(body []byte) []*mcp.CallToolParamsRaw {
	var msgs []json.RawMessage
	if err := json.Unmarshal(body, &msgs); err != nil {
		msgs = []json.RawMessage{body}
	}
	var out []*mcp.CallToolParamsRaw
	for _, m := range msgs {
		var req struct {
			Method string          `json:"method"`
			ID     json.RawMessage `json:"id"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(m, &req) != nil || req.Method != "tools/call" {
			continue
		}
		var p mcp.CallToolParamsRaw
		if json.Unmarshal(req.Params, &p) != nil {
			continue
		}
		out = append(out, &p)
	}
	return out
}

// FuzzAgentMessage: arbitrary bytes POSTed by an initialized agent session to /mcp/{server}.
// Never a panic, never a server error, and an invocation only for a well-formed tools/call of
// that tool whose arguments canonicalize (RFC 8785) — and then the upstream receives exactly
// the canonical bytes, with the sink's operation id and none of the agent's other _meta
// (tool-use-binding §8, §16; envelope-04 §12.7: no repaired input is ever forwarded).
func FuzzAgentMessage(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_balance","arguments":{"account":"a"}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ticket_create","arguments":{"title":"t","n":1.50}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get_balance","arguments":{"a":1,"a":2}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"get_balance","arguments":{"a":"\ud800"}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"get_balance","arguments":{"a":1e400}}}`,
		`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"get_balance","arguments":[1]}}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"send_payment","arguments":{"amount":5}}}`,
		`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"get_balance","arguments":{},"_meta":{"actgate.io/operation-id":"forged","actgate.io/instruction-provenance":"user"}}}`,
		`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"request_binding_moment","arguments":{"synopsis":1}}}`,
		`{"jsonrpc":"2.0","id":11,"method":"tools/call","params":null}`,
		`{"jsonrpc":"2.0","id":12,"method":"tools/call"}`,
		`[{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"get_balance","arguments":{}}},{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":"ticket_create","arguments":{}}}]`,
		`{"jsonrpc":"2.0","id":15,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":16,"method":"initialize","params":{}}`,
		`{"jsonrpc":"2.0","id":{"x":1},"method":"tools/call","params":{"name":"get_balance","arguments":{}}}`,
		`{"jsonrpc":"1.0","id":17,"method":"tools/call","params":{"name":"get_balance","arguments":{}}}`,
		`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"get_balance","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":18,"result":{}}`,
		`{"jsonrpc":"2.0","id":19,"method":"tools/call","params":{"name":"get_balance","arguments":{"x":"` + strings.Repeat("a", 2000) + `"}}}`,
		"{\"jsonrpc\":\"2.0\",\"id\":20,\"method\":\"tools/call\",\"params\":{\"name\":\"get_balance\",\"arguments\":{\"x\":\"\xff\"}}}",
		`{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{"name":"get_balance","arguments":{"b":[1,2],"a":{"z":null,"y":true}}}`,
		``,
		`{`,
		`null`,
	} {
		f.Add([]byte(s))
	}
	rig := newFuzzRig(f, nil, 5*time.Second)
	sess := &fuzzSession{endpoint: rig.endpoint, client: &http.Client{Timeout: 30 * time.Second}}
	// The harness sees invocations: a well-formed call with non-canonical arguments runs once,
	// with the canonical bytes (otherwise every "no invocation" below would be vacuous).
	id, err := sess.session()
	if err != nil {
		f.Fatal(err)
	}
	if status, resp, _, err := sess.post(id, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_balance","arguments":{"b":1.0,"a":"x"}}}`)); err != nil || status != http.StatusOK {
		f.Fatalf("self-check call: HTTP %d %v %s", status, err, resp)
	}
	if calls := rig.up.Calls(); len(calls) != 1 || string(calls[0].Args) != `{"a":"x","b":1}` {
		f.Fatalf("self-check: upstream calls %+v", calls)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		id, err := sess.session()
		if err != nil {
			t.Fatal(err)
		}
		before := len(rig.up.Calls())
		status, resp, _, err := sess.post(id, body)
		if err != nil {
			t.Fatalf("POST: %v", err) // includes a hang of 30 s
		}
		if status == http.StatusNotFound {
			sess.forget(id) // the body ended the session; the next input opens another
		}
		if status >= 500 {
			t.Fatalf("HTTP %d: %s", status, resp)
		}
		calls := rig.up.Calls()[before:]
		if len(calls) == 0 {
			return
		}
		reqs := toolsCalls(body)
		if len(calls) > len(reqs) {
			t.Fatalf("%d invocations from %d tools/call requests in %q", len(calls), len(reqs), body)
		}
		for _, c := range calls {
			matched := false
			for _, p := range reqs {
				raw := p.Arguments
				if len(raw) == 0 || string(raw) == "null" {
					raw = json.RawMessage("{}")
				}
				canonical, err := jcs.Canonicalize(raw, jcs.Full)
				if err != nil || p.Name != c.Tool {
					continue
				}
				if string(canonical) == string(c.Args) {
					matched = true
				}
			}
			if !matched {
				t.Fatalf("the upstream ran %s %s, which no well-formed tools/call in %q asked for", c.Tool, c.Args, body)
			}
			if c.OperationID == "" || c.OperationID == "forged" {
				t.Fatalf("operation id %q reached the upstream", c.OperationID)
			}
			if _, ok := c.Meta[MetaProvenance]; ok {
				t.Fatalf("the agent's _meta reached the upstream: %v", c.Meta)
			}
		}
	})
}

// upstreamStatuses are the HTTP statuses FuzzUpstreamAnswer picks from.
var upstreamStatuses = []int{200, 200, 200, 202, 204, 301, 400, 401, 404, 408, 429, 500, 502, 503}

// FuzzUpstreamAnswer: the upstream answers a journaled tools/call (ticket_create, a policy
// permit) with arbitrary bytes, as JSON or as an SSE stream, under a chosen HTTP status; "$ID"
// in the body stands for the request's JSON-RPC id. Whatever it says: no panic; the upstream is
// asked exactly once; the journal ends EXECUTED, FAILED or INDETERMINATE, never stranded in
// DISPATCH_PENDING or INVOKED; EXECUTED only on a 2xx answer carrying a result; the agent's
// answer agrees with the journal (INDETERMINATE is refused with EF_INDETERMINATE); and a retry
// of an INDETERMINATE act is refused without contacting the upstream (AEB "Classify the Effect
// Outcome", "Perform Authenticated Reconciliation").
func FuzzUpstreamAnswer(f *testing.F) {
	for _, s := range []struct {
		status byte
		sse    bool
		body   string
	}{
		{0, false, `{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"ok"}]}}`},
		{0, false, `{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"no"}],"isError":true}}`},
		{0, true, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":$ID,\"result\":{\"content\":[]}}\n\n"},
		{0, true, "data: {\"jsonrpc\":\"2.0\",\"id\":$ID,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"\\ud800\"}]}}\n\n"},
		{0, false, `{"jsonrpc":"2.0","id":$ID,"error":{"code":-32602,"message":"unknown tool"}}`},
		{0, false, `{"jsonrpc":"2.0","id":$ID,"error":{"code":-32000,"message":"crashed half way"}}`},
		{0, false, `{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"image","data":"!!"}]}}`},
		{0, false, `{"jsonrpc":"2.0","id":$ID,"result":{"content":"x"}}`},
		{0, false, `{"jsonrpc":"2.0","id":999999,"result":{"content":[]}}`},
		{0, false, `{"jsonrpc":"2.0","id":$ID,"result":null}`},
		{0, false, `{"jsonrpc":"2.0","id":$ID}`},
		{0, false, `[{"jsonrpc":"2.0","id":$ID,"result":{"content":[]}}]`},
		{0, false, `{"jsonrpc":"2.0","id":$ID,"result":{"content":[]},"result":{"isError":true}}`},
		{0, false, `not json`},
		{0, false, ``},
		{0, true, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n"},
		// Resumable streams: a priming event and a close (the proxy resumes with a GET the
		// real server answers), a retry field beyond any bound, an id with NUL.
		{0, true, "id: 1\nretry: 10\ndata: \n\n"},
		{0, true, "id: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":$ID,\"result\":{\"content\":[]}}\n\n"},
		{0, true, "id: a\x00b\nretry: 99999999999\ndata: \n\n"},
		{0, true, "retry: -5\nid: x\n\n"},
		{3, false, ``},
		{7, false, `{"error":"unauthorized"}`},
		{8, false, `{}`},
		{10, false, ``},
		{11, false, `{"jsonrpc":"2.0","id":$ID,"result":{"content":[]}}`},
		{13, false, `overloaded`},
	} {
		f.Add(s.status, s.sse, []byte(s.body))
	}
	f.Fuzz(upstreamAnswerTarget(f))
}

// upstreamAnswerTarget builds FuzzUpstreamAnswer's rig and returns its fuzz function.
func upstreamAnswerTarget(f testing.TB) func(t *testing.T, statusIdx byte, sse bool, body []byte) {

	// The answer the upstream gives the tools/call of the current input (matched by its
	// arguments, so that a late request of an earlier input, possible on a loaded machine, is
	// neither counted nor answered with this input's bytes), and what it saw.
	type answer struct {
		args   string
		status int
		sse    bool
		body   []byte
	}
	var (
		next   atomic.Pointer[answer]
		asked  atomic.Int64
		lastOp atomic.Value // operation id of the current input's tools/call
	)
	intercept := func(w http.ResponseWriter, r *http.Request) bool {
		a := next.Load()
		if a == nil || !isToolsCall(r) {
			return false
		}
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		var req struct {
			ID     json.RawMessage `json:"id"`
			Params struct {
				Arguments json.RawMessage `json:"arguments"`
				Meta      map[string]any  `json:"_meta"`
			} `json:"params"`
		}
		if json.Unmarshal(b, &req) != nil || string(req.Params.Arguments) != a.args {
			return false // not this input's call: the real server answers it
		}
		op, _ := req.Params.Meta[MetaOperationID].(string)
		lastOp.Store(op)
		asked.Add(1)
		body := bytes.ReplaceAll(a.body, []byte("$ID"), req.ID)
		if a.sse {
			w.Header().Set("Content-Type", "text/event-stream")
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(a.status)
		_, _ = w.Write(body)
		return true
	}
	rig := newFuzzRig(f, intercept, 300*time.Millisecond)
	c := mcp.NewClient(&mcp.Implementation{Name: "fuzz-agent", Version: "v1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: rig.endpoint, DisableStandaloneSSE: true}, sessionOpts)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = cs.Close() })
	var n atomic.Int64

	return func(t *testing.T, statusIdx byte, sse bool, body []byte) {
		// Distinct arguments per input: each is a new act (a retry would be refused or replayed).
		args := json.RawMessage(fmt.Sprintf(`{"n":%d}`, n.Add(1)))
		a := &answer{args: string(args), status: upstreamStatuses[int(statusIdx)%len(upstreamStatuses)], sse: sse, body: body}
		lastOp.Store("")
		before := asked.Load()
		next.Store(a)
		defer next.Store(nil)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ticket_create", Arguments: args})
		// The one error the agent may get instead of a result is the upstream's own JSON-RPC
		// refusal before execution, passed through (checked against the journal below).
		var rpcErr *jsonrpc.Error
		if err != nil && !errors.As(err, &rpcErr) {
			t.Fatalf("the agent got no result: %v", err)
		}
		if rpcErr != nil {
			res = &mcp.CallToolResult{}
		}
		switch got := asked.Load() - before; got {
		case 0:
			// The previous answer broke the upstream session and this call found it closed:
			// nothing was sent, and the agent is told so (the proxy opens a new session for the
			// next call).
			if !res.IsError || rpcErr != nil {
				t.Fatalf("a call that never reached the upstream succeeded or got an upstream error: %+v %v", res, rpcErr)
			}
			return
		case 1:
		default:
			t.Fatalf("the upstream was asked %d times, want 1", got)
		}
		op, _ := lastOp.Load().(string)
		rec, err := rig.store.Record(context.Background(), op)
		if err != nil {
			t.Fatalf("journal record of operation %q: %v", op, err)
		}
		code, _ := res.Meta[MetaEFCode].(string)
		if rpcErr != nil && (rec.State != journal.StateFailed || !bytes.Contains(body, []byte(fmt.Sprintf(`"code":%d`, rpcErr.Code)))) {
			t.Fatalf("the agent got JSON-RPC error %d (%s) for a %s act on HTTP %d %q", rpcErr.Code, rpcErr.Message, rec.State, a.status, body)
		}
		switch rec.State {
		case journal.StateExecuted:
			if a.status < 200 || a.status > 299 || !bytes.Contains(body, []byte(`"result"`)) {
				t.Fatalf("EXECUTED on HTTP %d %q", a.status, body)
			}
			if res.IsError || code != "" {
				t.Fatalf("EXECUTED but the agent was told isError=%v code=%q", res.IsError, code)
			}
		case journal.StateFailed:
			if rpcErr == nil && !res.IsError {
				t.Fatalf("FAILED but the agent got a success: %+v", res)
			}
		case journal.StateIndeterminate:
			if code != string(ef.EFIndeterminate) {
				t.Fatalf("INDETERMINATE but the agent got code %q isError=%v", code, res.IsError)
			}
			// A retry is refused and never reaches the upstream.
			r2, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ticket_create", Arguments: args})
			if err != nil {
				t.Fatalf("retry: %v", err)
			}
			if c2, _ := r2.Meta[MetaEFCode].(string); c2 != string(ef.EFIndeterminate) || asked.Load()-before != 1 {
				t.Fatalf("retry of an INDETERMINATE act: code %q, upstream asked %d times", c2, asked.Load()-before)
			}
		default:
			t.Fatalf("journal left in %s for HTTP %d %q", rec.State, a.status, body)
		}
	}
}
