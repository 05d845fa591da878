package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/actgate/actgate/internal/jcs"
)

// Member names of envelope-04 §4, §5.9 and §8.1.
const (
	// MemberBindingMoment is the top-level tool-result member carrying the envelope (§8.1).
	MemberBindingMoment = "binding_moment"
)

// Content is the decoded value of a binding_moment member (envelope-04 §4): plain data
// with no claim of validity. A validated, digested envelope is an *Envelope.
type Content struct {
	// Synopsis is slot 1: one sentence stating the agent's position answer-first (§5.1).
	Synopsis string `json:"synopsis"`
	// Findings is slot 2: terse observations the synopsis rests on (§5.2).
	Findings []string `json:"findings"`
	// Recommendations is slot 3: concrete moves (§5.3).
	Recommendations []string `json:"recommendations"`
	// Offer is slot 4: the bounded, on-demand offer of detail (§5.4).
	Offer string `json:"offer"`
	// Question holds the binding slots 5–8.
	Question Question `json:"question"`
	// Meta is the optional meta slot (§5.9); nil when absent.
	Meta *Meta `json:"meta,omitempty"`
}

// Question holds the binding slots (envelope-04 §5.5–§5.8).
type Question struct {
	// Stem is slot 5: one neutral sentence posing the decision (§5.5).
	Stem string `json:"stem"`
	// Options is slot 6: two to four options (§5.6).
	Options []Option `json:"options"`
	// RecommendedIdx is slot 7: the zero-based index of the recommended option (§5.7).
	RecommendedIdx int `json:"recommended_idx"`
	// Hatches is slot 8: the two escape hatches (§5.8).
	Hatches Hatches `json:"hatches"`
}

// Option is one entry of slot 6 (envelope-04 §5.6).
type Option struct {
	// Label is a short, action-shaped statement of the option.
	Label string `json:"label"`
	// Reasoning is one line stating why the principal might choose it.
	Reasoning string `json:"reasoning"`
	// ActionDigest is the §6.2 digest of the one action the option authorises.
	ActionDigest string `json:"action_digest"`
}

// Hatches is slot 8 (envelope-04 §5.8). Both members are required and normally true.
type Hatches struct {
	// FreeText is the answer-space hatch: accept the question, answer in free form.
	FreeText bool `json:"free_text"`
	// Dialogue is the question-space hatch: reject the question, reopen deliberation.
	Dialogue bool `json:"dialogue"`
}

// Meta is the optional meta slot (envelope-04 §5.9). Both members are optional strings, and
// an empty string means absent when an envelope is built. A received envelope may carry a
// present but empty member: that is well formed (ParseSpec keeps it, so the content still
// reproduces the digested bytes), and the actgate profile refuses it (CodeStringEmpty) so
// a surface never has to tell the two apart.
type Meta struct {
	// DecisionClass names the category of the decision; a surface may style by it.
	DecisionClass string `json:"decision_class,omitempty"`
	// CalibrationNote is a short correcting preface, emitted only when earlier framing
	// understated what the agent has since concluded.
	CalibrationNote string `json:"calibration_note,omitempty"`

	// emptyDecisionClass and emptyCalibrationNote record a member received present and
	// empty.
	emptyDecisionClass, emptyCalibrationNote bool
}

// MarshalJSON writes the members that are set, and those received present and empty, in
// the order of the struct.
func (m Meta) MarshalJSON() ([]byte, error) {
	var out struct {
		DecisionClass   *string `json:"decision_class,omitempty"`
		CalibrationNote *string `json:"calibration_note,omitempty"`
	}
	if m.DecisionClass != "" || m.emptyDecisionClass {
		out.DecisionClass = &m.DecisionClass
	}
	if m.CalibrationNote != "" || m.emptyCalibrationNote {
		out.CalibrationNote = &m.CalibrationNote
	}
	return json.Marshal(out)
}

