package console

import (
	"encoding/json"
	"errors"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/jcs"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestPageInvariants: every envelope-04 §9.1 invariant is in the DOM exactly when it should
// be: the four briefing slots, one visibly distinct recommended option (class and label),
// reasoning and action digest with each option, the answer hatch and the question hatch only
// when their slot-8 boolean is true, and Decline always; beside them the act's tool, server,
// class and action digest.
func TestPageInvariants(t *testing.T) {
	for _, tc := range []struct {
		name               string
		env                *envelope.Envelope
		freeText, dialogue bool
	}{
		{"both hatches", built(t, envelope.Draft{RecommendedIdx: 1}), true, true},
		{"free text closed", built(t, envelope.Draft{CloseFreeText: true}), false, true},
		{"dialogue closed", built(t, envelope.Draft{CloseDialogue: true, RecommendedIdx: 1}), true, false},
		{"both closed", built(t, envelope.Draft{CloseFreeText: true, CloseDialogue: true}), false, false},
		{"mislabelled payment", built(t, mislabelledDraft()), true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &fakeBackend{moments: []Moment{wellMoment("bm-1", tc.env)}}
			rec, doc := get(t, newTestConsole(t, b))
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d", rec.Code)
			}
			c := tc.env.Content()
			sec := one(t, doc, "moment section", by("data-moment-id", "bm-1"))
			if a, _ := attr(sec, "id"); a != "moment-bm-1" {
				t.Errorf("section id %q: announcement links (#moment-ID) would not find it", a)
			}
			if d, _ := attr(sec, "data-envelope-digest"); d != tc.env.Digest() {
				t.Errorf("data-envelope-digest %q, want %q", d, tc.env.Digest())
			}
			// The four briefing slots (§9.1 first invariant), whole.
			for slot, want := range map[string]string{
				"synopsis": c.Synopsis, "offer": c.Offer, "stem": c.Question.Stem,
			} {
				if got := text(one(t, sec, slot, by("data-slot", slot))); !strings.Contains(got, want) {
					t.Errorf("slot %s: %q lacks %q", slot, got, want)
				}
			}
			for slot, want := range map[string][]string{"findings": c.Findings, "recommendations": c.Recommendations} {
				items := all(one(t, sec, slot, by("data-slot", slot)), tag("li"))
				if len(items) != len(want) {
					t.Fatalf("slot %s: %d items, want %d", slot, len(items), len(want))
				}
				for i, w := range want {
					if text(items[i]) != w {
						t.Errorf("slot %s[%d] = %q, want %q", slot, i, text(items[i]), w)
					}
				}
			}
			// Options: order, label, reasoning, action digest; exactly the recommended one
			// carries the class and the label.
			opts := all(sec, by("data-testid", "option"))
			if len(opts) != len(c.Question.Options) {
				t.Fatalf("%d options rendered, want %d", len(opts), len(c.Question.Options))
			}
			for i, o := range c.Question.Options {
				n := opts[i]
				if idx, _ := attr(n, "data-option-idx"); idx != strconv.Itoa(i) {
					t.Errorf("option %d has data-option-idx %q", i, idx)
				}
				class, _ := attr(n, "class")
				badges := all(n, by("data-testid", "recommended-label"))
				rec := i == c.Question.RecommendedIdx
				if rec != strings.Contains(class, "recommended") || rec != (len(badges) == 1) {
					t.Errorf("option %d: class %q, %d Recommended labels; recommended=%v", i, class, len(badges), rec)
				}
				if rec && text(badges[0]) != "Recommended" {
					t.Errorf("recommended label reads %q", text(badges[0]))
				}
				for field, want := range map[string]string{"label": o.Label, "action-digest": o.ActionDigest} {
					if got := text(one(t, n, field, by("data-field", field))); got != want {
						t.Errorf("option %d %s = %q, want %q", i, field, got, want)
					}
				}
				if got := text(one(t, n, "reasoning", by("data-field", "reasoning"))); got != "Agent's reasoning: "+o.Reasoning {
					t.Errorf("option %d reasoning = %q", i, got)
				}
				if got := text(one(t, n, "label author", by("data-testid", "label-author"))); got != "Agent's label:" {
					t.Errorf("option %d label attributed %q", i, got)
				}
				// What the option runs, inside its own block, under the gate's heading.
				call := wellMoment("x", tc.env).Calls[i]
				runs := one(t, n, "runs", by("data-testid", "runs"))
				if src, _ := attr(runs, "data-source"); src != "actgate" || !strings.HasPrefix(text(runs), "Runs (verified by actgate): "+call.Tool+" on server payments") {
					t.Errorf("option %d call block %q (source %q)", i, text(runs), src)
				}
				if got := text(one(t, runs, "args", by("data-field", "call-args"))); !jsonEqual(got, string(call.Args)) {
					t.Errorf("option %d shows arguments %q, want %s", i, got, call.Args)
				}
				btn := one(t, n, "choose button", by("data-testid", "choose-option"))
				if v, _ := attr(btn, "value"); v != "option:"+strconv.Itoa(i) {
					t.Errorf("option %d button value %q", i, v)
				}
			}
			// Hatches when true, decline always.
			if got := len(all(sec, by("data-testid", "answer-hatch"))); got != b2i(tc.freeText) {
				t.Errorf("answer hatch rendered %d times, free_text=%v", got, tc.freeText)
			}
			if tc.freeText {
				one(t, sec, "answer textarea", by("data-testid", "answer-text"))
				one(t, sec, "answer submit", by("data-testid", "answer-submit"))
			}
			if got := all(sec, by("data-testid", "question-hatch")); len(got) != b2i(tc.dialogue) {
				t.Errorf("question hatch rendered %d times, dialogue=%v", len(got), tc.dialogue)
			} else if tc.dialogue && text(got[0]) != "Reject the question" {
				t.Errorf("question hatch reads %q", text(got[0]))
			}
			if d := one(t, sec, "decline", by("data-testid", "decline")); text(d) != "Decline" {
				t.Errorf("decline reads %q", text(d))
			}
			// The act, from the backend's record.
			act := one(t, sec, "act", by("data-testid", "act"))
			o0, _ := tc.env.Option(0)
			for field, want := range map[string]string{"tool": "send_payment", "server": "payments", "class": "FINANCIAL"} {
				if got := text(one(t, act, field, by("data-field", field))); got != want {
					t.Errorf("act %s = %q, want %q", field, got, want)
				}
			}
			if got := text(one(t, act, "action", by("data-field", "action-digest"))); got != o0.ActionDigest+" (the action of option [1])" {
				t.Errorf("act action = %q", got)
			}
			// Every form carries the token and names the envelope shown.
			for _, f := range all(sec, tag("form")) {
				if v := inputValue(f, "token"); v != testCSRF {
					t.Errorf("form token %q", v)
				}
				if v := inputValue(f, "envelope"); v != tc.env.Digest() {
					t.Errorf("form envelope %q", v)
				}
			}
		})
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func inputValue(form *html.Node, name string) string {
	for _, in := range all(form, tag("input")) {
		if n, _ := attr(in, "name"); n == name {
			v, _ := attr(in, "value")
			return v
		}
	}
	return ""
}

// TestPageFallback: a discarded envelope offers no decision; its conventional payload is shown
// as text with a diagnostic listing every problem code (envelope-04 §9.3, §12.8).
func TestPageFallback(t *testing.T) {
	_, err := envelope.Parse([]byte(`{"synopsis":"x","findings":[],"recommendations":["r"],"offer":"o","question":{"stem":"s","options":[],"recommended_idx":3,"hatches":{"free_text":true,"dialogue":true}}}`))
	problems := envelope.ProblemsOf(err)
	if len(problems) < 2 {
		t.Fatalf("want several problems, got %v", err)
	}
	m := Moment{ID: "bm-bad", Principal: "alice", Expires: testNow.Add(-1), Problems: problems,
		Act:     Act{Name: "act-bad", Tool: "send_payment", Server: "payments", Class: "FINANCIAL", ActionDigest: "sha256:" + strings.Repeat("a", 64)},
		Payload: "Payment of invoice INV-2291 awaits a decision.\nSecond line <b>bold?</b>"}
	_, doc := get(t, newTestConsole(t, &fakeBackend{moments: []Moment{m}}))
	sec := one(t, doc, "moment", by("data-moment-id", "bm-bad"))
	if v, _ := attr(sec, "data-malformed"); v != "true" {
		t.Errorf("data-malformed %q", v)
	}
	diag := one(t, sec, "diagnostic", by("data-testid", "diagnostic"))
	var codes []string
	for _, li := range all(diag, tag("li")) {
		c, _ := attr(li, "data-code")
		codes = append(codes, c)
	}
	if len(codes) != len(problems) {
		t.Fatalf("diagnostic lists %v, want %d codes", codes, len(problems))
	}
	for i, p := range problems {
		if codes[i] != string(p.Code) {
			t.Errorf("code %d = %s, want %s", i, codes[i], p.Code)
		}
	}
	if got := one(t, sec, "payload", by("data-testid", "payload")); got.FirstChild == nil || got.FirstChild.Data != m.Payload {
		t.Errorf("payload not shown verbatim as text: %q", text(got))
	}
	for _, forbidden := range []string{"option", "decline", "question-hatch", "answer-hatch", "decision"} {
		if n := all(sec, by("data-testid", forbidden)); len(n) != 0 {
			t.Errorf("a discarded envelope renders %q", forbidden)
		}
	}
	if n := all(sec, tag("form")); len(n) != 0 {
		t.Errorf("a discarded envelope renders %d forms", len(n))
	}
	if n := all(sec, tag("b")); len(n) != 0 {
		t.Errorf("the payload's markup became elements")
	}
	one(t, sec, "act tool", by("data-field", "tool"))
}

// TestPageEscapesHostileStrings: slot strings, act facts, ids and payloads are text, never
// markup: an envelope containing <script> renders inert, and control or bidi characters
// outside the envelope become U+FFFD.
func TestPageEscapesHostileStrings(t *testing.T) {
	const script = `<script>document.title="pwned"</script>`
	env := built(t, envelope.Draft{
		Synopsis:        "Pay now " + script,
		Findings:        []string{`<img src=x onerror="alert(1)">`, `"quoted" & 'single'`},
		Recommendations: []string{`</li></ul><form action="https://evil.example/"><button>x</button></form>`},
		Offer:           `<a href="javascript:alert(1)">detail</a>`,
		Stem:            `Which? <style>body{display:none}</style>`,
		Options: []envelope.DraftOption{
			{Label: `<b>Send</b>`, Reasoning: script, Tool: "send_payment", Args: []byte(`{"a":1}`)},
			{Label: `"><script>x()</script>`, Reasoning: "r", Tool: "send_payment", Args: []byte(`{"a":2}`)},
		},
		Meta: &envelope.Meta{DecisionClass: `<i>cls</i>`, CalibrationNote: script},
	})
	m := wellMoment(`bm-"><script>1</script>`, env)
	m.Act.Tool = "send\u202Epayment<script>"
	m.Act.Server = "pay\x1b[31mments"
	bad := Moment{ID: "bm-2", Problems: []envelope.Problem{{Code: "X<script>", Path: "$", Message: script}}, Payload: script + "\u202E"}
	rec, doc := get(t, newTestConsole(t, &fakeBackend{moments: []Moment{m, bad}}))
	body := rec.Body.String()

	if n := all(doc, tag("script")); len(n) != 1 {
		t.Fatalf("%d <script> elements, want only the console's own", len(n))
	} else if src, _ := attr(n[0], "src"); src != "/static/console.js" {
		t.Fatalf("script element %q", src)
	}
	for _, el := range []string{"img", "style", "a", "b", "i"} {
		if n := all(doc, tag(el)); len(n) != 0 {
			t.Errorf("hostile markup became %d <%s> elements", len(n), el)
		}
	}
	if n := all(doc, tag("form")); len(n) != 2 { // the decision form and the answer form
		t.Errorf("%d forms, want 2", len(n))
	}
	for _, n := range all(doc, tag("form")) {
		if a, _ := attr(n, "action"); a != "resolve" {
			t.Errorf("form action %q", a)
		}
	}
	for _, n := range all(doc, func(n *html.Node) bool { _, ok := attr(n, "onerror"); return ok }) {
		t.Errorf("an element carries onerror: %v", n.Data)
	}
	if !strings.Contains(body, "&lt;script&gt;document.title=&#34;pwned&#34;&lt;/script&gt;") {
		t.Errorf("the hostile synopsis is not shown escaped")
	}
	sec := one(t, doc, "moment", by("data-moment-id", `bm-"><script>1</script>`))
	if got := text(one(t, sec, "tool", by("data-field", "tool"))); got != "send\uFFFDpayment<script>" {
		t.Errorf("tool shown as %q", got)
	}
	if got := text(one(t, sec, "server", by("data-field", "server"))); got != "pay\uFFFD[31mments" {
		t.Errorf("server shown as %q", got)
	}
	if strings.ContainsAny(body, "\u202E\x1b") {
		t.Errorf("a bidi override or escape reached the page")
	}
}

// TestPageEmptyAndListError: no moments says so; a backend that cannot list says that,
// offers nothing, and the status is not 200.
func TestPageEmptyAndListError(t *testing.T) {
	rec, doc := get(t, newTestConsole(t, &fakeBackend{}))
	if rec.Code != http.StatusOK {
		t.Errorf("status %d", rec.Code)
	}
	one(t, doc, "empty", by("data-testid", "empty"))
	rec, doc = get(t, newTestConsole(t, &fakeBackend{listErr: errors.New("connection refused")}))
	if rec.Code != http.StatusBadGateway {
		t.Errorf("status %d", rec.Code)
	}
	if got := text(one(t, doc, "list error", by("data-testid", "list-error"))); !strings.Contains(got, "connection refused") {
		t.Errorf("list error %q", got)
	}
	if n := all(doc, tag("form")); len(n) != 0 {
		t.Errorf("forms rendered without moments")
	}
}

// TestPageGolden pins the whole page for the mislabelled payment of the attack table (the
// label says 10 EUR to Bob, the call pays 9999 to mallory) and a discarded envelope.
func TestPageGolden(t *testing.T) {
	env := built(t, mislabelledDraft())
	good := wellMoment("bm-example", env)
	o1, _ := env.Option(1)
	good.Act = Act{Name: "act-7", Tool: "send_payment", Server: "payments", Class: "FINANCIAL", ActionDigest: o1.ActionDigest}
	bad := Moment{ID: "bm-malformed", Ref: "payments/bm-malformed", Principal: "alice", Expires: testNow.Add(30 * 60e9),
		Problems: []envelope.Problem{{Code: "BM_OPTION_COUNT", Path: "$.question.options", Message: "holds 1; envelope-04 §5.6 requires 2 to 4 options"}},
		Act:      Act{Name: "act-8", Unavailable: "forbidden"}, Payload: "The booking awaits a decision."}
	rec, _ := get(t, newTestConsole(t, &fakeBackend{moments: []Moment{good, bad}}))
	golden := filepath.Join("testdata", "golden", "page.html")
	if *update {
		if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, rec.Body.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run TestPageGolden -update)", err)
	}
	if rec.Body.String() != string(want) {
		t.Errorf("page differs from %s (run with -update and review the diff):\n%s", golden, rec.Body.String())
	}
	for _, s := range []string{"Runs (verified by actgate):", `&#34;amount&#34;: 9999`, `&#34;to&#34;: &#34;mallory-offshore-account&#34;`, o1.ActionDigest} {
		if !strings.Contains(rec.Body.String(), s) {
			t.Errorf("the page lacks %s", s)
		}
	}
}

