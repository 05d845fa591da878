package envelope

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/actgate/actgate/internal/action"
	"github.com/actgate/actgate/internal/jcs"
)

// Draft is what an envelope is built from: the briefing, the stem, and options each named
// by the concrete tool call it would authorise. It carries no digest; Build computes every
// action_digest itself (envelope-04 §12.6), so no caller can pair a label with the digest of
// another act.
type Draft struct {
	Synopsis        string        `json:"synopsis"`
	Findings        []string      `json:"findings"`
	Recommendations []string      `json:"recommendations"`
	Offer           string        `json:"offer"`
	Stem            string        `json:"stem"`
	Options         []DraftOption `json:"options"`
	// RecommendedIdx is the zero-based index of the recommended option (§5.7).
	RecommendedIdx int `json:"recommended_idx"`
	// CloseFreeText and CloseDialogue close a hatch. The zero value leaves both hatches
	// open, as §5.8 says they normally are; close one only where its revision is
	// inapplicable (§12.3).
	CloseFreeText bool  `json:"close_free_text,omitempty"`
	CloseDialogue bool  `json:"close_dialogue,omitempty"`
	Meta          *Meta `json:"meta,omitempty"`
}

// DraftOption is one option of a Draft: its label and reasoning (§5.6) and the tool call
// it authorises.
type DraftOption struct {
	Label     string          `json:"label"`
	Reasoning string          `json:"reasoning"`
	Tool      string          `json:"tool"`
	Args      json.RawMessage `json:"args"`
}

// Build constructs an envelope from d. Each option's action_digest is
// action.Digest(tool, args, jcs.Strict): arguments outside the strict profile cannot be
// bound to a human decision and are refused with CodeActionNotBindable. The result is
// then validated exactly as Parse validates received bytes, the actgate profile included
// (actgate sends what it builds), so a built envelope and a parsed one obey one grammar;
// every problem is reported in one *ValidationError.
func Build(d Draft) (*Envelope, error) {
	ps := &problems{}
	c := Content{
		Synopsis:        d.Synopsis,
		Findings:        d.Findings,
		Recommendations: d.Recommendations,
		Offer:           d.Offer,
		Question: Question{
			Stem:           d.Stem,
			RecommendedIdx: d.RecommendedIdx,
			Hatches:        Hatches{FreeText: !d.CloseFreeText, Dialogue: !d.CloseDialogue},
		},
		Meta: d.Meta,
	}
	if c.Findings == nil {
		c.Findings = []string{}
	}
	if c.Recommendations == nil {
		c.Recommendations = []string{}
	}
	c.Question.Options = make([]Option, len(d.Options))
	unbound := map[string]bool{} // action_digest paths Build could not fill
	for i, o := range d.Options {
		path := index("$.question.options", i)
		c.Question.Options[i] = Option{Label: o.Label, Reasoning: o.Reasoning}
		digest, err := digestDraftOption(o)
		if err != nil {
			ps.add(CodeActionNotBindable, path, "%v", err)
			unbound[child(path, "action_digest")] = true
			continue
		}
		c.Question.Options[i].ActionDigest = digest
	}
	checkUTF8(c, ps)
	if hasInvalidUTF8(ps) {
		// json.Marshal would silently replace the bad bytes; refuse instead (§12.7).
		return nil, ps.err("envelope")
	}
	raw, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("envelope: marshal draft: %w", err)
	}
	env, err := Parse(raw)
	if err == nil && len(ps.list) == 0 {
		return env, nil
	}
	for _, p := range ProblemsOf(err) {
		if p.Code == CodeActionDigestForm && unbound[p.Path] {
			continue // already reported as CodeActionNotBindable
		}
		ps.list = append(ps.list, p)
	}
	if len(ps.list) == 0 {
		return nil, err // not a validation problem; never expected
	}
	return nil, ps.err("envelope")
}

// digestDraftOption computes the action_digest of one draft option under the strict profile.
func digestDraftOption(o DraftOption) (string, error) {
	if err := checkToolName(o.Tool); err != nil {
		return "", err
	}
	if len(o.Args) == 0 {
		return "", fmt.Errorf("the tool call has no arguments; use {} for none")
	}
	digest, err := action.Digest(o.Tool, o.Args, jcs.Strict)
	if err != nil {
		return "", fmt.Errorf("the tool call cannot be bound to a human decision (%s)", actionReason(err))
	}
	return digest, nil
}

// checkUTF8 refuses draft strings that are not valid UTF-8.
func checkUTF8(c Content, ps *problems) {
	bad := func(s, path string) {
		if !utf8.ValidString(s) {
			ps.add(Code(jcs.CodeInvalidUTF8), path, "is not valid UTF-8")
		}
	}
	bad(c.Synopsis, "$.synopsis")
	for i, s := range c.Findings {
		bad(s, index("$.findings", i))
	}
	for i, s := range c.Recommendations {
		bad(s, index("$.recommendations", i))
	}
	bad(c.Offer, "$.offer")
	bad(c.Question.Stem, "$.question.stem")
	for i, o := range c.Question.Options {
		bad(o.Label, index("$.question.options", i)+".label")
		bad(o.Reasoning, index("$.question.options", i)+".reasoning")
	}
	if c.Meta != nil {
		bad(c.Meta.DecisionClass, "$.meta.decision_class")
		bad(c.Meta.CalibrationNote, "$.meta.calibration_note")
	}
}

func hasInvalidUTF8(ps *problems) bool {
	for _, p := range ps.list {
		if p.Code == Code(jcs.CodeInvalidUTF8) {
			return true
		}
	}
	return false
}
