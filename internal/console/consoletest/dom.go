package consoletest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/actgate/actgate/internal/console"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/jcs"
)

// Rendered is one moment as the browser shows it, read from the live DOM. A control counts as
// present only when the browser lays it out visibly.
type Rendered struct {
	Found           bool              `json:"found"`
	Malformed       bool              `json:"malformed"`
	EnvelopeDigest  string            `json:"envelopeDigest"`
	Synopsis        string            `json:"synopsis"`
	Findings        []string          `json:"findings"`
	Recommendations []string          `json:"recommendations"`
	Offer           string            `json:"offer"`
	Stem            string            `json:"stem"`
	Options         []RenderedOption  `json:"options"`
	AnswerBox       bool              `json:"answerBox"`
	AnswerSubmit    bool              `json:"answerSubmit"`
	QuestionHatch   string            `json:"questionHatch"`
	Decline         string            `json:"decline"`
	Act             map[string]string `json:"act"`
	Codes           []string          `json:"codes"`
	Payload         string            `json:"payload"`
	Forms           int               `json:"forms"`
}

// RenderedOption is one option as shown.
type RenderedOption struct {
	Idx          int    `json:"idx"`
	Label        string `json:"label"`
	Reasoning    string `json:"reasoning"`
	ActionDigest string `json:"actionDigest"`
	// RecommendedClass: the element carries the "recommended" class.
	RecommendedClass bool `json:"recommendedClass"`
	// Badge is the visible text of its "Recommended" label, "" when none is visible.
	Badge string `json:"badge"`
	// Border is the computed top border (width and style): how the option is drawn.
	Border string `json:"border"`
	// Button: its choose button is visible.
	Button bool `json:"button"`
	// LabelAuthor is the visible text attributing the label ("Agent's label:"), "" when none.
	LabelAuthor string `json:"labelAuthor"`
	// Runs is the option's "Runs (verified by actgate)" block.
	Runs RenderedCall `json:"runs"`
}

// RenderedCall is the call block of one option as shown.
type RenderedCall struct {
	// Visible: the block is laid out visibly inside the option.
	Visible bool `json:"visible"`
	// Source is the block's data-source ("actgate").
	Source string `json:"source"`
	// Heading is the visible heading text ("Runs (verified by actgate): TOOL on server ...").
	Heading     string `json:"heading"`
	Tool        string `json:"tool"`
	Server      string `json:"server"`
	Destination string `json:"destination"`
	// Args is the argument text exactly as the page holds it (not whitespace-collapsed).
	Args string `json:"args"`
	// ArgsScrollable: the arguments block scrolls rather than cuts (overflow auto or scroll).
	ArgsScrollable bool `json:"argsScrollable"`
	// Masked is the visible masked-by-policy note, "" when none.
	Masked string `json:"masked"`
}

