package kubectlplugin

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/actgate/actgate/internal/envelope"
)

// Keys for the tables.
var (
	up        = key{kind: keyUp}
	down      = key{kind: keyDown}
	enter     = key{kind: keyEnter}
	esc       = key{kind: keyEsc}
	backspace = key{kind: keyBackspace}
	interrupt = key{kind: keyInterrupt}
	other     = key{kind: keyOther}
)

func r(c rune) key { return key{kind: keyRune, r: c} }

func typed(s string) []key {
	var ks []key
	for _, c := range s {
		ks = append(ks, r(c))
	}
	return ks
}

func seq(parts ...any) []key {
	var ks []key
	for _, p := range parts {
		switch v := p.(type) {
		case key:
			ks = append(ks, v)
		case []key:
			ks = append(ks, v...)
		default:
			panic(fmt.Sprintf("seq: %T", p))
		}
	}
	return ks
}

// envelopeOf opens the envelope of a testdata/show file.
func envelopeOf(t *testing.T, file string) *envelope.Envelope {
	t.Helper()
	in := showInput(t, "testdata/show/"+file+".yaml")
	if !in.Moment.Well() {
		t.Fatalf("%s: envelope discarded: %v", file, in.Moment.Problems)
	}
	return in.Moment.Envelope
}

// run feeds keys to p until it is done; it fails t if keys remain after done.
func run(t *testing.T, p *picker, keys []key) (done bool, res *envelope.Resolution) {
	t.Helper()
	for i, k := range keys {
		if done, res = p.Key(k); done {
			if i != len(keys)-1 {
				t.Fatalf("done after key %d of %d", i+1, len(keys))
			}
			return done, res
		}
	}
	return false, nil
}

