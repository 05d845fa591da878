package sink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/action"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/jcs"
	"github.com/actgate/actgate/internal/sink/moment"
)

// The request_binding_moment tool's input and its parsing live in internal/sink/moment; these
// names keep the gate's API in one place.

// MaxProposalBytes bounds the arguments of one request_binding_moment call.
const MaxProposalBytes = moment.MaxProposalBytes

// Hatch names an escape hatch in Proposal.Hatches (envelope-04 §5.8).
const (
	HatchFreeText = moment.HatchFreeText
	HatchDialogue = moment.HatchDialogue
)

// ErrProposal is wrapped by every refusal of ParseProposal.
var ErrProposal = moment.ErrProposal

// Option is one proposed option of a binding moment: a concrete tool call.
type Option = moment.ProposalOption

// Proposal is the input of the virtual request_binding_moment tool. The gate computes every
// action digest itself; the agent never supplies one.
type Proposal = moment.Proposal

// ParseProposal reads the arguments of a request_binding_moment call from untrusted bytes
// (moment.ParseProposal).
func ParseProposal(raw []byte) (Proposal, error) { return moment.ParseProposal(raw) }

// ProposalSchema is the inputSchema of the virtual request_binding_moment tool.
func ProposalSchema() json.RawMessage { return moment.ProposalSchema() }

// requestMoment is the virtual request_binding_moment tool (docs/architecture.md "Human
// decisions"): the agent proposes the briefing and 2–4 options, each a concrete tool call; the gate
// computes every action digest itself, checks each call against policy, and registers the envelope
// for the principals policy names for those calls.
func (g *gate) requestMoment(ctx context.Context, session, agent string, p Proposal) (Result, error) {
	if g == nil {
		return Result{}, errNoGate
	}
	res := g.proposeMoment(ctx, session, agent, p)
	res.Resolutions = append(res.Resolutions, g.moments.TakeDeliveries(session)...)
	return res, nil
}

func momentRefused(msg string) Result {
	return denyResult(ef.EFMomentInvalid, msg)
}

