package kubectlplugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	v1alpha1 "github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/envelope"
)

// Sentinel errors for the reasons the plugin refuses to write a resolution before asking the API
// server. Each ends the command with ExitRefused.
var (
	// ErrMalformedEnvelope: the stored envelope was discarded (envelope-04 §4, §12.8); a
	// decision that cannot be rendered cannot be resolved.
	ErrMalformedEnvelope = errors.New("the binding moment's envelope is malformed and was discarded")
	// ErrAlreadyResolved: spec.resolution is already written; it is written once.
	ErrAlreadyResolved = errors.New("the binding moment is already resolved")
	// ErrExpired: expiresAt passed; the moment can authorize nothing.
	ErrExpired = errors.New("the binding moment has expired")
	// ErrEnvelopeChanged: the caller pinned an envelope digest (--envelope-digest) and the
	// moment now names another envelope (envelope-04 §12.5).
	ErrEnvelopeChanged = errors.New("the binding moment names another envelope than the one given")
	// ErrInvalidResolution: the resolution is not a well-formed §7.3 resolution of this
	// envelope (an option out of range, an empty answer, …).
	ErrInvalidResolution = errors.New("not a valid resolution of this envelope")
	// ErrConflict: the object changed between read and write (409): someone else resolved it
	// or it was replaced. Nothing was written.
	ErrConflict = errors.New("the binding moment changed since it was read; nothing was written")
	// ErrRefusedByServer: the API server refused the write (admission, RBAC or schema).
	ErrRefusedByServer = errors.New("the API server refused the resolution")
	// ErrCallsNotShown: an option was chosen of a moment that does not carry the calls its
	// options authorise; nothing showed what that option runs.
	ErrCallsNotShown = errors.New("the binding moment does not carry the calls its options authorise, " +
		"so no option can be chosen from its label alone; decline, answer or question it")
)

// CheckChoice refuses an option of a moment whose calls are not shown (CallsShown); the
// other resolutions authorise nothing and stay open.
func CheckChoice(m *Moment, r envelope.Resolution) error {
	if r.Kind == envelope.KindOption && !m.CallsShown() {
		return ErrCallsNotShown
	}
	return nil
}

// Resolvable checks that m can be resolved at now: a well-formed envelope that is the one the
// object names, no resolution yet, not expired, and (when pin is not empty) still the envelope
// whose digest the principal pinned. The error wraps one of the sentinels above.
func Resolvable(m *Moment, pin string, now time.Time) error {
	bm := m.Object
	if !m.Well() {
		return fmt.Errorf("%w: %s", ErrMalformedEnvelope, problemsLine(m.Problems))
	}
	if pin != "" && pin != m.Envelope.Digest() {
		return fmt.Errorf("%w: it names %s, not %s", ErrEnvelopeChanged, m.Envelope.Digest(), safe(pin))
	}
	switch StatusAt(bm, now) {
	case StatusResolved:
		kind := "unknown"
		if bm.Spec.Resolution != nil {
			kind = string(bm.Spec.Resolution.Kind)
		}
		return fmt.Errorf("%w (%s)", ErrAlreadyResolved, safe(kind))
	case StatusExpired:
		return fmt.Errorf("%w (expiresAt %s)", ErrExpired, bm.Spec.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return nil
}

// SpecResolution checks r as a resolution of env and returns it in the form of
// spec.resolution. r goes through the wire form and envelope.ParseResolution, so the same
// rules apply as to any resolution an agent receives (§7.3: option_idx only for option, a
// non-empty answer only for answer), and then envelope.Verify: the digest names env and an
// option is within range.
func SpecResolution(env *envelope.Envelope, r envelope.Resolution) (*v1alpha1.BindingMomentResolution, error) {
	raw, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidResolution, err)
	}
	parsed, err := envelope.ParseResolution(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalidResolution, problemsLine(envelope.ProblemsOf(err)))
	}
	if err := envelope.Verify(env, parsed); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalidResolution, problemsLine(envelope.ProblemsOf(err)))
	}
	out := &v1alpha1.BindingMomentResolution{
		Kind:           v1alpha1.ResolutionKind(parsed.Kind),
		EnvelopeDigest: v1alpha1.Digest(parsed.EnvelopeDigest),
	}
	switch parsed.Kind {
	case envelope.KindOption:
		idx := int32(parsed.OptionIdx)
		out.OptionIdx = &idx
	case envelope.KindAnswer:
		out.Answer = parsed.Answer
	}
	return out, nil
}

// Describe says in one line what a resolution of env does, naming the option by its number
// and label and the action it authorises. It never includes an answer's text (§13).
func Describe(env *envelope.Envelope, r *v1alpha1.BindingMomentResolution) string {
	switch r.Kind {
	case v1alpha1.ResolutionOption:
		if r.OptionIdx == nil {
			return "option (no index)"
		}
		i := int(*r.OptionIdx)
		if o, ok := env.Option(i); ok {
			return fmt.Sprintf("option [%d] %q, authorising %s", i+1, o.Label, o.ActionDigest)
		}
		return fmt.Sprintf("option [%d] (out of range)", i+1)
	case v1alpha1.ResolutionAnswer:
		return "answer (free-form; returned to the agent, authorises no action)"
	case v1alpha1.ResolutionQuestion:
		return "question (the framing is rejected; deliberation reopens, authorises no action)"
	case v1alpha1.ResolutionDeclined:
		return "declined (no to the question as put; authorises no action)"
	}
	return safe(string(r.Kind))
}

func problemsLine(ps []envelope.Problem) string {
	if len(ps) == 0 {
		return "no reason given"
	}
	s := ""
	for i, p := range ps {
		if i > 0 {
			s += "; "
		}
		s += safe(p.String())
	}
	return s
}