// readJS collects a moment's rendering; %s is the JSON-quoted moment id.
const readJS = `(function (id) {
  const s = [...document.querySelectorAll("section[data-moment-id]")].find(e => e.dataset.momentId === id);
  if (!s) return {found: false};
  const t = e => e ? e.textContent.replace(/\s+/g, " ").trim() : "";
  const vis = e => !!e && e.getClientRects().length > 0 && getComputedStyle(e).visibility !== "hidden" && e.offsetWidth > 0 && e.offsetHeight > 0;
  const q = sel => s.querySelector(sel);
  const qa = sel => [...s.querySelectorAll(sel)];
  const field = (root, f) => root ? t(root.querySelector('[data-field="' + f + '"]')) : "";
  const act = q('[data-testid="act"]');
  return {
    found: true,
    malformed: s.dataset.malformed === "true",
    envelopeDigest: s.dataset.envelopeDigest || "",
    synopsis: t(q('[data-slot="synopsis"] p')),
    findings: qa('[data-slot="findings"] li').map(t),
    recommendations: qa('[data-slot="recommendations"] li').map(t),
    offer: t(q('[data-slot="offer"] p')),
    stem: t(q('[data-slot="stem"]')),
    options: qa('[data-testid="option"]').map(o => {
      const badge = o.querySelector('[data-testid="recommended-label"]');
      const cs = getComputedStyle(o);
      const reasoning = o.querySelector('[data-field="reasoning"]');
      return {
        idx: Number(o.dataset.optionIdx),
        label: field(o, "label"),
        reasoning: vis(reasoning) ? t(reasoning).replace(/^(Why|Agent's reasoning): /, "") : "",
        labelAuthor: vis(o.querySelector('[data-testid="label-author"]')) ? t(o.querySelector('[data-testid="label-author"]')) : "",
        runs: (() => {
          const r = o.querySelector('[data-testid="runs"]');
          if (!r) return {visible: false};
          const args = r.querySelector('[data-field="call-args"]');
          const masked = r.querySelector('[data-field="call-masked"]');
          const ov = args ? getComputedStyle(args).overflowY : "";
          return {
            visible: vis(r) && vis(args), source: r.dataset.source || "",
            heading: t(r.querySelector(".runs-head")),
            tool: field(r, "call-tool"), server: field(r, "call-server"), destination: field(r, "call-destination"),
            args: args ? args.textContent : "", argsScrollable: ov === "auto" || ov === "scroll",
            masked: vis(masked) ? t(masked) : "",
          };
        })(),
        actionDigest: field(o, "action-digest"),
        recommendedClass: o.classList.contains("recommended"),
        badge: vis(badge) ? t(badge) : "",
        border: cs.borderTopWidth + " " + cs.borderTopStyle,
        button: vis(o.querySelector('[data-testid="choose-option"]')),
      };
    }),
    answerBox: vis(q('[data-testid="answer-text"]')),
    answerSubmit: vis(q('[data-testid="answer-submit"]')),
    questionHatch: vis(q('[data-testid="question-hatch"]')) ? t(q('[data-testid="question-hatch"]')) : "",
    decline: vis(q('[data-testid="decline"]')) ? t(q('[data-testid="decline"]')) : "",
    act: act ? {tool: field(act, "tool"), server: field(act, "server"), class: field(act, "class"),
                actionDigest: t(act.querySelector('[data-field="action-digest"] code'))} : {},
    codes: qa('[data-testid="diagnostic"] li').map(li => li.dataset.code),
    payload: t(q('[data-testid="payload"]')),
    forms: qa("form").length,
  };
})(%s)`

// Read returns the rendering of moment id on the page the tab shows.
func Read(ctx context.Context, id string) (Rendered, error) {
	q, _ := json.Marshal(id)
	return chromedp.Run(ctx, chromedp.Evaluate[Rendered](fmt.Sprintf(readJS, q)))
}

// Expect is what a moment must show.
type Expect struct {
	Envelope *envelope.Envelope
	Act      console.Act
	// Calls are the calls the options authorise; each must be shown in its option's block
	// under the gate's heading, with these very arguments.
	Calls []envelope.Call
	// AgentAuthored: the labels must be attributed to the agent.
	AgentAuthored bool
}