func TestPickerKeys(t *testing.T) {
	open := envelopeOf(t, "pending")                 // 2 options, both hatches open, recommends [2]
	closed := envelopeOf(t, "hatches-closed-no-act") // 2 options, both hatches closed
	four := envelopeOf(t, "four-options")            // 4 options

	option := func(env *envelope.Envelope, i int) *envelope.Resolution {
		return &envelope.Resolution{EnvelopeDigest: env.Digest(), Kind: envelope.KindOption, OptionIdx: i}
	}
	kind := func(env *envelope.Envelope, k envelope.Kind) *envelope.Resolution {
		return &envelope.Resolution{EnvelopeDigest: env.Digest(), Kind: k}
	}
	answer := func(env *envelope.Envelope, text string) *envelope.Resolution {
		return &envelope.Resolution{EnvelopeDigest: env.Digest(), Kind: envelope.KindAnswer, Answer: text}
	}

	for _, tc := range []struct {
		name       string
		env        *envelope.Envelope
		keys       []key
		done       bool
		res        *envelope.Resolution
		mode       pickerMode
		cursor     int
		noticeHas  string
		answerText string
	}{
		// Moving.
		{name: "starts on the first option, not the recommended one", env: open, keys: nil, mode: modeChoose, cursor: 0},
		{name: "down moves", env: open, keys: seq(down), mode: modeChoose, cursor: 1},
		{name: "down stops at the last option", env: open, keys: seq(down, down, down), mode: modeChoose, cursor: 1},
		{name: "up stops at the first option", env: open, keys: seq(up, up), mode: modeChoose, cursor: 0},
		{name: "j and k move", env: four, keys: seq(r('j'), r('j'), r('j'), r('k')), mode: modeChoose, cursor: 2},
		{name: "a digit moves to that option", env: four, keys: seq(r('4')), mode: modeChoose, cursor: 3},
		{name: "a digit past the options says so and stays", env: open, keys: seq(down, r('3')), mode: modeChoose, cursor: 1, noticeHas: "no option 3"},
		{name: "unknown keys do nothing", env: open, keys: seq(other, r('x'), r('0'), backspace), mode: modeChoose, cursor: 0},

		// Choosing an option: Enter confirms first, y writes.
		{name: "Enter asks to confirm, nothing chosen yet", env: open, keys: seq(down, enter), mode: modeConfirm, cursor: 1},
		{name: "Enter then y selects the option under the cursor", env: open, keys: seq(down, enter, r('y')), done: true, res: option(open, 1)},
		{name: "Y also confirms", env: four, keys: seq(r('3'), enter, r('Y')), done: true, res: option(four, 2)},
		{name: "Enter twice does not write", env: open, keys: seq(enter, enter), mode: modeChoose, cursor: 0},
		{name: "n on confirm goes back to the options", env: open, keys: seq(down, enter, r('n')), mode: modeChoose, cursor: 1},
		{name: "Esc on confirm goes back, it does not abort", env: open, keys: seq(enter, esc), mode: modeChoose},
		{name: "back then another option", env: open, keys: seq(enter, r('n'), down, enter, r('y')), done: true, res: option(open, 1)},

		// The hatches and decline (envelope-04 §7.3: four distinct resolutions).
		{name: "q is the question-space hatch", env: open, keys: seq(r('q'), r('y')), done: true, res: kind(open, envelope.KindQuestion)},
		{name: "d declines", env: open, keys: seq(r('d'), r('y')), done: true, res: kind(open, envelope.KindDeclined)},
		{name: "d declines with both hatches closed", env: closed, keys: seq(r('d'), r('y')), done: true, res: kind(closed, envelope.KindDeclined)},
		{name: "q with the dialogue hatch closed says so", env: closed, keys: seq(r('q')), mode: modeChoose, noticeHas: "closed the question-space hatch"},
		{name: "a with the free-text hatch closed says so", env: closed, keys: seq(r('a')), mode: modeChoose, noticeHas: "closed the answer-space hatch"},
		{name: "a opens the answer", env: open, keys: seq(r('a')), mode: modeAnswer},
		{name: "the answer is typed, confirmed and returned", env: open, keys: seq(r('a'), typed("Pay on Monday"), enter, r('y')), done: true, res: answer(open, "Pay on Monday")},
		{name: "letters in the answer are text, not keys", env: open, keys: seq(r('a'), typed("dqy"), enter), mode: modeConfirm, answerText: "dqy"},
		{name: "backspace edits the answer", env: open, keys: seq(r('a'), typed("Noo"), backspace, enter, r('y')), done: true, res: answer(open, "No")},
		{name: "backspace on an empty answer does nothing", env: open, keys: seq(r('a'), backspace, backspace), mode: modeAnswer},
		{name: "an empty answer is refused", env: open, keys: seq(r('a'), enter), mode: modeAnswer, noticeHas: "cannot be empty"},
		{name: "a blank answer is refused", env: open, keys: seq(r('a'), typed("   "), enter), mode: modeAnswer, noticeHas: "cannot be empty", answerText: "   "},
		{name: "Esc leaves the answer and keeps its text", env: open, keys: seq(r('a'), typed("Wait"), esc), mode: modeChoose, answerText: "Wait"},
		{name: "a resumes the kept answer", env: open, keys: seq(r('a'), typed("Wa"), esc, r('a'), typed("it"), enter, r('y')), done: true, res: answer(open, "Wait")},
		{name: "no on the answer's confirm returns to the answer", env: open, keys: seq(r('a'), typed("Later"), enter, r('n')), mode: modeAnswer, answerText: "Later"},
		{name: "control runes never reach the answer", env: open, keys: seq(r('a'), r('\u202e'), r('\x07'), typed("ok"), enter, r('y')), done: true, res: answer(open, "ok")},
		{name: "unicode answers", env: open, keys: seq(r('a'), typed("Zahlung über 2 500 €"), enter, r('y')), done: true, res: answer(open, "Zahlung über 2 500 €")},

		// Leaving without writing.
		{name: "Esc aborts", env: open, keys: seq(down, esc), done: true},
		{name: "Ctrl-C aborts from the options", env: open, keys: seq(interrupt), done: true},
		{name: "Ctrl-C aborts from the answer", env: open, keys: seq(r('a'), typed("x"), interrupt), done: true},
		{name: "Ctrl-C aborts from confirm", env: open, keys: seq(enter, interrupt), done: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPicker(tc.env)
			done, res := run(t, p, tc.keys)
			if done != tc.done {
				t.Fatalf("done = %v, want %v", done, tc.done)
			}
			if fmt.Sprint(res) != fmt.Sprint(tc.res) || (res != nil && *res != *tc.res) {
				t.Fatalf("resolution = %+v, want %+v", res, tc.res)
			}
			if done {
				return
			}
			if p.mode != tc.mode || p.cursor != tc.cursor {
				t.Errorf("mode %d cursor %d, want mode %d cursor %d", p.mode, p.cursor, tc.mode, tc.cursor)
			}
			if tc.noticeHas != "" && !strings.Contains(p.notice, tc.noticeHas) {
				t.Errorf("notice %q, want it to say %q", p.notice, tc.noticeHas)
			}
			if tc.noticeHas == "" && p.notice != "" {
				t.Errorf("unexpected notice %q", p.notice)
			}
			if got := string(p.answer); got != tc.answerText {
				t.Errorf("answer text %q, want %q", got, tc.answerText)
			}
		})
	}
}

