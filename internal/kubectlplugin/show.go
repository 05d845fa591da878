package kubectlplugin

import (
	"bufio"
	"fmt"
	"io"
	"time"

	v1alpha1 "github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/envelope"
)

// ShowInput is what `show` renders: the moment, its act (nil when it could not be read, with
// ActErr saying why) and the clock.
type ShowInput struct {
	Moment *Moment
	Act    *v1alpha1.Act
	ActErr error
	Now    time.Time
}

// Show renders one binding moment for its principal: who it is for and where it stands, the act
// it decides (tool, server, class, action digest), then the envelope through the text renderer
// of internal/envelope, which keeps every envelope-04 §9.1 invariant (all four briefing slots,
// the recommended option marked, reasoning with each option, an affordance per true hatch and
// one to decline), then the kubectl command behind each affordance while the moment is pending.
// A discarded envelope is never rendered as a decision: the header and the act are followed by
// a diagnostic with one line per problem (§4, §9.3, §12.8).
func Show(w io.Writer, in ShowInput) error {
	bm := in.Moment.Object
	b := bufio.NewWriter(w)
	status := StatusAt(bm, in.Now)

	fmt.Fprintf(b, "Name:        %s/%s\n", safe(bm.Namespace), safe(bm.Name))
	fmt.Fprintf(b, "Principal:   %s\n", safe(bm.Spec.Principal))
	at := bm.Spec.ExpiresAt.UTC().Format(time.RFC3339)
	switch status {
	case StatusPending:
		fmt.Fprintf(b, "State:       Pending, expires %s (%s)\n", expiresIn(bm.Spec.ExpiresAt, in.Now), at)
	case StatusExpired:
		fmt.Fprintf(b, "State:       Expired at %s; it can authorize nothing\n", at)
	case StatusResolved:
		fmt.Fprintf(b, "State:       Resolved\n")
	}
	if r := bm.Spec.Resolution; r != nil {
		what := safe(string(r.Kind))
		if in.Moment.Well() {
			what = Describe(in.Moment.Envelope, r)
		}
		fmt.Fprintf(b, "Resolution:  %s\n", what)
		if bm.Status.ResolvedBy != "" {
			fmt.Fprintf(b, "Resolved by: %s", safe(bm.Status.ResolvedBy))
			if bm.Status.ResolvedAt != nil {
				fmt.Fprintf(b, " at %s", bm.Status.ResolvedAt.UTC().Format(time.RFC3339))
			}
			b.WriteString("\n")
			if v := bm.Status.ResolvedVia; v != nil {
				fmt.Fprintf(b, "Via:         %s\n", viaLine(v))
			}
		}
	}
	fmt.Fprintf(b, "Envelope:    %s\n", safe(string(bm.Spec.EnvelopeDigest)))
	writeAct(b, in)
	b.WriteString("\n")

	if !in.Moment.Well() {
		if (&envelope.ValidationError{Problems: in.Moment.Problems}).ProfileOnly() {
			b.WriteString("BINDING MOMENT NOT SHOWN: the envelope is well formed but outside the actgate profile, so no decision is offered.\n")
		} else {
			b.WriteString("BINDING MOMENT DISCARDED: the envelope is malformed, so no decision is offered (envelope-04 §9.3).\n")
		}
		for _, p := range in.Moment.Problems {
			fmt.Fprintf(b, "  %s\n", safe(p.String()))
		}
		fmt.Fprintf(b, "\nIt cannot be resolved; unresolved it expires at %s and authorizes nothing.\n", at)
		return b.Flush()
	}
	if !in.Moment.CallsShown() {
		b.WriteString("CALLS NOT SHOWN: this BindingMoment does not carry the calls its options authorise, so what an\n" +
			"option runs cannot be shown beside its label; no option can be chosen here (decline, answer or question it).\n\n")
	}
	// Gate-authored: the authority service writes every BindingMoment from policy.
	r := envelope.TextRenderer{Calls: in.Moment.Calls}
	if err := r.Render(b, in.Moment.Envelope); err != nil {
		return err
	}
	switch status {
	case StatusPending:
		writeResolveCommands(b, in.Moment)
	case StatusResolved:
		b.WriteString("\nThis binding moment is resolved: the choices above are as the principal saw them, and nothing more can be written.\n")
	case StatusExpired:
		b.WriteString("\nThis binding moment expired unresolved: the choices above can no longer be made.\n")
	}
	return b.Flush()
}

