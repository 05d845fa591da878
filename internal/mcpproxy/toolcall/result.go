package toolcall

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
	"github.com/actgate/actgate/internal/sink"
)

// RawResult is a result written to the agent exactly as held: an upstream CallToolResult, a
// recorded one returned to a retry, or a result the proxy composed with members the SDK's types
// cannot carry (binding_moment, annotation extras).
type RawResult struct {
	mcp.ResultBase
	Raw json.RawMessage
}

// MarshalJSON returns the held bytes; a _meta the SDK set on the way out is merged in.
func (r *RawResult) MarshalJSON() ([]byte, error) {
	if len(r.Meta) == 0 {
		return r.Raw, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(r.Raw, &m); err != nil {
		return nil, err
	}
	meta := map[string]any{}
	if old, ok := m["_meta"]; ok {
		if err := json.Unmarshal(old, &meta); err != nil {
			return nil, err
		}
	}
	for k, v := range r.Meta {
		if _, ok := meta[k]; !ok {
			meta[k] = v
		}
	}
	b, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	m["_meta"] = b
	return json.Marshal(m)
}

// refusal is the CallToolResult of a call the gate did not let run: the §17 error object as
// text and as structuredContent, the EF code in _meta, and for an escalation the additive
// top-level binding_moment member (envelope-04 §8.1).
type refusal struct {
	Content           []wire.TextBlock `json:"content"`
	StructuredContent *refusalContent  `json:"structuredContent,omitempty"`
	IsError           bool             `json:"isError"`
	Meta              map[string]any   `json:"_meta"`
	BindingMoment     json.RawMessage  `json:"binding_moment,omitempty"`
}

// refusalContent is the structuredContent of a refusal: the tool-use-binding §17 host error
// object plus what the agent needs to continue.
type refusalContent struct {
	Error          act.ErrorBody `json:"error"`
	ActID          string        `json:"act_id,omitempty"`
	State          string        `json:"state,omitempty"`
	MomentID       string        `json:"binding_moment_id,omitempty"`
	EnvelopeDigest string        `json:"envelope_digest,omitempty"`
	// Resolutions are binding-moment resolutions delivered to this session (envelope-04 §7.3).
	Resolutions []sink.Delivery `json:"resolutions,omitempty"`
}

// momentResult is the CallToolResult of the virtual request_binding_moment tool when the gate
// registered the proposed moment: a successful result carrying the envelope.
type momentResult struct {
	Content           []wire.TextBlock `json:"content"`
	StructuredContent momentContent    `json:"structuredContent"`
	IsError           bool             `json:"isError"`
	Meta              map[string]any   `json:"_meta"`
	BindingMoment     json.RawMessage  `json:"binding_moment"`
}

type momentContent struct {
	MomentID       string          `json:"binding_moment_id"`
	EnvelopeDigest string          `json:"envelope_digest"`
	Expires        string          `json:"expires,omitempty"`
	Resolutions    []sink.Delivery `json:"resolutions,omitempty"`
}

// RefusalResult renders a call the gate refused (deny or escalation).
func RefusalResult(res sink.Result) (*RawResult, error) { return RefusalFor(res, true) }

// RefusalFor renders a refusal, with the error object in structuredContent only when
// structured: a refusal of a tool that declares an outputSchema omits it, since structured
// content must conform to the tool's schema (MCP tools: structured content), and clients
// validate it even on an error result. The text content, the _meta EF code and the
// binding_moment member are the same either way.
func RefusalFor(res sink.Result, structured bool) (*RawResult, error) {
	code := res.Code
	if !code.Known() {
		// A refusal without a usable code is still a refusal (fail closed).
		code = ef.EFPolicyDenied
	}
	obj, err := act.Denial{Code: code, Message: res.Message}.Object()
	if err != nil {
		return nil, err
	}
	// The error object says whether the tool was invoked: a call dispatched whose outcome is
	// unknown was (tool-use-binding §17 "invoked"), whatever the refusal's code.
	obj.Error.Invoked = invoked(res)
	text, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	sc := &refusalContent{Error: obj.Error, ActID: res.ActID, State: string(res.State), Resolutions: res.Resolutions}
	out := refusal{
		IsError:           true,
		StructuredContent: sc,
		Meta:              map[string]any{MetaEFCode: string(code)},
	}
	if len(res.Resolutions) > 0 {
		out.Meta[MetaResolutions] = res.Resolutions
	}
	if res.ActID != "" {
		out.Meta[MetaActID] = res.ActID
	}
	if res.State != "" {
		out.Meta[MetaState] = string(res.State)
	}
	if s := int64(res.RetryAfter / time.Second); s > 0 {
		out.Meta[MetaRetryAfter] = s
	}
	payload := string(text)
	if m := res.Moment; m != nil && m.Envelope != nil {
		out.BindingMoment = m.Envelope.Canonical()
		sc.MomentID = m.ID
		sc.EnvelopeDigest = m.Envelope.Digest()
		out.Meta[MetaMomentID] = m.ID
		out.Meta[MetaEnvelopeDigest] = m.Envelope.Digest()
		rendered, err := renderMoment(m)
		if err != nil {
			return nil, err
		}
		payload += "\n\n" + rendered
	}
	out.Content = []wire.TextBlock{{Type: "text", Text: payload}}
	if len(res.Resolutions) > 0 {
		out.Content = append(out.Content, wire.TextBlock{Type: "text", Text: deliveriesText(res.Resolutions)})
	}
	if !structured {
		out.StructuredContent = nil
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	return &RawResult{Raw: b}, nil
}

// invoked reports whether the refused call's tool was invoked: this call dispatched it, or it
// is a retry of an act dispatched before whose outcome is not known to have been a refusal.
func invoked(res sink.Result) bool {
	if res.Invoked {
		return true
	}
	switch res.State {
	case journal.StateInvoked, journal.StateIndeterminate, journal.StateExecuted:
		return res.Replayed
	}
	return false
}

// RegisteredMoment renders the result of request_binding_moment when the gate registered it.
func RegisteredMoment(m *sink.MomentRef, deliveries []sink.Delivery) (*RawResult, error) {
	rendered, err := renderMoment(m)
	if err != nil {
		return nil, err
	}
	out := momentResult{
		Content:           []wire.TextBlock{{Type: "text", Text: rendered}},
		StructuredContent: momentContent{MomentID: m.ID, EnvelopeDigest: m.Envelope.Digest()},
		Meta:              map[string]any{MetaMomentID: m.ID, MetaEnvelopeDigest: m.Envelope.Digest()},
		BindingMoment:     m.Envelope.Canonical(),
	}
	if !m.Expires.IsZero() {
		out.StructuredContent.Expires = m.Expires.UTC().Format("2006-01-02T15:04:05Z")
	}
	if len(deliveries) > 0 {
		out.StructuredContent.Resolutions = deliveries
		out.Meta[MetaResolutions] = deliveries
		out.Content = append(out.Content, wire.TextBlock{Type: "text", Text: deliveriesText(deliveries)})
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	return &RawResult{Raw: b}, nil
}

// renderMoment is the conventional plain-text payload of a binding moment: the envelope
// rendered by internal/envelope's TextRenderer, which keeps every envelope-04 §9.1 invariant
// (all four briefing slots, the recommended option distinguished, per-option reasoning, both
// hatches when true, and decline), then how it is resolved.
func renderMoment(m *sink.MomentRef) (string, error) {
	var b bytes.Buffer
	if err := (envelope.TextRenderer{}).Render(&b, m.Envelope); err != nil {
		return "", err
	}
	fmt.Fprintf(&b, "\nBinding moment %s awaits your principal", m.ID)
	if !m.Expires.IsZero() {
		fmt.Fprintf(&b, " until %s", m.Expires.UTC().Format("2006-01-02T15:04:05Z"))
	}
	// The command is the one of the deployment the principal is in: kubectl in a cluster, the
	// standalone gate's CLI otherwise.
	fmt.Fprintf(&b, ". The principal resolves it (%s --option N | --answer TEXT | --question | --decline)", ResolveCommand(m))
	b.WriteString("; a chosen option's call then runs once when you make exactly that call.\n")
	return strings.TrimRight(b.String(), "\n") + "\n", nil
}

// ResolveCommand is the command a principal resolves moment m with: `kubectl actgate resolve NAME
// -n NAMESPACE` for a cluster's BindingMoment, `actgate resolve ID` for the standalone gate's.
func ResolveCommand(m *sink.MomentRef) string {
	if m.Namespace != "" {
		return "kubectl actgate resolve " + m.ID + " -n " + m.Namespace
	}
	return "actgate resolve " + m.ID
}

// WithDeliveries returns an upstream CallToolResult as the agent receives it: with
// binding-moment resolutions delivered to the session added, in _meta["actgate.io/resolutions"]
// for programs and as a trailing text block for the model, whose continuation depends on which
// of the four resolutions it was (envelope-04 §7.3). Otherwise the upstream's bytes are
// returned as they are, the journal's recorded ones to a retry included: a retry answered from
// the journal is marked in an HTTP header (wire.HeaderReplayed), never in the result, so that
// the model reads what it read the first time (docs/api.md "Per method").
func WithDeliveries(raw json.RawMessage, deliveries []sink.Delivery) (json.RawMessage, error) {
	if len(deliveries) == 0 {
		return raw, nil
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	if doc == nil {
		return nil, errors.New("mcpproxy: the upstream result is not an object")
	}
	meta := map[string]json.RawMessage{}
	if old, ok := doc["_meta"]; ok && string(old) != jsonNull {
		if err := json.Unmarshal(old, &meta); err != nil {
			return nil, err
		}
	}
	var err error
	if meta[MetaResolutions], err = json.Marshal(deliveries); err != nil {
		return nil, err
	}
	var content []json.RawMessage
	if old, ok := doc["content"]; ok && string(old) != jsonNull {
		if err := json.Unmarshal(old, &content); err != nil {
			return nil, err
		}
	}
	block, err := json.Marshal(wire.TextBlock{Type: "text", Text: deliveriesText(deliveries)})
	if err != nil {
		return nil, err
	}
	if doc["content"], err = json.Marshal(append(content, block)); err != nil {
		return nil, err
	}
	if doc["_meta"], err = json.Marshal(meta); err != nil {
		return nil, err
	}
	return json.Marshal(doc)
}

// deliveriesText tells the model what each resolution means for its continuation
// (envelope-04 §7.3: option, answer, question and declined are distinct and not collapsed).
func deliveriesText(ds []sink.Delivery) string {
	var b strings.Builder
	for i, d := range ds {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "actgate: binding moment %s (%s) was resolved: ", d.MomentID, d.EnvelopeDigest)
		switch d.Kind {
		case "option":
			idx := -1
			if d.OptionIdx != nil {
				idx = *d.OptionIdx
			}
			fmt.Fprintf(&b, "the principal chose option %d", idx+1)
			if d.Tool != "" {
				fmt.Fprintf(&b, " (%s", d.Tool)
				if d.Server != "" {
					fmt.Fprintf(&b, " on %s", d.Server)
				}
				b.WriteString(")")
			}
			if d.Authorized {
				b.WriteString("; it is authorised: make exactly that call and it runs once")
				if d.Expires != "" {
					fmt.Fprintf(&b, " (until %s)", d.Expires)
				}
				b.WriteString(".")
			} else {
				// Not authority for the call presented: the principal chose another option,
				// or the moment needs more principals' choices first.
				b.WriteString("; it does not authorise the call you made: only that option's exact call can run, once every principal the moment needs has chosen it.")
			}
		case "answer":
			fmt.Fprintf(&b, "the principal answered in their own words instead of choosing an option: %q. Continue from that answer.", d.Answer)
		case "question":
			b.WriteString("the principal rejected the question as put. Reopen deliberation; do not act on the options.")
		case "declined":
			b.WriteString("the principal declined: the answer to the question as put is no. Stop; none of its actions will run.")
		default:
			fmt.Fprintf(&b, "%s.", d.Kind)
		}
	}
	return b.String()
}

// Refusal holds the JSON-RPC error an upstream answered a tools/call with, when the
// proxy classified it as a refusal before execution (upstream.Classify): set by the invoker, read after
// the gate finished.
type Refusal struct {
	mu  sync.Mutex
	err *jsonrpc.Error
}

// Set records the upstream's refusal.
func (u *Refusal) Set(err *jsonrpc.Error) {
	u.mu.Lock()
	u.err = err
	u.mu.Unlock()
}

// Get returns the upstream's refusal, nil when there was none.
func (u *Refusal) Get() *jsonrpc.Error {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.err
}

// UpstreamsAnswer reports whether the agent's answer to a call is the upstream's response as
// written: its result unchanged (no resolutions delivered, not a retry answered from the
// journal), or its JSON-RPC refusal (refusedUpstream).
func UpstreamsAnswer(res sink.Result, refusedUpstream bool) bool {
	return res.Allowed && !res.Replayed && len(res.Resolutions) == 0 && (len(res.Upstream) > 0 || refusedUpstream)
}

// SettledResult is the result given to a retry of an act that ran once and whose outcome was
// settled by authenticated reconciliation without the upstream's result: what happened, never
// a second invocation. FAILED is an error result; EXECUTED is not.
func SettledResult(state journal.State) json.RawMessage {
	text := fmt.Sprintf("actgate: this call was dispatched once; authenticated reconciliation settled its outcome as %s. "+
		"The upstream's result was not received, so none is returned; the call is not run again.", state)
	return wire.TextResult(text, state != journal.StateExecuted)
}

// AllowedResult is the upstream's result (or the recorded one, to a retry: as first given,
// its replay marked by the revision's answer in wire.HeaderReplayed) as the agent sees it.
func AllowedResult(res sink.Result) (*RawResult, error) {
	raw, err := WithDeliveries(res.Upstream, res.Resolutions)
	if err != nil {
		return nil, err
	}
	return &RawResult{Raw: raw}, nil
}