// clone returns a deep copy, so an *Envelope never shares mutable slices with callers. An
// empty list stays empty rather than nil, so the copy marshals to the same envelope.
func (c Content) clone() Content {
	out := c
	out.Findings = slices.Clone(c.Findings)
	out.Recommendations = slices.Clone(c.Recommendations)
	out.Question.Options = slices.Clone(c.Question.Options)
	if c.Meta != nil {
		m := *c.Meta
		out.Meta = &m
	}
	return out
}

// Envelope is a validated binding moment with its canonical bytes and digest. It is
// immutable: what a renderer shows (Content) is exactly what the digest names.
type Envelope struct {
	content   Content
	canonical []byte
	digest    string
}

// Content returns a deep copy of the envelope's slots.
func (e *Envelope) Content() Content { return e.content.clone() }

// Canonical returns a copy of JCS(binding_moment), the bytes the digest is over (§6.1).
func (e *Envelope) Canonical() []byte { return append([]byte(nil), e.canonical...) }

// Digest returns the envelope digest "sha256:" + 64 lowercase hex (§6.2).
func (e *Envelope) Digest() string { return e.digest }

// NumOptions returns the number of options in slot 6.
func (e *Envelope) NumOptions() int { return len(e.content.Question.Options) }

// Option returns option i of slot 6; ok is false when i is out of range.
func (e *Envelope) Option(i int) (opt Option, ok bool) {
	if i < 0 || i >= len(e.content.Question.Options) {
		return Option{}, false
	}
	return e.content.Question.Options[i], true
}

// RecommendedIdx returns slot 7.
func (e *Envelope) RecommendedIdx() int { return e.content.Question.RecommendedIdx }

// Hatches returns slot 8.
func (e *Envelope) Hatches() Hatches { return e.content.Question.Hatches }

// MarshalJSON returns the canonical bytes, so an envelope re-marshals to exactly what its
// digest names.
func (e *Envelope) MarshalJSON() ([]byte, error) { return e.Canonical(), nil }

// UnmarshalJSON validates b exactly as Parse does, so an *Envelope inside a decoded
// structure is never unvalidated. (encoding/json hands over the value's raw bytes, so the
// strict profile still sees duplicates and surrogates.)
func (e *Envelope) UnmarshalJSON(b []byte) error {
	env, err := Parse(b)
	if err != nil {
		return err
	}
	*e = *env
	return nil
}

// Parse validates raw as a bare envelope (the value of a binding_moment member) that
// actgate is to render or send, and returns it with its digest: ParseSpec, then the actgate
// profile (see [Code.Profile]). Every surface and every sender of actgate reads envelopes
// through Parse, ParseDocument or FromToolResult. A rejection is a *ValidationError listing
// every problem, spec and profile alike, in document order; when it holds profile problems
// only ([ValidationError.ProfileOnly]), the envelope is well formed but actgate will not
// render or send it.
func Parse(raw []byte) (*Envelope, error) {
	return parseAt(raw, "$", true)
}

// ParseSpec validates raw as a bare envelope against envelope-04 alone and returns it with
// its digest. raw is first canonicalized under the strict profile (envelope-04 §6.3) so
// duplicates, unpaired surrogates and out-of-profile numbers are rejected on the raw bytes;
// then the member set, types, option count, recommended_idx and action_digest form of §4–§5
// are checked and every violation is reported. Only the read bound MaxDocumentBytes is
// actgate's own. What ParseSpec accepts is well formed, whatever the actgate profile says
// of it ([Envelope.CheckProfile]).
func ParseSpec(raw []byte) (*Envelope, error) {
	return parseAt(raw, "$", false)
}

// CheckProfile checks a well-formed envelope against the actgate profile: what actgate
// renders or sends (see [Code.Profile]). It returns nil, or a *ValidationError whose
// problems all carry profile codes, with paths relative to the envelope.
func (e *Envelope) CheckProfile() error {
	if e == nil {
		return errors.New("envelope: profile check of a nil envelope")
	}
	v, err := decodeCanonical(e.canonical)
	if err != nil {
		return internalProblem("envelope", "$", err)
	}
	ps := &problems{}
	validateEnvelope(v, "$", ps, true)
	return ps.err("envelope")
}

