package kubectlplugin

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	v1alpha1 "github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/envelope"
)

// Codes of the problems this package adds to envelope's when it discards a stored envelope.
// They are printed like envelope's codes (one line each, code first) and never change meaning.
const (
	// CodeEnvelopeDigestMismatch: spec.envelope does not hash to spec.envelopeDigest, so the
	// object does not name the envelope it carries (envelope-04 §6.2, §12.5).
	CodeEnvelopeDigestMismatch envelope.Code = "BM_ENVELOPE_DIGEST_MISMATCH"
	// CodeSynopsisMismatch: spec.synopsis differs from the envelope's synopsis slot; a list
	// would show a decision other than the one the digest names.
	CodeSynopsisMismatch envelope.Code = "BM_SYNOPSIS_MISMATCH"
	// CodeCallsMismatch: spec.calls are not the calls the options' action digests name
	// (envelope.CheckCalls); a surface would show one call and authorise another.
	CodeCallsMismatch envelope.Code = "BM_CALLS_MISMATCH"
)

// Moment is a BindingMoment with its envelope opened: Envelope is nil exactly when the stored
// envelope was discarded, and Problems says why (envelope-04 §4, §12.8).
type Moment struct {
	Object   *v1alpha1.BindingMoment
	Envelope *envelope.Envelope
	Problems []envelope.Problem
	// Calls are spec.calls, checked against the envelope's options: one per option, each
	// unmasked call hashing to its option's action digest. Nil when the object carries none
	// (an option of it can then not be chosen: see CallsShown).
	Calls []envelope.Call
}

// OpenMoment parses bm's spec.envelope under the strict profile and checks that it is the
// envelope spec.envelopeDigest names and carries spec.synopsis. Anything else discards it.
func OpenMoment(bm *v1alpha1.BindingMoment) *Moment {
	m := &Moment{Object: bm}
	env, err := envelope.Parse([]byte(bm.Spec.Envelope))
	if err != nil {
		m.Problems = envelope.ProblemsOf(err)
		if len(m.Problems) == 0 {
			m.Problems = []envelope.Problem{{Code: envelope.CodeInternal, Path: "$", Message: err.Error()}}
		}
		return m
	}
	if env.Digest() != string(bm.Spec.EnvelopeDigest) {
		m.Problems = append(m.Problems, envelope.Problem{
			Code: CodeEnvelopeDigestMismatch, Path: "spec.envelopeDigest",
			Message: fmt.Sprintf("is %s but spec.envelope hashes to %s", safe(string(bm.Spec.EnvelopeDigest)), env.Digest()),
		})
	}
	if env.Content().Synopsis != bm.Spec.Synopsis {
		m.Problems = append(m.Problems, envelope.Problem{
			Code: CodeSynopsisMismatch, Path: "spec.synopsis",
			Message: "differs from the envelope's synopsis slot",
		})
	}
	if len(bm.Spec.Calls) > 0 {
		calls := make([]envelope.Call, len(bm.Spec.Calls))
		for i, c := range bm.Spec.Calls {
			calls[i] = envelope.Call{Server: c.Server, Destination: c.Destination, Tool: c.Tool, Args: []byte(c.Args), Masked: c.Masked}
		}
		if err := envelope.CheckCalls(env, calls); err != nil {
			m.Problems = append(m.Problems, envelope.Problem{Code: CodeCallsMismatch, Path: "spec.calls", Message: safe(err.Error())})
		} else {
			m.Calls = calls
		}
	}
	if len(m.Problems) == 0 {
		m.Envelope = env
	}
	return m
}

// CallsShown reports whether the moment carries the calls its options authorise, verified
// against their digests, so a surface shows what each option runs. Without them an option is
// not offered as a choice: its label is the only description, and a label is not the call.
func (m *Moment) CallsShown() bool { return m.Calls != nil }

// Well reports whether the envelope is well formed and is the one the object names.
func (m *Moment) Well() bool { return m.Envelope != nil }

// Status is where a binding moment stands for the plugin.
type Status string

const (
	// StatusPending: no resolution, not expired; the principal can resolve it.
	StatusPending Status = "Pending"
	// StatusResolved: spec.resolution is written (or the controller says Resolved).
	StatusResolved Status = "Resolved"
	// StatusExpired: expiresAt passed unresolved (or the controller says Expired); it can
	// authorize nothing.
	StatusExpired Status = "Expired"
)

// StatusAt says where bm stands at now. A written resolution wins over the clock: it was
// admitted before the controller noticed expiry or not, and the record stands.
func StatusAt(bm *v1alpha1.BindingMoment, now time.Time) Status {
	switch {
	case bm.Spec.Resolution != nil || bm.Status.State == v1alpha1.BindingMomentResolved:
		return StatusResolved
	case bm.Status.State == v1alpha1.BindingMomentExpired || !now.Before(bm.Spec.ExpiresAt.Time):
		return StatusExpired
	}
	return StatusPending
}

// shortDigest abbreviates a digest for a table column: "sha256:" and the first 12 hex digits.
// Anything not of the §6.2 form is shown terminal-safe and whole.
func shortDigest(d string) string {
	const n = len("sha256:") + 12
	if strings.HasPrefix(d, "sha256:") && len(d) == len("sha256:")+64 {
		return d[:n]
	}
	return safe(d)
}

// safe makes a string from the API server terminal-safe: control, line-break and bidi
// override characters (the runes the envelope profile refuses) and invalid UTF-8 become
// U+FFFD, so an object's field cannot move the cursor, recolour the screen or reorder a
// rendered decision. Envelope slots already passed that profile; everything else goes
// through here.
func safe(s string) string {
	return strings.Map(func(c rune) rune {
		if unsafeRune(c) {
			return utf8.RuneError
		}
		return c
	}, strings.ToValidUTF8(s, string(utf8.RuneError)))
}

// unsafeRune is the envelope profile's rule (envelope.ForbiddenRune).
func unsafeRune(c rune) bool { return envelope.ForbiddenRune(c) }

// truncate shortens s to at most n runes, marking the cut with "…".
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
