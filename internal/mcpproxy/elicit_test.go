package mcpproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/mcpproxy/elicitform"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/policy"
	"github.com/actgate/actgate/internal/sink"
	"github.com/actgate/actgate/test/testutil"
)

// elicitFixture is a real gate compiled from testdata/elicitation-policy.yaml behind a real
// proxy with the policy as its ElicitationPolicy, in front of a real upstream.
type elicitFixture struct {
	up     *mcptest.Server
	gate   *sink.Gate
	server *httptest.Server
}

func newElicitFixture(t *testing.T) *elicitFixture {
	t.Helper()
	up, err := mcptest.Start(bankTools(), mcptest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })
	raw, err := os.ReadFile("testdata/elicitation-policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := policy.ParseSpec(bytes.ReplaceAll(raw, []byte("{{BANK}}"), []byte(up.URL)))
	if err != nil {
		t.Fatal(err)
	}
	compiled, err := policy.Compile("default/elicitation-test", spec, 1)
	if err != nil {
		t.Fatal(err)
	}
	st, signer := testutil.SeededStore(t, "mcpproxy elicitation tests")
	ids, err := act.NewIDIssuer([]byte("0123456789abcdef0123456789abcdef"), nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := sink.New(sink.Options{SinkID: "proxy-test", Policy: sink.CompiledPolicy(compiled), Store: st, Journal: st, Signer: signer, IDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	_, srv, _ := serveProxy(t, Config{
		Server: "bank", URL: up.URL, Gate: g, Agent: agentName,
		Credential:  func(context.Context) (string, error) { return upstreamTok, nil },
		CallTimeout: 5 * time.Second, Elicitation: compiled, ElicitationTimeout: 10 * time.Second,
	})
	return &elicitFixture{up: up, gate: g, server: srv}
}

// human is the person at the agent's MCP client: it records every elicitation it receives and
// answers with answer (nil: the client declares no elicitation support at all).
type human struct {
	mu     sync.Mutex
	asked  []*mcp.ElicitParams
	answer func(*mcp.ElicitParams) *mcp.ElicitResult
}

func (h *human) requests() []*mcp.ElicitParams {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*mcp.ElicitParams(nil), h.asked...)
}

func (f *elicitFixture) connect(t *testing.T, h *human) *mcp.ClientSession {
	t.Helper()
	opts := &mcp.ClientOptions{}
	if h != nil && h.answer != nil {
		opts.ElicitationHandler = func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			h.mu.Lock()
			h.asked = append(h.asked, r.Params)
			h.mu.Unlock()
			return h.answer(r.Params), nil
		}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "v1"}, opts)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: f.server.URL + Path("bank")}, sessionOpts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func choose(choice, answer string) func(*mcp.ElicitParams) *mcp.ElicitResult {
	return func(*mcp.ElicitParams) *mcp.ElicitResult {
		c := map[string]any{"choice": choice}
		if answer != "" {
			c["answer"] = answer
		}
		return &mcp.ElicitResult{Action: "accept", Content: c}
	}
}

// moment returns the gate's record of the moment a result announced.
func (f *elicitFixture) moment(t *testing.T, r *mcp.CallToolResult) sink.Moment {
	t.Helper()
	id, _ := r.Meta[MetaMomentID].(string)
	if id == "" {
		t.Fatalf("the result announces no moment: %s", text(r))
	}
	ms, err := f.gate.Moments(context.Background(), sink.MomentFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.ID == id {
			return m
		}
	}
	t.Fatalf("moment %s not registered", id)
	return sink.Moment{}
}

// hasBindingMoment reports whether the raw result carries the additive binding_moment member
// (envelope-04 §8.1), which the elicitation never replaces.
func hasBindingMoment(t *testing.T, r *mcp.CallToolResult) bool {
	t.Helper()
	// The SDK's CallToolResult drops unknown members; the moment id in _meta and the
	// rendered envelope text are what a client sees of it through the SDK types.
	return r.Meta[MetaEnvelopeDigest] != nil && strings.Contains(text(r), "Binding moment")
}

