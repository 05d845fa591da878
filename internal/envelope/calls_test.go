package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/actgate/actgate/internal/argmask"
)

// callsCase is one testdata/render-calls input: a draft, the server its calls go to, the
// policy's masks and the renderer's bound.
type callsCase struct {
	AgentAuthored bool     `json:"agentAuthored"`
	Server        string   `json:"server"`
	Destination   string   `json:"destination"`
	Masks         []string `json:"masks"`
	MaxCallBytes  int      `json:"maxCallBytes"`
	Draft         Draft    `json:"draft"`
}

// build returns the envelope and the calls a gate would hold for it.
func (c callsCase) build(t *testing.T) (*Envelope, []Call) {
	t.Helper()
	env, err := Build(c.Draft)
	if err != nil {
		t.Fatal(err)
	}
	calls := make([]Call, len(c.Draft.Options))
	for i, o := range c.Draft.Options {
		args, masked, err := argmask.Apply(o.Args, c.Masks)
		if err != nil {
			t.Fatal(err)
		}
		calls[i] = Call{Server: c.Server, Destination: c.Destination, Tool: o.Tool, Args: args, Masked: masked}
	}
	return env, calls
}

func readCallsCase(t *testing.T, path string) callsCase {
	t.Helper()
	var c callsCase
	if err := json.Unmarshal(readFile(t, path), &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestTextRendererCallsGolden renders each testdata/render-calls input as a principal's surface
// does (with the calls) and compares it with testdata/golden-calls.
func TestTextRendererCallsGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/render-calls/*.json")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no inputs: %v", err)
	}
	want := map[string]bool{}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".json")
		golden := filepath.Join("testdata", "golden-calls", name+".txt")
		want[golden] = true
		t.Run(name, func(t *testing.T) {
			c := readCallsCase(t, in)
			env, calls := c.build(t)
			var buf bytes.Buffer
			r := TextRenderer{Calls: calls, AgentAuthored: c.AgentAuthored, MaxCallBytes: c.MaxCallBytes}
			if err := r.Render(&buf, env); err != nil {
				t.Fatal(err)
			}
			got := buf.String()
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			exp, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("missing golden file (rerun with -update): %v", err)
			}
			if string(exp) != got {
				t.Errorf("stale golden %s (rerun with -update after checking the diff)\n--- got ---\n%s\n--- want ---\n%s", golden, got, exp)
			}
		})
	}
	goldens, _ := filepath.Glob("testdata/golden-calls/*.txt")
	for _, g := range goldens {
		if !want[g] {
			t.Errorf("orphan golden file %s has no testdata/render-calls input", g)
		}
	}
}

// TestTextRendererShowsTheCall is the mislabelled option of the attack table: the label says
// 10 EUR to Bob, the call pays 9999 to mallory. The principal's rendering shows the call's
// values under the gate's heading, in the option's block, and the label as the agent's.
func TestTextRendererShowsTheCall(t *testing.T) {
	c := readCallsCase(t, "testdata/render-calls/mislabelled-payment.json")
	env, calls := c.build(t)
	var buf bytes.Buffer
	if err := (TextRenderer{Calls: calls, AgentAuthored: true}).Render(&buf, env); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	i := strings.Index(out, "[2] Agent's label: Pay Bob 10 EUR")
	if i < 0 {
		t.Fatalf("option 2 is not shown with its label attributed to the agent:\n%s", out)
	}
	block := out[i:]
	block = block[:strings.Index(block, "Authorises:")]
	for _, want := range []string{"Runs (verified by actgate): send_payment on server pay", "amount = 9999", `to = "mallory-offshore-account"`} {
		if !strings.Contains(block, want) {
			t.Errorf("option 2's block lacks %q:\n%s", want, block)
		}
	}
	// The agent's own view (no calls) is unchanged: no call block.
	buf.Reset()
	if err := (TextRenderer{}).Render(&buf, env); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "Runs (verified by actgate)") || strings.Contains(buf.String(), "Agent's label") {
		t.Errorf("the zero TextRenderer shows calls:\n%s", buf.String())
	}
}

// TestCheckCallsRefuses: a surface given calls that are not the options' shows no decision.
func TestCheckCallsRefuses(t *testing.T) {
	c := readCallsCase(t, "testdata/render-calls/mislabelled-payment.json")
	env, calls := c.build(t)
	if err := CheckCalls(env, calls); err != nil {
		t.Fatalf("the gate's own calls: %v", err)
	}
	swapped := func(f func([]Call) []Call) []Call {
		cp := append([]Call(nil), calls...)
		return f(cp)
	}
	for name, bad := range map[string][]Call{
		"one call short": calls[:1],
		"one too many":   append(append([]Call(nil), calls...), calls[0]),
		"swapped order":  {calls[1], calls[0]},
		"other amount": swapped(func(cs []Call) []Call {
			cs[1].Args = json.RawMessage(`{"amount":10,"to":"bob"}`)
			return cs
		}),
		"other tool": swapped(func(cs []Call) []Call { cs[1].Tool = "refund"; return cs }),
		"bad tool":   swapped(func(cs []Call) []Call { cs[1].Tool = "pay\u202e"; return cs }),
		"not an object": swapped(func(cs []Call) []Call {
			cs[1].Args = json.RawMessage(`[9999]`)
			return cs
		}),
		"masked pointer without placeholder": swapped(func(cs []Call) []Call {
			cs[1].Masked = []string{"/to"}
			return cs
		}),
		"masked pointers unsorted": swapped(func(cs []Call) []Call {
			cs[1].Args = json.RawMessage(`{"amount":"` + argmask.Placeholder + `","to":"` + argmask.Placeholder + `"}`)
			cs[1].Masked = []string{"/to", "/amount"}
			return cs
		}),
	} {
		t.Run(name, func(t *testing.T) {
			if err := CheckCalls(env, bad); !errors.Is(err, ErrCallsMismatch) {
				t.Fatalf("CheckCalls = %v; want ErrCallsMismatch", err)
			}
			var buf bytes.Buffer
			if err := (TextRenderer{Calls: bad}).Render(&buf, env); err == nil || buf.Len() != 0 {
				t.Fatalf("Render = %v and %d bytes; want a refusal and nothing written", err, buf.Len())
			}
		})
	}
}

func TestCallLinesBound(t *testing.T) {
	c := Call{Tool: "t", Args: json.RawMessage(`{"a":"` + strings.Repeat("x", 100) + `","b":1}`)}
	lines, omitted := CallLines(c, 50)
	if len(lines) != 2 || omitted == 0 || !strings.Contains(lines[0], "more bytes not shown") || !strings.Contains(lines[1], "1 more arguments not shown") {
		t.Fatalf("a first member over the bound: %q, omitted %d", lines, omitted)
	}
	lines, omitted = CallLines(c, 130)
	if len(lines) != 2 || omitted != 0 || lines[1] != "b = 1" {
		t.Fatalf("a long member within the bound: %q, omitted %d", lines, omitted)
	}
	lines, omitted = CallLines(c, 200)
	if len(lines) != 2 || omitted != 0 {
		t.Fatalf("under the bound: %q, omitted %d", lines, omitted)
	}
}

func TestVisible(t *testing.T) {
	for in, want := range map[string]string{
		"plain":         "plain",
		"a\u202eb":      `a\u202Eb`,
		"zw\u200bsp":    `zw\u200Bsp`,
		"bom\ufeff":     `bom\uFEFF`,
		"del\x7f":       `del\u007F`,
		"bad\xffutf8":   `bad\xffutf8`,
		"tag\U000E0041": `tag\U000E0041`,
	} {
		if got := visible(in); got != want {
			t.Errorf("visible(%q) = %q; want %q", in, got, want)
		}
	}
}

// FuzzCallLines: any arguments render without a panic, within the bound (plus the markers),
// and with no rune a terminal would not show as itself.
func FuzzCallLines(f *testing.F) {
	f.Add(`{"amount":9999,"to":"mallory-offshore-account"}`, "/to")
	f.Add(`{"a\u202e":"\u2066x","b":[1,{"c":null}]}`, "/b/1/c")
	f.Add(`not json`, "")
	f.Fuzz(func(t *testing.T, args, mask string) {
		c := Call{Tool: "t", Server: "s", Args: json.RawMessage(args)}
		if m, hit, err := argmask.Apply(c.Args, []string{mask}); err == nil {
			c.Args, c.Masked = m, hit
		}
		lines, _ := CallLines(c, 300)
		total := 0
		for _, l := range lines {
			total += len(l)
			for _, r := range l {
				if ForbiddenRune(r) {
					t.Fatalf("line %q carries %U", l, r)
				}
			}
		}
		if total > 300+MaxCallLineBytes+64*len(lines) && len(lines) > 1 {
			t.Fatalf("%d bytes of lines for a bound of 300", total)
		}
	})
}

// FuzzCheckCalls: calls from a surface's input (the moments API, a BindingMoment) are either
// accepted, and then each unmasked one hashes to its option's digest, or refused with
// ErrCallsMismatch; never a panic.
func FuzzCheckCalls(f *testing.F) {
	env, err := Build(Draft{Synopsis: "s", Findings: []string{"f"}, Recommendations: []string{"r"}, Offer: "o", Stem: "q?",
		Options: []DraftOption{
			{Label: "a", Reasoning: "r", Tool: "send_payment", Args: json.RawMessage(`{"amount":1}`)},
			{Label: "b", Reasoning: "r", Tool: "send_payment", Args: json.RawMessage(`{"amount":2}`)},
		}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(`[{"server":"p","tool":"send_payment","args":{"amount":1}},{"server":"p","tool":"send_payment","args":{"amount":2}}]`)
	f.Add(`[{"tool":"send_payment","args":{"amount":"` + argmask.Placeholder + `"},"masked":["/amount"]},{"tool":"send_payment","args":{"amount":2}}]`)
	f.Add(`[{"tool":"x","args":[]},{}]`)
	f.Fuzz(func(t *testing.T, raw string) {
		var calls []Call
		if json.Unmarshal([]byte(raw), &calls) != nil {
			return
		}
		err := CheckCalls(env, calls)
		if err != nil {
			if !errors.Is(err, ErrCallsMismatch) {
				t.Fatalf("error does not wrap ErrCallsMismatch: %v", err)
			}
			return
		}
		for i, c := range calls {
			if !c.Verified() {
				continue
			}
			o, _ := env.Option(i)
			if a, err := ToolCall(c.Tool, c.Args); err != nil || a.Digest() != o.ActionDigest {
				t.Fatalf("accepted call %d hashes to %s (%v), not %s", i, a.Digest(), err, o.ActionDigest)
			}
		}
	})
}