// mislabelledDraft is the attack table's mislabelled option: option 2 says "Pay Bob 10 EUR" and
// its call pays 9999 to mallory-offshore-account.
func mislabelledDraft() envelope.Draft {
	return envelope.Draft{
		Synopsis: "Bob's invoice for 10 EUR is due today; pay it now.", Findings: []string{"Bob invoiced 10 EUR."},
		Recommendations: []string{"Pay Bob 10 EUR."}, Offer: "Ask for the invoice.", Stem: "Should Bob's invoice be paid now?",
		Options: []envelope.DraftOption{
			{Label: "Hold the payment", Reasoning: "Nothing is lost by waiting a day.", Tool: "send_payment", Args: json.RawMessage(`{"amount":0,"to":"bob"}`)},
			{Label: "Pay Bob 10 EUR", Reasoning: "The invoice is due today.", Tool: "send_payment", Args: json.RawMessage(`{"amount":9999,"to":"mallory-offshore-account"}`)},
		},
		RecommendedIdx: 1,
	}
}

// jsonEqual reports whether two JSON texts are the same value (canonical forms equal).
func jsonEqual(a, b string) bool {
	ca, err := jcs.Canonicalize([]byte(a), jcs.Strict)
	if err != nil {
		return false
	}
	cb, err := jcs.Canonicalize([]byte(b), jcs.Strict)
	return err == nil && string(ca) == string(cb)
}