// TestElicitation drives a real go-sdk client through the proxy: whether an elicitation is
// offered, what it carries, and what its answer does to the moment and the upstream.
func TestElicitation(t *testing.T) {
	type want struct {
		elicited   bool
		resolution string // the moment's final resolution kind, "" = still pending
		metaAction string // MetaElicitation action, "" = absent
	}
	cases := []struct {
		name   string
		tool   string
		args   string
		answer func(*mcp.ElicitParams) *mcp.ElicitResult // nil: the client declares no elicitation
		want   want
	}{
		{"INFORMATIONAL, option chosen", "get_balance", `{"account":"checking"}`, choose("option:0", ""),
			want{elicited: true, resolution: "option", metaAction: "accept"}},
		{"INFORMATIONAL, declined in the form", "get_balance", `{"account":"checking"}`, choose("declined", ""),
			want{elicited: true, resolution: "declined", metaAction: "accept"}},
		{"INFORMATIONAL, question hatch", "get_balance", `{"account":"checking"}`, choose("question", ""),
			want{elicited: true, resolution: "question", metaAction: "accept"}},
		{"INFORMATIONAL, answer hatch", "get_balance", `{"account":"checking"}`, choose("answer", "Use the joint account."),
			want{elicited: true, resolution: "answer", metaAction: "accept"}},
		{"INFORMATIONAL, form dismissed", "get_balance", `{"account":"checking"}`,
			func(*mcp.ElicitParams) *mcp.ElicitResult { return &mcp.ElicitResult{Action: "decline"} },
			want{elicited: true, metaAction: "decline"}},
		{"INFORMATIONAL, a choice never offered", "get_balance", `{"account":"checking"}`, choose("option:9", ""),
			want{elicited: true, metaAction: "error"}},
		{"INFORMATIONAL, client without elicitation", "get_balance", `{"account":"checking"}`, nil,
			want{}},
		{"FINANCIAL is never elicited", "send_payment", `{"amount":5000}`, choose("option:0", ""),
			want{}},
		{"two principals: not elicited", "ticket_create", `{"priority":"high"}`, choose("option:0", ""),
			want{}},
		{"the agent as the only principal: not elicited", "refuse", `{}`, choose("option:0", ""),
			want{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newElicitFixture(t)
			h := &human{answer: c.answer}
			cs := f.connect(t, h)
			res := call(t, cs, c.tool, c.args, nil)
			if c.tool == "refuse" {
				// policy refuses a rule whose only principal is the agent before any moment
				// exists; nothing to elicit, nothing invoked.
				if efCode(res) != "EF_POLICY_DENIED" || len(h.requests()) != 0 || f.up.Count(c.tool) != 0 {
					t.Fatalf("%s, %d elicitations, %d calls", text(res), len(h.requests()), f.up.Count(c.tool))
				}
				return
			}
			if efCode(res) != "EF_ESCALATION_REQUIRED" || !hasBindingMoment(t, res) {
				t.Fatalf("want an escalation carrying binding_moment: %s %v", text(res), res.Meta)
			}
			if got := len(h.requests()) > 0; got != c.want.elicited {
				t.Fatalf("elicited %v, want %v", got, c.want.elicited)
			}
			m := f.moment(t, res)
			if got := m.Resolution; got != c.want.resolution || m.Resolved != (c.want.resolution != "") {
				t.Errorf("moment resolved %v as %q, want %q", m.Resolved, got, c.want.resolution)
			}
			meta, _ := res.Meta[elicitform.Meta].(map[string]any)
			if got, _ := meta["action"].(string); got != c.want.metaAction {
				t.Errorf("_meta %s = %v, want action %q", elicitform.Meta, res.Meta[elicitform.Meta], c.want.metaAction)
			}
			if c.want.resolution != "" && meta["principal"] != "alice" {
				t.Errorf("resolved as %v, want alice", meta["principal"])
			}
			if f.up.Count(c.tool) != 0 {
				t.Errorf("the upstream was called before any resolution was used")
			}
			switch c.want.resolution {
			case "option":
				// The chosen option is the requested call: made again, it runs once.
				again := call(t, cs, c.tool, c.args, nil)
				if again.IsError || f.up.Count(c.tool) != 1 {
					t.Fatalf("after the elicited option the call did not run once: %s (count %d)", text(again), f.up.Count(c.tool))
				}
			case "answer":
				// The answer reaches the agent with its next result, like any resolution.
				next := call(t, cs, "get_balance", `{"account":"other"}`, nil)
				if !strings.Contains(text(next), "Use the joint account.") {
					t.Errorf("the answer was not delivered: %s", text(next))
				}
			case "":
				if c.want.elicited || c.answer == nil || c.tool == "send_payment" {
					// Still pending: the principal's own surface can resolve it.
					if m.Resolved {
						t.Error("resolved")
					}
				}
			}
		})
	}
}

