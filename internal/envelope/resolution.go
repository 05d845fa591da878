package envelope

import (
	"encoding/json"
	"fmt"

	"github.com/actgate/actgate/internal/jcs"
)

// MemberResolution is the member that wraps a resolution (envelope-04 §7.3).
const MemberResolution = "binding_moment_resolution"

// Kind distinguishes the four resolutions of envelope-04 §7.3. They stay distinct: an
// implementation SHALL NOT collapse question and declined.
type Kind string

const (
	// KindOption selects an option of slot 6; the only kind that can be authority.
	KindOption Kind = "option"
	// KindAnswer invokes the answer-space hatch with a free-form answer.
	KindAnswer Kind = "answer"
	// KindQuestion invokes the question-space hatch: the question is refused, deliberation reopens.
	KindQuestion Kind = "question"
	// KindDeclined answers the question as put in the negative; the agent stops.
	KindDeclined Kind = "declined"
)

// Valid reports whether k is one of the four kinds.
func (k Kind) Valid() bool {
	switch k {
	case KindOption, KindAnswer, KindQuestion, KindDeclined:
		return true
	}
	return false
}

// Resolution is a principal's resolution of one envelope (envelope-04 §7.3).
type Resolution struct {
	// EnvelopeDigest names the envelope resolved (§6.2 form).
	EnvelopeDigest string
	// Kind is which of the four resolutions occurred.
	Kind Kind
	// OptionIdx is the zero-based index of the selected option; meaningful for KindOption only.
	OptionIdx int
	// Answer is the principal's free-form answer; meaningful for KindAnswer only. It is
	// principal-authored content (§13): never log it.
	Answer string
}

// wireResolution is the §7.3 member set, with conditional members omitted when absent.
type wireResolution struct {
	EnvelopeDigest string  `json:"envelope_digest"`
	Resolution     Kind    `json:"resolution"`
	OptionIdx      *int    `json:"option_idx,omitempty"`
	Answer         *string `json:"answer,omitempty"`
}

// MarshalJSON returns the §7.3 wire form {"binding_moment_resolution": {...}} carrying
// option_idx only for option and answer only for answer.
func (r Resolution) MarshalJSON() ([]byte, error) {
	w := wireResolution{EnvelopeDigest: r.EnvelopeDigest, Resolution: r.Kind}
	switch r.Kind {
	case KindOption:
		idx := r.OptionIdx
		w.OptionIdx = &idx
	case KindAnswer:
		a := r.Answer
		w.Answer = &a
	}
	return json.Marshal(map[string]wireResolution{MemberResolution: w})
}

// UnmarshalJSON reads b exactly as ParseResolution does.
func (r *Resolution) UnmarshalJSON(b []byte) error {
	res, err := ParseResolution(b)
	if err != nil {
		return err
	}
	*r = *res
	return nil
}

// ParseResolution reads a resolution from untrusted bytes as actgate accepts and relays one
// from a principal: ParseResolutionSpec, then the actgate profile of the answer
// (CodeResAnswer: not empty, at most MaxAnswerRunes, no control characters other than tab
// and line breaks). A rejection is a *ValidationError listing every problem.
func ParseResolution(raw []byte) (*Resolution, error) {
	return parseResolution(raw, true)
}

// ParseResolutionSpec reads a resolution from untrusted bytes against envelope-04 alone:
// the strict profile on the raw bytes, then the exact member set of §7.3 with its
// conditional members (option_idx only with option, answer only with answer, nothing
// further with question or declined), inside the §7.3 wire form
// {"binding_moment_resolution": {...}} with no other member. The bare inner object is
// refused (CodeResMissingMember at $.binding_moment_resolution, its members
// CodeResUnknownMember). Only the read bound MaxResolutionBytes is actgate's own. A
// rejection is a *ValidationError listing every problem. It does not check the envelope;
// see Verify.
func ParseResolutionSpec(raw []byte) (*Resolution, error) {
	return parseResolution(raw, false)
}

func parseResolution(raw []byte, profile bool) (*Resolution, error) {
	ps := &problems{}
	if len(raw) > MaxResolutionBytes {
		ps.add(CodeResTooLarge, "$", "is %d bytes; the bound is %d", len(raw), MaxResolutionBytes)
		return nil, ps.err("resolution")
	}
	canonical, err := jcs.Canonicalize(raw, jcs.Strict)
	if err != nil {
		return nil, jcsProblem("resolution", "$", err)
	}
	v, err := decodeCanonical(canonical)
	if err != nil {
		return nil, internalProblem("resolution", "$", err)
	}
	w := walker{ps: ps, codes: resCodes(), profile: profile}
	// §7.3: the resolution is an object with exactly the member binding_moment_resolution.
	// The bare inner object is not a resolution: it reports the wrapper absent and its
	// members unknown.
	top, ok := w.object(v, "$", []string{MemberResolution}, nil)
	if !ok {
		return nil, ps.err("resolution")
	}
	inner, wrapped := top[MemberResolution]
	if !wrapped {
		return nil, ps.err("resolution")
	}
	r := w.resolution(inner, child("$", MemberResolution))
	if err := ps.err("resolution"); err != nil {
		return nil, err
	}
	return r, nil
}