// CheckInvariants reads moment id from the page and checks every envelope-04 §9.1 invariant
// against want: the four briefing slots whole and in order, every option with its label,
// reasoning and action digest, exactly the recommended option drawn differently (a class, a
// visible "Recommended" label and a different border, so not colour alone), the answer box
// and "Reject the question" exactly when their slot-8 boolean is true, a Decline button,
// and the act's tool, server, class and action digest.
func CheckInvariants(t testing.TB, ctx context.Context, id string, want Expect) Rendered {
	t.Helper()
	r, err := Read(ctx, id)
	if err != nil {
		t.Fatalf("reading moment %s from the page: %v", id, err)
	}
	if !r.Found {
		t.Fatalf("moment %s is not on the page", id)
	}
	if r.Malformed {
		t.Fatalf("moment %s is shown as malformed (codes %v)", id, r.Codes)
	}
	c := want.Envelope.Content()
	if r.EnvelopeDigest != want.Envelope.Digest() {
		t.Errorf("%s: envelope digest %q, want %q", id, r.EnvelopeDigest, want.Envelope.Digest())
	}
	eq := func(what, got, want string) {
		t.Helper()
		if got != want {
			t.Errorf("%s: %s = %q, want %q", id, what, got, want)
		}
	}
	eq("synopsis", r.Synopsis, c.Synopsis)
	eq("offer", r.Offer, c.Offer)
	eq("stem", r.Stem, c.Question.Stem)
	if !slices.Equal(r.Findings, c.Findings) {
		t.Errorf("%s: findings %q, want %q", id, r.Findings, c.Findings)
	}
	if !slices.Equal(r.Recommendations, c.Recommendations) {
		t.Errorf("%s: recommendations %q, want %q", id, r.Recommendations, c.Recommendations)
	}
	if len(r.Options) != len(c.Question.Options) {
		t.Fatalf("%s: %d options shown, want %d", id, len(r.Options), len(c.Question.Options))
	}
	rec := c.Question.RecommendedIdx
	for i, o := range c.Question.Options {
		got := r.Options[i]
		if got.Idx != i {
			t.Errorf("%s: option %d shown as index %d", id, i, got.Idx)
		}
		eq(fmt.Sprintf("option %d label", i), got.Label, o.Label)
		eq(fmt.Sprintf("option %d reasoning", i), got.Reasoning, o.Reasoning)
		eq(fmt.Sprintf("option %d action digest", i), got.ActionDigest, o.ActionDigest)
		if !got.Button {
			t.Errorf("%s: option %d has no visible button", id, i)
		}
		isRec := i == rec
		if got.RecommendedClass != isRec || (got.Badge == "Recommended") != isRec {
			t.Errorf("%s: option %d: recommended class %v, label %q; recommended is %d", id, i, got.RecommendedClass, got.Badge, rec)
		}
		if !isRec && got.Border == r.Options[rec].Border {
			t.Errorf("%s: option %d is drawn like the recommended one (%s)", id, i, got.Border)
		}
		if (got.LabelAuthor == "Agent's label:") != want.AgentAuthored {
			t.Errorf("%s: option %d label attributed %q; agent-authored is %v", id, i, got.LabelAuthor, want.AgentAuthored)
		}
		if i < len(want.Calls) {
			checkCall(t, id, i, got.Runs, want.Calls[i])
		}
	}
	if len(want.Calls) != len(c.Question.Options) {
		t.Errorf("%s: Expect holds %d calls for %d options", id, len(want.Calls), len(c.Question.Options))
	}
	h := c.Question.Hatches
	if (r.AnswerBox && r.AnswerSubmit) != h.FreeText || (r.AnswerBox || r.AnswerSubmit) != h.FreeText {
		t.Errorf("%s: answer box %v, submit %v; free_text is %v", id, r.AnswerBox, r.AnswerSubmit, h.FreeText)
	}
	if (r.QuestionHatch == "Reject the question") != h.Dialogue || (r.QuestionHatch != "") != h.Dialogue {
		t.Errorf("%s: question hatch %q; dialogue is %v", id, r.QuestionHatch, h.Dialogue)
	}
	eq("decline", r.Decline, "Decline")
	for k, v := range map[string]string{"tool": want.Act.Tool, "server": want.Act.Server, "class": want.Act.Class, "actionDigest": want.Act.ActionDigest} {
		eq("act "+k, r.Act[k], v)
	}
	return r
}

// checkCall checks that option i shows call c under the gate's heading, visibly, with the
// very arguments the gate holds (compared as canonical JSON), scrollable rather than cut.
func checkCall(t testing.TB, id string, i int, got RenderedCall, c envelope.Call) {
	t.Helper()
	if !got.Visible || got.Source != "actgate" || !strings.HasPrefix(got.Heading, "Runs (verified by actgate):") {
		t.Errorf("%s: option %d: no visible call block marked as actgate's: %+v", id, i, got)
		return
	}
	if got.Tool != envelope.Visible(c.Tool) || got.Server != envelope.Visible(c.Server) || got.Destination != envelope.Visible(c.Destination) {
		t.Errorf("%s: option %d runs %q on %q (%q), want %q on %q (%q)", id, i, got.Tool, got.Server, got.Destination, c.Tool, c.Server, c.Destination)
	}
	shown, err := jcs.Canonicalize([]byte(got.Args), jcs.Strict)
	held, err2 := jcs.Canonicalize(c.Args, jcs.Strict)
	if err != nil || err2 != nil || string(shown) != string(held) {
		t.Errorf("%s: option %d shows the arguments %q, want %s (%v, %v)", id, i, got.Args, c.Args, err, err2)
	}
	if !got.ArgsScrollable {
		t.Errorf("%s: option %d: the arguments do not scroll", id, i)
	}
	if (got.Masked != "") != !c.Verified() {
		t.Errorf("%s: option %d: masked note %q; masked pointers %q", id, i, got.Masked, c.Masked)
	}
}