// parseAt is Parse (profile true) or ParseSpec with the JSON path of the envelope inside
// its document.
func parseAt(raw []byte, root string, profile bool) (*Envelope, error) {
	if len(raw) > MaxDocumentBytes {
		ps := &problems{}
		ps.add(CodeTooLarge, root, "is %d bytes; the bound is %d", len(raw), MaxDocumentBytes)
		return nil, ps.err("envelope")
	}
	canonical, err := jcs.Canonicalize(raw, jcs.Strict)
	if err != nil {
		return nil, jcsProblem("envelope", root, err)
	}
	v, err := decodeCanonical(canonical)
	if err != nil {
		return nil, internalProblem("envelope", root, err)
	}
	ps := &problems{}
	c := validateEnvelope(v, root, ps, profile)
	if err := ps.err("envelope"); err != nil {
		return nil, err
	}
	// Fail closed unless the typed Content reproduces the canonical bytes exactly: the
	// slots a renderer shows must be the slots the digest names.
	again, err := canonicalOf(c)
	if err != nil {
		return nil, internalProblem("envelope", root, err)
	}
	if !bytes.Equal(again, canonical) {
		return nil, internalProblem("envelope", root, fmt.Errorf("decoded content does not reproduce the canonical bytes"))
	}
	return &Envelope{content: c, canonical: canonical, digest: jcs.Digest(canonical)}, nil
}

// canonicalOf marshals content and canonicalizes it under the strict profile.
func canonicalOf(c Content) ([]byte, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	return jcs.Canonicalize(b, jcs.Strict)
}

func internalProblem(what, path string, err error) error {
	return &ValidationError{
		What:     what,
		Problems: []Problem{{Code: CodeInternal, Path: path, Message: err.Error()}},
		cause:    err,
	}
}

// validateEnvelope checks the decoded value v against envelope-04 §4–§5.9, and against the
// actgate profile too when profile is true, reporting every problem to ps in document order,
// and returns what it could decode.
func validateEnvelope(v any, root string, ps *problems, profile bool) Content {
	w := walker{ps: ps, codes: envCodes(), profile: profile}
	var c Content
	m, ok := w.object(v, root, []string{"synopsis", "findings", "recommendations", "offer", "question"}, []string{"meta"})
	if !ok {
		return c
	}
	if s, ok := w.str(m, "synopsis", root); ok {
		w.text(s, child(root, "synopsis"), slotText(MaxTextRunes))
		c.Synopsis = s
	}
	c.Findings = w.textList(m, "findings", root, MaxFindings)
	c.Recommendations = w.textList(m, "recommendations", root, MaxRecommendations)
	if s, ok := w.str(m, "offer", root); ok {
		w.text(s, child(root, "offer"), slotText(MaxTextRunes))
		c.Offer = s
	}
	if q, present := m["question"]; present {
		c.Question = w.question(q, child(root, "question"))
	}
	if mv, present := m["meta"]; present {
		c.Meta = w.meta(mv, child(root, "meta"))
	}
	return c
}

// textList checks slot 2 or 3: an array of strings, any number of them (§5.2, §5.3); the
// actgate profile bounds it to max entries.
func (w walker) textList(m map[string]any, name, root string, max int) []string {
	a, ok := w.array(m, name, root)
	if !ok {
		return nil
	}
	path := child(root, name)
	if w.profile && len(a) > max {
		w.ps.add(CodeArrayLength, path, "holds %d; actgate renders at most %d entries", len(a), max)
	}
	out := make([]string, 0, len(a))
	for i, e := range a {
		s, ok := e.(string)
		if !ok {
			w.ps.add(w.codes.wrongType, index(path, i), "must be a string, not %s", jsonType(e))
			continue
		}
		w.text(s, index(path, i), slotText(MaxTextRunes))
		out = append(out, s)
	}
	return out
}

