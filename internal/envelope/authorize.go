package envelope

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Grant records that a resolution is authority for exactly one action (envelope-04 §7.3).
type Grant struct {
	// EnvelopeDigest names the envelope resolved.
	EnvelopeDigest string
	// OptionIdx is the option selected.
	OptionIdx int
	// ActionDigest is the digest of the action authorised: the option's action_digest,
	// equal to the digest recomputed from the action about to run.
	ActionDigest string
}

// Authorize decides whether r is authority for the action act under env (envelope-04
// §7.3, §12.6). It confirms that env has the digest r names and that option_idx is in
// range, then compares the digest of act, recomputed from the action itself, with the
// action_digest of the selected option; it consults no outside map of what an index meant.
//
// Only an option resolution can be authority. A well-formed answer, question or declined
// resolution is refused with CodeResNotAuthority, naming its kind; a mismatched action
// with CodeResActionMismatch; the zero Action with CodeResActionNotBindable. Authorize does
// not record the resolution: a Registry does that, once (§12.5).
func Authorize(env *Envelope, r *Resolution, act Action) (Grant, error) {
	if err := Verify(env, r); err != nil {
		return Grant{}, err
	}
	ps := &problems{}
	if r.Kind != KindOption {
		ps.add(CodeResNotAuthority, "$.binding_moment_resolution.resolution",
			"the resolution is %q; only an option resolution authorises an action (§7.3)", r.Kind)
		return Grant{}, ps.err("authority")
	}
	opt, _ := env.Option(r.OptionIdx) // in range: Verify checked
	if act.digest == "" {
		ps.add(CodeResActionNotBindable, "$", "no action was given, so no resolution authorises it")
		return Grant{}, ps.err("authority")
	}
	if act.digest != opt.ActionDigest {
		ps.add(CodeResActionMismatch, fmt.Sprintf("$.question.options[%d].action_digest", r.OptionIdx),
			"the action about to run has digest %s; the selected option authorises %s (§7.3, §12.6)", act.digest, opt.ActionDigest)
		return Grant{}, ps.err("authority")
	}
	return Grant{EnvelopeDigest: env.Digest(), OptionIdx: r.OptionIdx, ActionDigest: act.digest}, nil
}

// AuthorizeCall is Authorize for a tool call given as its name and argument object: the
// action {"tool": tool, "args": args} (ToolCall). A call that cannot be digested under the
// strict profile is refused with CodeResActionNotBindable, once env and r check out.
func AuthorizeCall(env *Envelope, r *Resolution, tool string, args json.RawMessage) (Grant, error) {
	act, err := toolCall(tool, args)
	if err == nil {
		return Authorize(env, r, act)
	}
	if _, verr := Authorize(env, r, Action{}); !HasCode(verr, CodeResActionNotBindable) {
		return Grant{}, verr // not authority whatever the action
	}
	ps := &problems{}
	var nameErr toolNameError
	if errors.As(err, &nameErr) {
		ps.add(CodeResActionNotBindable, "$.tool", "%v", err)
	} else {
		ps.add(CodeResActionNotBindable, "$.args",
			"the action cannot be bound to a human decision (%s), so no resolution authorises it", actionReason(err))
	}
	return Grant{}, ps.err("authority")
}