// CheckFallback reads moment id and checks it is shown as a discarded envelope: the
// diagnostic lists codes (in order), the payload contains payload, and nothing can be chosen
// (envelope-04 §9.3).
func CheckFallback(t testing.TB, ctx context.Context, id string, codes []string, payload string) {
	t.Helper()
	r, err := Read(ctx, id)
	if err != nil || !r.Found {
		t.Fatalf("reading moment %s: found %v, %v", id, r.Found, err)
	}
	if !r.Malformed || !slices.Equal(r.Codes, codes) {
		t.Errorf("%s: malformed %v with codes %v, want %v", id, r.Malformed, r.Codes, codes)
	}
	if !strings.Contains(r.Payload, payload) {
		t.Errorf("%s: payload %q lacks %q", id, r.Payload, payload)
	}
	if r.Forms != 0 || len(r.Options) != 0 || r.Decline != "" || r.QuestionHatch != "" || r.AnswerBox {
		t.Errorf("%s: a discarded envelope offers a decision: %+v", id, r)
	}
}

// Outcome is the banner the page shows after a resolution.
type Outcome struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

// sel is the CSS selector of something inside moment id's section.
func sel(id, inner string) string {
	q, _ := json.Marshal(id)
	return fmt.Sprintf("section[data-moment-id=%s] %s", q, inner)
}

// Choose clicks option idx of moment id and returns the outcome shown.
func Choose(ctx context.Context, id string, idx int) (Outcome, error) {
	return submit(ctx, chromedp.Click(chromedp.CSS(sel(id, fmt.Sprintf(`[data-option-idx="%d"] [data-testid="choose-option"]`, idx)))))
}

// Answer types text into moment id's answer box and sends it.
func Answer(ctx context.Context, id, text string) (Outcome, error) {
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS(sel(id, `[data-testid="answer-text"]`)), text)); err != nil {
		return Outcome{}, err
	}
	return submit(ctx, chromedp.Click(chromedp.CSS(sel(id, `[data-testid="answer-submit"]`))))
}

// RejectQuestion clicks "Reject the question" on moment id.
func RejectQuestion(ctx context.Context, id string) (Outcome, error) {
	return submit(ctx, chromedp.Click(chromedp.CSS(sel(id, `[data-testid="question-hatch"]`))))
}

// Decline clicks Decline on moment id.
func Decline(ctx context.Context, id string) (Outcome, error) {
	return submit(ctx, chromedp.Click(chromedp.CSS(sel(id, `[data-testid="decline"]`))))
}

// submit performs click (which submits a form) on a page without a banner, and waits for the
// page the POST answers with, which always has one.
func submit(ctx context.Context, click chromedp.Action[chromedp.Void]) (Outcome, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid="outcome"]').length`))
	if err != nil {
		return Outcome{}, err
	}
	if n != 0 {
		return Outcome{}, fmt.Errorf("the page already shows an outcome: load the console afresh before resolving")
	}
	if err := chromedp.Do(ctx, click); err != nil {
		return Outcome{}, fmt.Errorf("click: %w", err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	if err := chromedp.Do(wctx, chromedp.WaitVisible(chromedp.CSS(`[data-testid="outcome"]`))); err != nil {
		// Say what the browser shows instead.
		where, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + " — " + document.body.innerText.slice(0, 300)`))
		return Outcome{}, fmt.Errorf("no outcome after the click (%w); the page shows %q", err, where)
	}
	return chromedp.Run(ctx, chromedp.Evaluate[Outcome](`(function () {
  const o = document.querySelector('[data-testid="outcome"]');
  return {status: o.dataset.outcome, message: o.querySelector('[data-testid="outcome-message"]').textContent.trim()};
})()`))
}

// Load navigates the tab to url and waits for the page.
func Load(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitReady(chromedp.CSS("main")))
}