// TestElicitationForm checks what the elicitation carries: the §9.1 rendering (briefing slots,
// recommended option, reasoning, hatches) and a schema enumerating the options, both hatches
// and decline.
func TestElicitationForm(t *testing.T) {
	f := newElicitFixture(t)
	h := &human{answer: func(*mcp.ElicitParams) *mcp.ElicitResult { return &mcp.ElicitResult{Action: "cancel"} }}
	cs := f.connect(t, h)
	call(t, cs, "get_balance", `{"account":"checking"}`, nil)
	reqs := h.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d elicitations", len(reqs))
	}
	p := reqs[0]
	for _, want := range []string{"alice", "Rule balance holds this get_balance call", "Read the savings balance instead", "It is the account the question is about."} {
		if !strings.Contains(p.Message, want) {
			t.Errorf("message lacks %q:\n%s", want, p.Message)
		}
	}
	schema, err := json.Marshal(p.RequestedSchema)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"option:0"`, `"option:1"`, `"answer"`, `"question"`, `"declined"`, `(recommended)`, `"required":["choice"]`} {
		if !strings.Contains(string(schema), want) {
			t.Errorf("schema lacks %s: %s", want, schema)
		}
	}
	if strings.Contains(p.Message, `"account"`) && strings.Contains(string(schema), "checking") {
		t.Errorf("the form carries the raw arguments")
	}
}

// TestElicitationProposedMoment: an agent-proposed moment whose option needing a human is
// INFORMATIONAL is offered too, and the chosen option's call then runs once.
func TestElicitationProposedMoment(t *testing.T) {
	f := newElicitFixture(t)
	h := &human{answer: choose("option:1", "")}
	cs := f.connect(t, h)
	proposal := `{"synopsis":"Read the savings balance before deciding.","findings":["The checking balance is stale."],` +
		`"recommendations":["Read savings."],"stem":"Which balance should I read?",` +
		`"options":[{"label":"Read checking","tool":"get_balance","args":{"account":"checking"},"reasoning":"The usual account."},` +
		`{"label":"Read savings","tool":"get_balance","args":{"account":"savings"},"reasoning":"The account in question."}],"recommended":1}`
	res := call(t, cs, sink.RequestBindingMomentTool, proposal, nil)
	if res.IsError {
		t.Fatalf("proposal refused: %s", text(res))
	}
	if len(h.requests()) != 1 {
		t.Fatalf("%d elicitations, want 1", len(h.requests()))
	}
	m := f.moment(t, res)
	if !m.Resolved || m.Resolution != "option" {
		t.Fatalf("moment %+v", m)
	}
	if r := call(t, cs, "get_balance", `{"account":"checking"}`, nil); !r.IsError || f.up.Count("get_balance") != 0 {
		t.Fatalf("an option not chosen ran: %s", text(r))
	}
	if r := call(t, cs, "get_balance", `{"account":"savings"}`, nil); r.IsError || f.up.Count("get_balance") != 1 {
		t.Fatalf("the chosen option did not run once: %s", text(r))
	}
}
