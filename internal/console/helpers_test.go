package console

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/actgate/actgate/internal/envelope"
)

// testNow is the fixed clock of the unit tests.
var testNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

const testToken = "0123456789abcdef0123456789abcdef"

// testNonce is the anti-CSRF nonce of every page the unit tests' console renders, and
// testCSRF the token it signs (newTestConsole fixes the CSRF key too).
const testNonce = "fedcba9876543210fedcba9876543210"

var testCSRFKey = []byte("console-unit-test-csrf-key-32byt")

// testCSRF is the anti-CSRF token newTestConsole's pages carry.
var testCSRF = func() string {
	c := &Console{csrfKey: testCSRFKey, nonce: func() string { return testNonce }}
	return c.csrfToken()
}()

// keyed is the console's URL for path under the test key.
func keyed(path string) string { return "http://127.0.0.1:8080/" + testToken + path }

// fakeBackend is an in-memory Backend for the handler's unit tests: it records every
// resolution it was asked to write, and removes a resolved moment from the pending list.
type fakeBackend struct {
	mu        sync.Mutex
	moments   []Moment
	listErr   error
	refuse    error // returned by Resolve when set
	resolved  []resolveCall
	listCalls int
}

type resolveCall struct {
	id  string
	raw []byte
}

func (f *fakeBackend) List(context.Context) ([]Moment, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listCalls++
	if f.listErr != nil {
		return nil, f.listErr
	}
	return append([]Moment(nil), f.moments...), nil
}

func (f *fakeBackend) Resolve(_ context.Context, id string, raw []byte) (Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resolved = append(f.resolved, resolveCall{id, append([]byte(nil), raw...)})
	if f.refuse != nil {
		return Result{}, f.refuse
	}
	r, err := envelope.ParseResolution(raw)
	if err != nil {
		return Result{}, err
	}
	for i, m := range f.moments {
		if m.ID == id {
			f.moments = append(f.moments[:i], f.moments[i+1:]...)
			break
		}
	}
	return Result{Kind: r.Kind, Message: id + " resolved: " + string(r.Kind)}, nil
}

func (f *fakeBackend) calls() []resolveCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]resolveCall(nil), f.resolved...)
}

// built returns an envelope built from d with two options.
func built(t testing.TB, d envelope.Draft) *envelope.Envelope {
	t.Helper()
	if d.Synopsis == "" {
		d.Synopsis = "Dry-run the EUR 2500.00 payment before sending it."
	}
	if d.Findings == nil {
		d.Findings = []string{"send_payment is FINANCIAL.", "The amount is within the cap."}
	}
	if d.Recommendations == nil {
		d.Recommendations = []string{"Run a dry run first."}
	}
	if d.Offer == "" {
		d.Offer = "Ask for detail on any item."
	}
	if d.Stem == "" {
		d.Stem = "How should the payment proceed?"
	}
	if d.Options == nil {
		d.Options = []envelope.DraftOption{
			{Label: "Send the payment", Reasoning: "Pays now, as asked.", Tool: "send_payment", Args: json.RawMessage(`{"amount":"2500.00"}`)},
			{Label: "Dry-run the payment", Reasoning: "Shows the effect without moving money.", Tool: "send_payment", Args: json.RawMessage(`{"amount":"2500.00","dry_run":true}`)},
		}
	}
	env, err := envelope.Build(d)
	if err != nil {
		t.Fatal(err)
	}
	builtCalls.Store(env.Digest(), callsOf(d))
	return env
}

// builtCalls holds, by envelope digest, the calls of every envelope built: what a gate would
// hold for its options.
var builtCalls sync.Map

// callsOf is the calls of d's options, as a gate holding them would report them.
func callsOf(d envelope.Draft) []envelope.Call {
	out := make([]envelope.Call, len(d.Options))
	for i, o := range d.Options {
		out[i] = envelope.Call{Server: "payments", Destination: "https://payments.example/mcp", Tool: o.Tool, Args: o.Args}
	}
	return out
}

// wellMoment is a pending moment of env with the calls built registered for it (none for an
// envelope built elsewhere).
func wellMoment(id string, env *envelope.Envelope) Moment {
	o, _ := env.Option(0)
	calls, _ := builtCalls.Load(env.Digest())
	cs, _ := calls.([]envelope.Call)
	return Moment{
		ID: id, Principal: "alice", Agent: "billing-agent", Expires: testNow.Add(time.Hour),
		Act:      Act{Name: "act-" + id, Tool: "send_payment", Server: "payments", Class: "FINANCIAL", ActionDigest: o.ActionDigest},
		Envelope: env, Calls: cs, AgentAuthored: true,
	}
}

func newTestConsole(t testing.TB, b Backend) *Console {
	t.Helper()
	c, err := New(Options{Backend: b, Principal: "alice", Surface: "test", Token: testToken, Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatal(err)
	}
	c.csrfKey, c.nonce = testCSRFKey, func() string { return testNonce }
	return c
}

// get renders the page.
func get(t testing.TB, c *Console) (*httptest.ResponseRecorder, *html.Node) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, keyed("/"), nil)
	rec := httptest.NewRecorder()
	c.ServeHTTP(rec, req)
	doc, err := html.Parse(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatal(err)
	}
	return rec, doc
}

// post submits form as a same-origin browser would.
func post(t testing.TB, c *Console, form url.Values, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, keyed("/resolve"), strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://127.0.0.1:8080")
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	rec := httptest.NewRecorder()
	c.ServeHTTP(rec, req)
	return rec
}

// ---- a small DOM query helper over golang.org/x/net/html ----

func attr(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

// all returns the element nodes under n (n included) for which match holds, in document order.
func all(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(x *html.Node) {
		if x.Type == html.ElementNode && match(x) {
			out = append(out, x)
		}
		for c := x.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return out
}

// by matches an element whose attribute key has value val.
func by(key, val string) func(*html.Node) bool {
	return func(n *html.Node) bool { v, ok := attr(n, key); return ok && v == val }
}

func tag(name string) func(*html.Node) bool {
	return func(n *html.Node) bool { return n.Data == name }
}

// text is the text content of n, whitespace collapsed.
func text(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(x *html.Node) {
		if x.Type == html.TextNode {
			b.WriteString(x.Data)
		}
		for c := x.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return strings.Join(strings.Fields(b.String()), " ")
}

// one returns the single match under n, failing otherwise.
func one(t testing.TB, n *html.Node, what string, match func(*html.Node) bool) *html.Node {
	t.Helper()
	got := all(n, match)
	if len(got) != 1 {
		t.Fatalf("%s: %d matches, want 1", what, len(got))
	}
	return got[0]
}