// question checks slots 5–8 (§5.5–§5.8).
func (w walker) question(v any, path string) Question {
	var q Question
	m, ok := w.object(v, path, []string{"stem", "options", "recommended_idx", "hatches"}, nil)
	if !ok {
		return q
	}
	if s, ok := w.str(m, "stem", path); ok {
		w.text(s, child(path, "stem"), slotText(MaxTextRunes))
		q.Stem = s
	}
	nOptions := -1
	if a, ok := w.array(m, "options", path); ok {
		nOptions = len(a)
		q.Options = w.options(a, child(path, "options"))
	}
	if idx, ok := w.integer(m, "recommended_idx", path); ok {
		switch {
		case idx < 0:
			w.ps.add(CodeRecommendedIdx, child(path, "recommended_idx"), "is %d; it must be non-negative (§5.7)", idx)
		case nOptions >= 0 && idx >= int64(nOptions):
			w.ps.add(CodeRecommendedIdx, child(path, "recommended_idx"), "is %d; it must be less than the number of options, %d (§5.7)", idx, nOptions)
		}
		if idx >= 0 && idx <= MaxOptions {
			q.RecommendedIdx = int(idx)
		}
	}
	if hv, present := m["hatches"]; present {
		hp := child(path, "hatches")
		if hm, ok := w.object(hv, hp, []string{"free_text", "dialogue"}, nil); ok {
			q.Hatches.FreeText, _ = w.boolean(hm, "free_text", hp)
			q.Hatches.Dialogue, _ = w.boolean(hm, "dialogue", hp)
		}
	}
	return q
}

// options checks slot 6 (§5.6): 2..4 objects of label, reasoning, action_digest; the
// actgate profile also refuses two options with one label or one action_digest.
func (w walker) options(a []any, path string) []Option {
	if len(a) < MinOptions || len(a) > MaxOptions {
		w.ps.add(CodeOptionCount, path, "holds %d; envelope-04 §5.6 requires %d to %d options", len(a), MinOptions, MaxOptions)
	}
	out := make([]Option, 0, len(a))
	labels := map[string]int{}
	digests := map[string]int{}
	for i, e := range a {
		op := index(path, i)
		m, ok := w.object(e, op, []string{"label", "reasoning", "action_digest"}, nil)
		if !ok {
			continue
		}
		var o Option
		if s, ok := w.str(m, "label", op); ok {
			w.text(s, child(op, "label"), slotText(MaxLabelRunes))
			if j, dup := labels[s]; dup && w.profile {
				w.ps.add(CodeDuplicateLabel, child(op, "label"), "repeats the label of option %d", j)
			} else {
				labels[s] = i
			}
			o.Label = s
		}
		if s, ok := w.str(m, "reasoning", op); ok {
			w.text(s, child(op, "reasoning"), slotText(MaxTextRunes))
			o.Reasoning = s
		}
		if s, ok := w.str(m, "action_digest", op); ok {
			if !jcs.IsDigest(s) {
				w.ps.add(CodeActionDigestForm, child(op, "action_digest"), `must be "sha256:" followed by 64 lowercase hex digits (§6.2)`)
			} else if j, dup := digests[s]; dup && w.profile {
				w.ps.add(CodeDuplicateAction, child(op, "action_digest"), "authorises the same action as option %d", j)
			} else {
				digests[s] = i
			}
			o.ActionDigest = s
		}
		out = append(out, o)
	}
	return out
}

// meta checks the meta slot (§5.9): both members optional, no others.
func (w walker) meta(v any, path string) *Meta {
	m, ok := w.object(v, path, nil, []string{"decision_class", "calibration_note"})
	if !ok {
		return nil
	}
	var out Meta
	if s, ok := w.str(m, "decision_class", path); ok {
		w.text(s, child(path, "decision_class"), slotText(MaxDecisionClassRunes))
		out.DecisionClass, out.emptyDecisionClass = s, s == ""
	}
	if s, ok := w.str(m, "calibration_note", path); ok {
		w.text(s, child(path, "calibration_note"), slotText(MaxTextRunes))
		out.CalibrationNote, out.emptyCalibrationNote = s, s == ""
	}
	return &out
}