// writeAct writes the act block: the facts of the call the moment decides, from the Act (the
// authority service's record), never from the envelope.
func writeAct(b *bufio.Writer, in ShowInput) {
	name := safe(in.Moment.Object.Spec.ActRef.Name)
	a := in.Act
	if a == nil {
		reason := "not read"
		if in.ActErr != nil {
			reason = safe(in.ActErr.Error())
		}
		fmt.Fprintf(b, "Act:         %s (cannot be read: %s)\n", name, reason)
		return
	}
	fmt.Fprintf(b, "Act:         %s\n", name)
	fmt.Fprintf(b, "  Tool:      %s\n", safe(a.Spec.Tool))
	fmt.Fprintf(b, "  Server:    %s (%s)\n", safe(a.Spec.Server), safe(a.Spec.Destination))
	fmt.Fprintf(b, "  Class:     %s\n", safe(string(a.Spec.ConsequenceClass)))
	fmt.Fprintf(b, "  Action:    %s%s\n", safe(string(a.Spec.ActionDigest)), optionOf(in.Moment, string(a.Spec.ActionDigest)))
	fmt.Fprintf(b, "  Agent:     %s\n", safe(a.Spec.Agent))
	if a.Status.Decision != "" || a.Status.State != "" {
		fmt.Fprintf(b, "  Decision:  %s, state %s\n", orNone(string(a.Status.Decision)), orNone(string(a.Status.State)))
	}
}

// optionOf says which option of the envelope authorises exactly the act's action, if any.
func optionOf(m *Moment, actionDigest string) string {
	if !m.Well() {
		return ""
	}
	for i := range m.Envelope.NumOptions() {
		if o, _ := m.Envelope.Option(i); o.ActionDigest == actionDigest {
			return fmt.Sprintf("  (the action of option [%d])", i+1)
		}
	}
	return "  (no option of the envelope authorises this exact action)"
}

// writeResolveCommands maps each affordance the text renderer lettered to the command that
// invokes it, so every hatch that is true and decline stay invocable from the shell (§9.1).
func writeResolveCommands(b *bufio.Writer, m *Moment) {
	bm := m.Object
	cmd := fmt.Sprintf("kubectl actgate resolve %s -n %s", safe(bm.Name), safe(bm.Namespace))
	h := m.Envelope.Hatches()
	fmt.Fprintf(b, "\nThe principal (%s) resolves it with one of:\n", safe(bm.Spec.Principal))
	if m.CallsShown() {
		fmt.Fprintf(b, "  [1-%d]  %s --option N\n", m.Envelope.NumOptions(), cmd)
	}
	if h.FreeText {
		fmt.Fprintf(b, "  [a]    %s --answer TEXT\n", cmd)
	}
	if h.Dialogue {
		fmt.Fprintf(b, "  [q]    %s --question\n", cmd)
	}
	fmt.Fprintf(b, "  [d]    %s --decline\n", cmd)
	fmt.Fprintf(b, "or, in a terminal, the picker: %s\n", cmd)
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return safe(s)
}

// viaLine says through which surface a resolution was written and, when admission checked them
// against the request's OpenID Connect authentication, the issuer, subject and sign-in time
// (docs/security.md "Resolution audit"); terminal-safe.
func viaLine(v *v1alpha1.ResolutionVia) string {
	surface := v.Surface
	if surface == "" {
		surface = "an unnamed surface"
	}
	line := safe(surface)
	if v.Issuer != "" || v.Subject != "" || v.AuthTime != nil {
		line += ", signed in"
		if v.Issuer != "" {
			line += " to " + safe(v.Issuer)
		}
		if v.Subject != "" {
			line += " as subject " + safe(v.Subject)
		}
		if v.AuthTime != nil {
			line += " at " + v.AuthTime.UTC().Format(time.RFC3339)
		}
	}
	return line
}