// TestPickerResolutionsAreValid: whatever the picker returns is a valid §7.3 resolution of its
// envelope, in the form spec.resolution takes.
func TestPickerResolutionsAreValid(t *testing.T) {
	env := envelopeOf(t, "four-options")
	for name, keys := range map[string][]key{
		"option 4": seq(r('4'), enter, r('y')),
		"answer":   seq(r('a'), typed("Pay half"), enter, r('y')),
		"question": seq(r('q'), r('y')),
		"declined": seq(r('d'), r('y')),
	} {
		t.Run(name, func(t *testing.T) {
			_, res := run(t, newPicker(env), keys)
			if res == nil {
				t.Fatal("nothing chosen")
			}
			if _, err := SpecResolution(env, *res); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestPickerAnswerBound(t *testing.T) {
	env := envelopeOf(t, "pending")
	p := newPicker(env)
	p.Key(r('a'))
	for range envelope.MaxAnswerRunes + 5 {
		p.Key(r('x'))
	}
	if n := utf8.RuneCountInString(string(p.answer)); n != envelope.MaxAnswerRunes {
		t.Fatalf("answer holds %d runes, want the bound %d", n, envelope.MaxAnswerRunes)
	}
	if !strings.Contains(p.notice, "bound") {
		t.Errorf("notice %q does not say the answer is at its bound", p.notice)
	}
}

// TestPickerViewGolden renders each screen of the picker.
func TestPickerViewGolden(t *testing.T) {
	g := newGoldenSet("picker")
	for _, tc := range []struct {
		name string
		file string
		keys []key
	}{
		{"choose", "pending", nil},
		{"choose-moved", "pending", seq(down)},
		{"confirm-option", "pending", seq(down, enter)},
		{"answer", "pending", seq(r('a'), typed("Send it after the audit on Monday"))},
		{"confirm-answer", "pending", seq(r('a'), typed("Send it after the audit on Monday"), enter)},
		{"confirm-question", "pending", seq(r('q'))},
		{"confirm-decline", "pending", seq(r('d'))},
		{"hatches-closed", "hatches-closed-no-act", seq(r('q'))},
		{"four-options", "four-options", seq(r('3'))},
		{"with-calls", "with-calls", nil},
		{"with-calls-confirm", "with-calls", seq(enter)},
		{"calls-not-shown", "pending", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := showInput(t, "testdata/show/"+tc.file+".yaml")
			p := newPicker(envelopeOf(t, tc.file), pickerLines(in)...).withCalls(in.Moment.Calls)
			if done, _ := run(t, p, tc.keys); done {
				t.Fatal("the picker finished")
			}
			got := p.View()
			noTerminalControl(t, got)
			g.check(t, tc.name, got)
		})
	}
	g.orphans(t)
}

// TestPickerViewInvariants checks envelope-04 §9.1 on every screen of every envelope: the four
// briefing slots, each option with its reasoning, exactly one recommended mark on the right
// option, a key for each open hatch and none for a closed one, and decline.
func TestPickerViewInvariants(t *testing.T) {
	for _, file := range []string{"pending", "hatches-closed-no-act", "four-options"} {
		env := envelopeOf(t, file)
		for name, keys := range map[string][]key{
			"choose":  nil,
			"answer":  seq(r('a'), typed("x")),
			"confirm": seq(enter),
		} {
			t.Run(file+"/"+name, func(t *testing.T) {
				p := newPicker(env)
				run(t, p, keys)
				v := p.View()
				c := env.Content()
				mustContainInOrder(t, v, slotsInOrder(c)...)
				if n := strings.Count(v, "(recommended)"); n != 1 {
					t.Errorf("%d recommended marks", n)
				}
				h := c.Question.Hatches
				if strings.Contains(v, "[a] Answer") != h.FreeText || strings.Contains(v, "[q] Reject") != h.Dialogue {
					t.Errorf("hatch affordances do not follow slot 8 (%+v):\n%s", h, v)
				}
				if !strings.Contains(v, "[d] Decline") {
					t.Errorf("no decline affordance:\n%s", v)
				}
			})
		}
	}
}

// TestCheckChoice: an option of a moment whose calls are not shown is refused; the
// resolutions that authorise nothing are not, and an option of a moment with its calls is not.
func TestCheckChoice(t *testing.T) {
	without := showInput(t, "testdata/show/pending.yaml").Moment
	with := showInput(t, "testdata/show/with-calls.yaml").Moment
	if !with.CallsShown() || without.CallsShown() {
		t.Fatalf("CallsShown: with-calls %v, pending %v", with.CallsShown(), without.CallsShown())
	}
	opt := envelope.Resolution{Kind: envelope.KindOption}
	if err := CheckChoice(without, opt); !errors.Is(err, ErrCallsNotShown) {
		t.Errorf("option without calls: %v", err)
	}
	for _, k := range []envelope.Kind{envelope.KindDeclined, envelope.KindQuestion, envelope.KindAnswer} {
		if err := CheckChoice(without, envelope.Resolution{Kind: k}); err != nil {
			t.Errorf("%s without calls: %v", k, err)
		}
	}
	if err := CheckChoice(with, opt); err != nil {
		t.Errorf("option with calls: %v", err)
	}
}