// TestPageRefusesMomentWithoutItsCalls: a moment whose calls are missing or are not its
// options' calls is shown as a diagnostic, never as a decision, and a resolution posted for it
// is refused without reaching the backend.
func TestPageRefusesMomentWithoutItsCalls(t *testing.T) {
	env := built(t, mislabelledDraft())
	good := wellMoment("bm-1", env)
	for name, calls := range map[string][]envelope.Call{
		"no calls":   nil,
		"one short":  good.Calls[:1],
		"other call": {good.Calls[0], {Server: "payments", Tool: "send_payment", Args: json.RawMessage(`{"amount":10,"to":"bob"}`)}},
	} {
		t.Run(name, func(t *testing.T) {
			m := good
			m.Calls = calls
			b := &fakeBackend{moments: []Moment{m}}
			c := newTestConsole(t, b)
			_, doc := get(t, c)
			sec := one(t, doc, "moment", by("data-moment-id", "bm-1"))
			if v, _ := attr(sec, "data-malformed"); v != "true" || len(all(sec, tag("form"))) != 0 {
				t.Fatalf("a moment without its calls is offered as a decision")
			}
			one(t, sec, "diagnostic code", by("data-code", string(CodeCallsMismatch)))
			rec := post(t, c, form(env, "bm-1", fieldChoice, "option:1"), nil)
			if rec.Code == http.StatusOK || len(b.calls()) != 0 {
				t.Fatalf("resolution of a moment without its calls: status %d, %d writes", rec.Code, len(b.calls()))
			}
		})
	}
}