func (g *gate) proposeMoment(ctx context.Context, session, agent string, p Proposal) Result {
	if ctx.Err() != nil {
		return denyResult(ef.EF060, "")
	}
	if session == "" || agent == "" {
		return momentRefused("The binding moment needs a session and an agent.")
	}
	if len(p.Raw) > 0 {
		parsed, err := ParseProposal(p.Raw)
		if err != nil {
			return momentRefused(clip(err.Error(), 180))
		}
		p = parsed
	}
	if len(p.Options) < envelope.MinOptions || len(p.Options) > envelope.MaxOptions {
		return momentRefused("A binding moment offers 2 to 4 options (envelope-04 §5.6).")
	}
	if err := moment.CheckHatches(p.Hatches); err != nil {
		return momentRefused(clip(err.Error(), 180))
	}
	servers := g.policy.Servers()
	var (
		opts       []moment.Option
		draft      []envelope.DraftOption
		req        *PolicyDecision
		principals []string
	)
	for i, o := range p.Options {
		server, dest, ok := resolveServer(servers, o.Server)
		if !ok {
			return momentRefused(fmt.Sprintf("Option %d names no protected server; set its server.", i))
		}
		if act.CheckToolName("tool", o.Tool) != nil {
			return momentRefused(fmt.Sprintf("Option %d has an invalid tool name.", i))
		}
		canon, err := jcs.Canonicalize(o.Args, jcs.Strict)
		if err != nil || len(canon) == 0 || canon[0] != '{' {
			return denyResult(ef.EFArgumentsOutOfProfile, fmt.Sprintf("Option %d: arguments are not an object inside the strict profile (integers only).", i))
		}
		digest, err := action.Digest(o.Tool, canon, jcs.Strict)
		if err != nil {
			return denyResult(ef.EFArgumentsOutOfProfile, fmt.Sprintf("Option %d: arguments cannot be bound to a human decision.", i))
		}
		d := g.policy.Evaluate(ctx, PolicyRequest{
			Server: server, Destination: dest, Tool: o.Tool, Args: canon,
			Class: act.DefaultClass(o.Tool), Agent: agent, StrictArgs: true,
		})
		if ctx.Err() != nil {
			return denyResult(ef.EF060, "")
		}
		mo, err := moment.Option{Tool: o.Tool, Server: server, Destination: dest, Args: canon,
			ArgsDigest: jcs.Digest(canon), ActionDigest: digest}.WithShown(d.MaskArguments)
		if err != nil {
			return momentRefused(fmt.Sprintf("Option %d: the call cannot be shown to a principal.", i))
		}
		switch d.Outcome {
		case PolicyAllow, PolicyPermit:
		case PolicyEscalate:
			mo.NeedsHuman = true
			if req == nil {
				dd := d
				req = &dd
				principals = sortedUnique(d.Evidence.Principals)
			} else if !slices.Equal(principals, sortedUnique(d.Evidence.Principals)) || minPrincipals(d.Evidence) != minPrincipals(req.Evidence) {
				return momentRefused("The options need decisions by different principals; propose them in separate binding moments.")
			}
		default:
			code := d.Code
			if !code.Known() {
				code = ef.EFPolicyDenied
			}
			return denyResult(code, fmt.Sprintf("Option %d: policy refuses this call; a principal cannot authorise it.", i))
		}
		opts = append(opts, mo)
		draft = append(draft, envelope.DraftOption{Label: o.Label, Reasoning: o.Reasoning, Tool: o.Tool, Args: canon})
	}
	if req == nil {
		return momentRefused("No option needs a human decision under policy; call the tool directly.")
	}
	if len(principals) == 0 {
		return momentRefused("Policy names no principal who could resolve this binding moment.")
	}
	offer := p.Offer
	if offer == "" {
		offer = DefaultOffer
	}
	env, err := envelope.Build(envelope.Draft{
		Synopsis: p.Synopsis, Findings: p.Findings, Recommendations: p.Recommendations, Offer: offer,
		Stem: p.Stem, Options: draft, RecommendedIdx: p.Recommended,
		CloseFreeText: p.Hatches != nil && !slices.Contains(p.Hatches, HatchFreeText),
		CloseDialogue: p.Hatches != nil && !slices.Contains(p.Hatches, HatchDialogue),
		Meta:          moment.ProposalMeta(p),
	})
	if err != nil {
		return momentRefused(problemSummary(err))
	}
	if g.remote != nil {
		return g.proposeRemote(ctx, session, agent, env, opts)
	}
	now := g.now()
	m := &moment.Moment{
		ID: moment.NewID(), Env: env, Session: session, Agent: agent, Options: opts,
		Principals: principals, Min: minPrincipals(req.Evidence), SoD: req.Evidence.SeparationOfDuties,
		Epoch: req.Epoch, AuthorityTTL: g.authorityTTLFor(*req), Created: now, Expires: now.Add(g.momentTTL),
		Policy: req.Policy, Rule: req.Rule, Votes: map[string]int{}, Class: proposalClass(req, opts),
	}
	if err := g.moments.Admit(agent, session, now); err != nil {
		g.log.Info("binding moment refused: too many pending", "code", ef.EFMomentLimit, "reason", err.Error())
		return denyResult(ef.EFMomentLimit, momentLimitMessage)
	}
	if err := g.register(ctx, m); err != nil {
		if errors.Is(err, envelope.ErrAlreadyEmitted) {
			// §7.2: a question-space veto is a reopening, never the same question again;
			// §12.5: identical envelopes share a digest and their resolutions.
			return momentRefused("This envelope is identical to one already emitted; change it to incorporate the principal's response (envelope-04 §7.2, §12.5).")
		}
		return momentRefused("The binding moment could not be registered.")
	}
	if err := g.addMoment(ctx, m, nil, now); err != nil {
		if !errors.Is(err, moment.ErrLimit) {
			g.log.Error(err, "binding moment not stored", "moment", m.ID)
			return denyResult(ef.EFStoreUnavailable, "The binding moment could not be stored; nothing was registered.")
		}
		g.log.Info("binding moment refused: too many pending", "code", ef.EFMomentLimit, "reason", err.Error())
		return denyResult(ef.EFMomentLimit, momentLimitMessage)
	}
	g.observer.MomentEmitted(momentEvent(m))
	// A new moment about these actions lifts an earlier decline or reopening of them.
	digests := make([]string, len(opts))
	for i, o := range opts {
		digests[i] = o.ActionDigest
	}
	g.moments.Reopen(session, digests)
	g.log.Info("binding moment proposed", "moment", m.ID, "envelope", env.Digest(), "options", len(opts),
		"policy", m.Policy, "rule", m.Rule)
	return Result{
		Allowed: true,
		Moment:  momentRef(m),
		Message: fmt.Sprintf("Binding moment %s awaits a decision by %d of the principals policy names.", m.ID, m.Min),
	}
}

// resolveServer finds the protected server an option names; with one protected server the
// name may be omitted.
func resolveServer(servers []ServerInfo, name string) (string, string, bool) {
	if name == "" {
		if len(servers) == 1 {
			return servers[0].Name, servers[0].URL, servers[0].URL != ""
		}
		return "", "", false
	}
	for _, s := range servers {
		if s.Name == name {
			return s.Name, s.URL, s.URL != ""
		}
	}
	return "", "", false
}

func sortedUnique(ss []string) []string {
	out := slices.Clone(ss)
	sort.Strings(out)
	return slices.Compact(out)
}

// problemSummary lists an envelope validation error's codes and paths (no slot text).
func problemSummary(err error) string {
	ps := envelope.ProblemsOf(err)
	if len(ps) == 0 {
		return "The proposal is not a well-formed binding moment."
	}
	var b strings.Builder
	var ve *envelope.ValidationError
	if errors.As(err, &ve) && ve.ProfileOnly() {
		// Well formed under envelope-04; the gate does not send what breaks its profile.
		b.WriteString("Outside the gate's binding-moment profile:")
	} else {
		b.WriteString("Not a well-formed binding moment:")
	}
	for i, p := range ps {
		if i == 4 {
			b.WriteString(" …")
			break
		}
		fmt.Fprintf(&b, " %s at %s;", p.Code, clip(p.Path, 48))
	}
	return b.String()
}

// MergePatch applies an RFC 7396 JSON merge patch to a JSON object (moment.MergePatch: the
// declared alternatives of a gate-authored moment). The authority service builds its
// gate-authored envelopes with it too.
func MergePatch(target, patch json.RawMessage) (json.RawMessage, error) {
	return moment.MergePatch(target, patch)
}