// resolution checks the inner §7.3 object.
func (w walker) resolution(v any, path string) *Resolution {
	m, ok := w.object(v, path, []string{"envelope_digest", "resolution"}, []string{"option_idx", "answer"})
	if !ok {
		return nil
	}
	r := &Resolution{}
	if s, ok := w.str(m, "envelope_digest", path); ok {
		if !jcs.IsDigest(s) {
			w.ps.add(CodeResDigestForm, child(path, "envelope_digest"), `must be "sha256:" followed by 64 lowercase hex digits (§6.2)`)
		}
		r.EnvelopeDigest = s
	}
	kindKnown := false
	if s, ok := w.str(m, "resolution", path); ok {
		r.Kind = Kind(s)
		if kindKnown = r.Kind.Valid(); !kindKnown {
			w.ps.add(CodeResKind, child(path, "resolution"), `must be one of "option", "answer", "question", "declined", not %s`, quoteName(s))
		}
	}
	_, hasIdx := m["option_idx"]
	_, hasAnswer := m["answer"]
	if kindKnown {
		switch {
		case r.Kind == KindOption && !hasIdx:
			w.ps.add(CodeResMissingMember, child(path, "option_idx"), "is required when resolution is \"option\" (§7.3)")
		case r.Kind != KindOption && hasIdx:
			w.ps.add(CodeResMemberNotAllowed, child(path, "option_idx"), "must be absent when resolution is %q (§7.3)", r.Kind)
		}
		switch {
		case r.Kind == KindAnswer && !hasAnswer:
			w.ps.add(CodeResMissingMember, child(path, "answer"), "is required when resolution is \"answer\" (§7.3)")
		case r.Kind != KindAnswer && hasAnswer:
			w.ps.add(CodeResMemberNotAllowed, child(path, "answer"), "must be absent when resolution is %q (§7.3)", r.Kind)
		}
	}
	if idx, ok := w.integer(m, "option_idx", path); ok {
		switch {
		case idx < 0:
			w.ps.add(CodeResOptionIdx, child(path, "option_idx"), "is %d; it must be non-negative (§7.3)", idx)
		case idx >= MaxOptions:
			w.ps.add(CodeResOptionIdx, child(path, "option_idx"), "is %d; no envelope has more than %d options (§5.6)", idx, MaxOptions)
		default:
			r.OptionIdx = int(idx)
		}
	}
	if s, ok := w.str(m, "answer", path); ok {
		w.text(s, child(path, "answer"), textRule{
			maxRunes: MaxAnswerRunes, multiline: true, emptyIsBad: true,
			emptyCode: CodeResAnswer, longCode: CodeResAnswer, ctrlCode: CodeResAnswer,
		})
		r.Answer = s
	}
	return r
}

// Verify checks r against the envelope it names (envelope-04 §7.3): the envelope held
// must have r.EnvelopeDigest, an option resolution's option_idx must be within range
// for its options, and an answer or question resolution needs its hatch open (§5.8). It says
// nothing about authority; see Authorize.
func Verify(env *Envelope, r *Resolution) error {
	ps := &problems{}
	if env == nil || r == nil {
		ps.add(CodeResEnvelopeMismatch, "$", "no envelope or no resolution to verify")
		return ps.err("resolution")
	}
	if r.EnvelopeDigest != env.Digest() {
		ps.add(CodeResEnvelopeMismatch, "$.binding_moment_resolution.envelope_digest",
			"names %s, not the envelope held (%s) (§7.3, §12.5)", r.EnvelopeDigest, env.Digest())
		return ps.err("resolution")
	}
	if !r.Kind.Valid() {
		ps.add(CodeResKind, "$.binding_moment_resolution.resolution", "is not one of the four resolutions")
	}
	if r.Kind == KindOption && (r.OptionIdx < 0 || r.OptionIdx >= env.NumOptions()) {
		ps.add(CodeResOptionIdx, "$.binding_moment_resolution.option_idx",
			"is %d; the envelope's options are numbered 0 to %d (§7.3)", r.OptionIdx, env.NumOptions()-1)
	}
	h := env.Hatches()
	if r.Kind == KindAnswer && !h.FreeText {
		ps.add(CodeResHatchClosed, "$.binding_moment_resolution.resolution",
			"is answer, but the envelope's free_text hatch is false (§5.8)")
	}
	if r.Kind == KindQuestion && !h.Dialogue {
		ps.add(CodeResHatchClosed, "$.binding_moment_resolution.resolution",
			"is question, but the envelope's dialogue hatch is false (§5.8)")
	}
	return ps.err("resolution")
}

// String describes the resolution without its answer text (§13: principal content is not
// echoed into logs).
func (r Resolution) String() string {
	switch r.Kind {
	case KindOption:
		return fmt.Sprintf("option %d of %s", r.OptionIdx, r.EnvelopeDigest)
	default:
		return fmt.Sprintf("%s on %s", r.Kind, r.EnvelopeDigest)
	}
}