// TestPageMarksTheAgentsCallOnlyWhenItMadeOne: "the call the agent made" labels the option
// whose action is the act's on a gate-authored moment (the gate escalated a call the agent
// made), never on an agent's proposal, whose options are all the agent's suggestions.
func TestPageMarksTheAgentsCallOnlyWhenItMadeOne(t *testing.T) {
	env := built(t, mislabelledDraft())
	o1, _ := env.Option(1)
	for _, agentAuthored := range []bool{false, true} {
		m := wellMoment("bm-example", env)
		m.AgentAuthored = agentAuthored
		m.Act = Act{Name: "act-7", Tool: "send_payment", Server: "payments", Class: "FINANCIAL", ActionDigest: o1.ActionDigest}
		_, doc := get(t, newTestConsole(t, &fakeBackend{moments: []Moment{m}}))
		marks := all(doc, by("data-testid", "acts-call"))
		if want := b2i(!agentAuthored); len(marks) != want {
			t.Errorf("agentAuthored=%v: %d options marked as the call the agent made, want %d", agentAuthored, len(marks), want)
		}
	}
}

// TestPageNamesWhoRecommends: a gate-authored moment's recommendation is the policy's, never
// attributed to the agent; only an agent-authored moment says the agent recommends.
func TestPageNamesWhoRecommends(t *testing.T) {
	env := built(t, mislabelledDraft())
	for _, tc := range []struct {
		agentAuthored bool
		want          string
	}{{false, "Policy recommends option ["}, {true, "The agent recommends option ["}} {
		m := wellMoment("bm-example", env)
		m.AgentAuthored = tc.agentAuthored
		_, doc := get(t, newTestConsole(t, &fakeBackend{moments: []Moment{m}}))
		rec := all(doc, by("data-testid", "recommends"))
		if len(rec) != 1 || !strings.Contains(text(rec[0]), tc.want) {
			var got []string
			for _, n := range rec {
				got = append(got, text(n))
			}
			t.Errorf("agentAuthored=%v: recommendation %q, want it to say %q", tc.agentAuthored, got, tc.want)
		}
	}
}
