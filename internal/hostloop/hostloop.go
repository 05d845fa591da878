package hostloop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"regexp"
	"sync"
	"time"
	"unicode/utf8"

	sigsjson "sigs.k8s.io/json"

	"github.com/go-logr/logr"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/sink"
)

// Paths of the host-loop endpoint.
const (
	EnforcePath  = "/v1/enforce"
	CompletePath = "/v1/complete"
)

// DefaultHostSession is the session of a host-loop call that names none: one session for the
// pod's host loop. Binding-moment resolutions are per session, so a host loop running several
// conversations should name each.
const DefaultHostSession = "host-loop"

// MaxHostBodyBytes bounds a host-loop request: a vendor block up to the act package's input
// bound, with room for the wrapper.
const MaxHostBodyBytes = act.DefaultMaxInputBytes + 64<<10

// HostVendor is the vendor shape of a host-loop block.
type HostVendor string

// Host vendors: which adapter maps the block (internal/act).
const (
	// HostAnthropic: a Messages API content block of type tool_use.
	HostAnthropic HostVendor = "anthropic"
	// HostOpenAI: one Chat Completions tool_calls[] entry.
	HostOpenAI HostVendor = "openai"
	// HostOpenAIResponses: one Responses API function_call output item.
	HostOpenAIResponses HostVendor = "openai-responses"
)

// EnforceRequest is the body of POST /v1/enforce.
type EnforceRequest struct {
	// Vendor is anthropic, openai or openai-responses. Required.
	Vendor HostVendor `json:"vendor"`
	// Block is the raw tool_use block, tool_calls entry or function_call item. Required.
	Block json.RawMessage `json:"block"`
	// Server is the ToolPolicy server the tool belongs to; optional when the gate protects one
	// server.
	Server string `json:"server,omitempty"`
	// Session is the host loop's conversation id; default DefaultHostSession.
	Session string `json:"session,omitempty"`
	// Provenance is where the instruction behind the call came from (user, system, retrieval,
	// tool_output), as the host attests it; default unknown (the worst source for policy).
	Provenance string `json:"provenance,omitempty"`
}

// Decision is the answer of POST /v1/enforce: tool-use-binding §16's {allow, authority_id,
// code, message}, and what the host needs to continue.
type Decision struct {
	// Allow is true only when the host may run the tool now, once: the authority was verified
	// and consumed and the dispatch journaled, or the policy allows the call without one.
	Allow bool `json:"allow"`
	// AuthorityID is the consumed authority (allow under authority).
	AuthorityID string `json:"authority_id,omitempty"`
	// Code is the EF code of a refusal.
	Code ef.EFCode `json:"code,omitempty"`
	// Message is safe to show the model.
	Message string `json:"message,omitempty"`
	// Retryable is true only for EF_060.
	Retryable bool `json:"retryable,omitempty"`
	// OperationID is the journaled dispatch to report with /v1/complete, and the idempotency
	// key to give the tool if it takes one (allow under authority).
	OperationID string `json:"operation_id,omitempty"`
	// State is the dispatch's journal state (DISPATCH_PENDING on allow under authority).
	State journal.State `json:"state,omitempty"`
	// ActID is the act the gate built for the call.
	ActID string `json:"act_id,omitempty"`
	// BindingMoments name the BindingMoments of an escalation, EnvelopeDigest its envelope and
	// BindingMoment the envelope itself (envelope-04 §8.1's additive member).
	BindingMoments []string        `json:"binding_moments,omitempty"`
	EnvelopeDigest string          `json:"envelope_digest,omitempty"`
	BindingMoment  json.RawMessage `json:"binding_moment,omitempty"`
	// Resolutions are binding-moment resolutions delivered to the session (envelope-04 §7.3).
	Resolutions []sink.Delivery `json:"resolutions,omitempty"`
	// AuditCode is, in audit mode, the code enforcement would have returned.
	AuditCode ef.EFCode `json:"audit_code,omitempty"`
	// Replayed is true for a retry of a dispatch already settled in this session (Allow is
	// false: the tool must not run again); Result is the result recorded for it, the tool's
	// result to hand back to the model.
	Replayed bool            `json:"replayed,omitempty"`
	Result   json.RawMessage `json:"result,omitempty"`
	// Deny is the refusal in the block's vendor shape (tool_result with is_error, tool message,
	// function_call_output), to hand back to the model as the tool's result.
	Deny json.RawMessage `json:"deny,omitempty"`
}

// CompleteRequest is the body of POST /v1/complete.
type CompleteRequest struct {
	// OperationID is the Decision's operation_id. Required.
	OperationID string `json:"operation_id"`
	// Outcome is executed, failed or indeterminate. Required.
	Outcome HostOutcome `json:"outcome"`
	// Result is the tool's result (any JSON), kept for a retry and digested as evidence.
	Result json.RawMessage `json:"result,omitempty"`
}

// CompleteResponse is the answer of POST /v1/complete.
type CompleteResponse struct {
	OperationID string        `json:"operation_id"`
	State       journal.State `json:"state"`
}

// ErrorCode is the stable code of a host-loop request the endpoint refused as malformed.
type ErrorCode string

// Error codes of the host-loop endpoint.
const (
	CodeBadRequest       ErrorCode = "HOSTLOOP_BAD_REQUEST"
	CodeUnknownOperation ErrorCode = "HOSTLOOP_UNKNOWN_OPERATION"
	CodeSettled          ErrorCode = "HOSTLOOP_SETTLED"
	CodeUnavailable      ErrorCode = "HOSTLOOP_UNAVAILABLE"
	// CodeUnauthenticated: the request carries no agent's token, or a wrong one (401; serve).
	CodeUnauthenticated ErrorCode = "HOSTLOOP_UNAUTHENTICATED"
	// CodePendingLimit: the bound of host-loop calls under way, in total or for the agent, is
	// reached (429); nothing was enforced. Retry after completing calls under way.
	CodePendingLimit ErrorCode = "HOSTLOOP_PENDING_LIMIT"
	// CodeHostRefused: the request reached the loopback listener with a Host or an Origin that is
	// not loopback — a page of another site through DNS rebinding (403); nothing was read.
	CodeHostRefused ErrorCode = "HOSTLOOP_HOST_REFUSED"
)

// ErrorCodes are every ErrorCode the endpoint answers (api/openapi/hostloop.yaml lists them).
func ErrorCodes() []ErrorCode {
	return []ErrorCode{CodeBadRequest, CodeUnauthenticated, CodeUnknownOperation, CodeSettled, CodeUnavailable, CodePendingLimit,
		CodeHostRefused}
}

// Vendors are every HostVendor.
func Vendors() []HostVendor { return []HostVendor{HostAnthropic, HostOpenAI, HostOpenAIResponses} }

// ErrorResponse is the body of a refused host-loop request (not a refused tool call).
type ErrorResponse struct {
	Error struct {
		Code    ErrorCode `json:"code"`
		Message string    `json:"message"`
	} `json:"error"`
}

// RequestError is a malformed host-loop request.
type RequestError struct {
	Field  string
	Detail string
}

func (e *RequestError) Error() string { return fmt.Sprintf("hostloop: %s: %s", e.Field, e.Detail) }

func badField(field, format string, args ...any) error {
	return &RequestError{Field: field, Detail: fmt.Sprintf(format, args...)}
}

// decodeStrict decodes exactly one JSON object into v: case-sensitive member names, no unknown
// or duplicate members (sigs.k8s.io/json, as the API server and internal/review decode).
func decodeStrict(body []byte, v any) error {
	if len(body) > MaxHostBodyBytes {
		return badField("$", "body of %d bytes exceeds %d", len(body), MaxHostBodyBytes)
	}
	if !utf8.Valid(body) {
		return badField("$", "not UTF-8")
	}
	strict, err := sigsjson.UnmarshalStrict(body, v)
	if err != nil {
		if ok, off := sigsjson.SyntaxErrorOffset(err); ok {
			return badField("$", "invalid JSON at byte %d", off)
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return badField("$", "member %s has the wrong JSON type", te.Field)
		}
		return badField("$", "%s", clip(err.Error()))
	}
	if len(strict) > 0 {
		return badField("$", "%s", clip(strict[0].Error()))
	}
	return nil
}

// ParseEnforceRequest parses and checks a /v1/enforce body. The block itself is the vendor
// adapter's to check (Enforce).
func ParseEnforceRequest(body []byte) (EnforceRequest, error) {
	var r EnforceRequest
	if err := decodeStrict(body, &r); err != nil {
		return EnforceRequest{}, err
	}
	switch r.Vendor {
	case HostAnthropic, HostOpenAI, HostOpenAIResponses:
	case "":
		return EnforceRequest{}, badField("vendor", "required")
	default:
		return EnforceRequest{}, badField("vendor", "must be %s, %s or %s", HostAnthropic, HostOpenAI, HostOpenAIResponses)
	}
	if len(r.Block) == 0 || string(r.Block) == "null" {
		return EnforceRequest{}, badField("block", "required")
	}
	if r.Server != "" && (!dnsLabel.MatchString(r.Server) || len(r.Server) > 63) {
		return EnforceRequest{}, badField("server", "not a server name")
	}
	if len(r.Session) > 256 || !printable(r.Session) {
		return EnforceRequest{}, badField("session", "at most 256 printable characters")
	}
	switch r.Provenance {
	case "", "user", "system", "retrieval", "tool_output":
	default:
		return EnforceRequest{}, badField("provenance", "must be user, system, retrieval or tool_output")
	}
	return r, nil
}

// ParseCompleteRequest parses and checks a /v1/complete body.
func ParseCompleteRequest(body []byte) (CompleteRequest, error) {
	var r CompleteRequest
	if err := decodeStrict(body, &r); err != nil {
		return CompleteRequest{}, err
	}
	if r.OperationID == "" || len(r.OperationID) > journal.MaxIDLength || !printable(r.OperationID) {
		return CompleteRequest{}, badField("operation_id", "required, at most %d printable characters", journal.MaxIDLength)
	}
	switch r.Outcome {
	case HostExecuted, HostFailed, HostIndeterminate:
	default:
		return CompleteRequest{}, badField("outcome", "must be %s, %s or %s", HostExecuted, HostFailed, HostIndeterminate)
	}
	if len(r.Result) > journal.MaxResultBytes {
		return CompleteRequest{}, badField("result", "larger than %d bytes", journal.MaxResultBytes)
	}
	return r, nil
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

func printable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// HostOutcome is what a host loop reports about a tool it ran (POST /v1/complete).
type HostOutcome string

// Host outcomes.
const (
	// HostExecuted: the tool ran and returned its result.
	HostExecuted HostOutcome = "executed"
	// HostFailed: the tool refused or failed with an error of its own.
	HostFailed HostOutcome = "failed"
	// HostIndeterminate: the host does not know whether the tool took effect (it crashed, timed
	// out, lost the connection). Only authenticated reconciliation settles it.
	HostIndeterminate HostOutcome = "indeterminate"
)

// Sentinel errors of Complete.
var (
	// ErrUnknownOperation: no dispatch of this gate (and this agent) has that operation id.
	ErrUnknownOperation = errors.New("hostloop: no such dispatch")
	// ErrSettled: the dispatch already has an outcome; it is never overwritten.
	ErrSettled = errors.New("hostloop: dispatch already settled")
	// ErrPendingLimit: the host loops hold as many calls under way as Config allows (in total
	// or for the agent); nothing was enforced.
	ErrPendingLimit = errors.New("hostloop: too many host-loop calls under way")
)

// Defaults of Config.
const (
	// DefaultTimeout bounds how long a host loop may take between an allow under authority
	// (/v1/enforce) and its outcome (/v1/complete); past it the dispatch is recorded
	// INDETERMINATE.
	DefaultTimeout = 5 * time.Minute
	// DefaultRecordTimeout bounds one journal read after an outcome.
	DefaultRecordTimeout = 10 * time.Second
	// DefaultMaxPending bounds the host-loop calls under way at once, all agents together: a
	// call counts from its /v1/enforce until the sink recorded its outcome (at once for a
	// refusal or an allow without authority; at /v1/complete or the timeout for a dispatch).
	DefaultMaxPending = 1024
	// DefaultMaxPendingPerAgent bounds the host-loop calls under way for one agent.
	DefaultMaxPendingPerAgent = 256
	// SinkID is the mapping context's sink id of a host-loop block (the sink maps the call
	// again into the act it decides).
	SinkID = "host-loop"
)

// Handler is what the host loop runs a call through: internal/sink's Gate.
type Handler interface {
	Handle(ctx context.Context, c sink.Call, inv sink.Invoker) (sink.Result, error)
}

// Records reads a journaled dispatch (the deployment's journal store).
type Records interface {
	Record(ctx context.Context, operationID string) (journal.DispatchRecord, error)
}

// Config wires a Loop.
type Config struct {
	// Gate decides each call. Required.
	Gate Handler
	// Records is the journal the gate writes. Required.
	Records Records
	// Servers are the protected servers, name → URL; a block naming another is refused
	// EF_UNKNOWN_TOOL. With one server a block may name none. Required.
	Servers map[string]string
	// Principal is the act's initiating principal; empty means the calling agent.
	Principal string
	// RuntimeID is the act's agent.runtime_id. Required.
	RuntimeID string
	// IDs hands out the act ids of the mapping context. Required.
	IDs *act.IDIssuer
	// ActTTL is the mapping context's act lifetime. Optional: sink.DefaultActTTL.
	ActTTL time.Duration
	// Now is the clock. Optional: time.Now.
	Now func() time.Time
	// Timeout bounds a dispatch's wait for its outcome. Optional: DefaultTimeout.
	Timeout time.Duration
	// RecordTimeout bounds a journal read. Optional: DefaultRecordTimeout.
	RecordTimeout time.Duration
	// MaxPending and MaxPendingPerAgent bound the calls under way. Optional: the defaults;
	// negative is no bound.
	MaxPending, MaxPendingPerAgent int
	// Log receives operation ids, codes and outcomes, never argument values. Optional: discard.
	Log logr.Logger
}

// Loop runs host loops' calls through the sink's Handle, as the MCP proxy runs a tools/call:
// the Invoker is the host itself. For a dispatch under authority the Invoker answers
// /v1/enforce with the allow and the operation id, then waits for the host's /v1/complete (or
// Config.Timeout, after which the outcome is unknown: INDETERMINATE), and the sink records the
// outcome, its receipt and its report exactly as for an MCP call. On the hot path the Invoker
// answers the allow and returns at once: nothing is journaled there. Both deployments run it:
// the pod's sidecar (internal/sidecar) and `actgate serve` (internal/standalone).
type Loop struct {
	cfg     Config
	mu      sync.Mutex
	waiting map[string]*hostDispatch // operation id → the dispatch awaiting its outcome
	total   int                      // calls under way
	byAgent map[string]int           // calls under way per agent
	// running counts the host-loop calls under way; closing ends those awaiting an outcome.
	running   sync.WaitGroup
	closing   chan struct{}
	closeOnce sync.Once
}

type hostDispatch struct {
	agent    string             // the agent whose call it is: only it reports the outcome
	report   chan hostReport    // the host's outcome
	recorded chan journal.State // what the sink recorded for it
}

type hostReport struct {
	outcome HostOutcome
	result  json.RawMessage
}

// allowed is what the Invoker tells Enforce when the sink lets the call run.
type allowed struct {
	inv sink.Invocation
}

// ErrConfig is wrapped by every configuration error of New.
var ErrConfig = errors.New("hostloop: invalid configuration")

// New checks cfg and returns its Loop.
func New(cfg Config) (*Loop, error) {
	switch {
	case cfg.Gate == nil || cfg.Records == nil || cfg.IDs == nil:
		return nil, fmt.Errorf("%w: Gate, Records and IDs are required", ErrConfig)
	case len(cfg.Servers) == 0:
		return nil, fmt.Errorf("%w: at least one server is required", ErrConfig)
	case cfg.RuntimeID == "":
		return nil, fmt.Errorf("%w: RuntimeID is required", ErrConfig)
	case cfg.Timeout < 0 || cfg.RecordTimeout < 0 || cfg.ActTTL < 0:
		return nil, fmt.Errorf("%w: durations must not be negative", ErrConfig)
	}
	cfg.Timeout = orDefault(cfg.Timeout, DefaultTimeout)
	cfg.RecordTimeout = orDefault(cfg.RecordTimeout, DefaultRecordTimeout)
	cfg.ActTTL = orDefault(cfg.ActTTL, sink.DefaultActTTL)
	if cfg.MaxPending == 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	if cfg.MaxPendingPerAgent == 0 {
		cfg.MaxPendingPerAgent = DefaultMaxPendingPerAgent
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log.GetSink() == nil {
		cfg.Log = logr.Discard()
	}
	return &Loop{cfg: cfg, waiting: map[string]*hostDispatch{}, byAgent: map[string]int{}, closing: make(chan struct{})}, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// acquire counts a call of agent under way, or refuses it at a bound.
func (h *Loop) acquire(agent string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.cfg.MaxPending > 0 && h.total >= h.cfg.MaxPending:
		return fmt.Errorf("%w: the gate holds %d host-loop calls under way, its limit", ErrPendingLimit, h.cfg.MaxPending)
	case h.cfg.MaxPendingPerAgent > 0 && h.byAgent[agent] >= h.cfg.MaxPendingPerAgent:
		return fmt.Errorf("%w: the agent holds %d host-loop calls under way, its limit; complete them first", ErrPendingLimit, h.cfg.MaxPendingPerAgent)
	}
	h.total++
	h.byAgent[agent]++
	return nil
}

func (h *Loop) release(agent string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.total--
	if h.byAgent[agent]--; h.byAgent[agent] <= 0 {
		delete(h.byAgent, agent)
	}
}

// Pending is the number of host-loop calls under way.
func (h *Loop) Pending() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.total
}

// Enforce is tool-use-binding §16 enforce() for one block a host loop is about to run: allow
// only after the authority was issued, verified, consumed and the dispatch journaled, or when
// the policy allows the call without authority. agent is the authenticated caller. At a bound
// of calls under way it returns ErrPendingLimit and enforces nothing.
func (h *Loop) Enforce(ctx context.Context, agent string, r EnforceRequest) (Decision, error) {
	if err := h.acquire(agent); err != nil {
		return Decision{}, err
	}
	return h.enforce(ctx, agent, r), nil
}

// Complete records the outcome a host loop reports for a dispatch Enforce allowed agent. The
// host loop is the executor of an in-process tool, so its report of executed or failed is the
// authoritative evidence, digested with the result it returned; indeterminate stays
// INDETERMINATE. A dispatch is settled once: a second report is ErrSettled. A dispatch under
// way of another agent is ErrUnknownOperation.
func (h *Loop) Complete(ctx context.Context, agent, operationID string, outcome HostOutcome, result []byte) (journal.DispatchRecord, error) {
	return h.complete(ctx, agent, operationID, outcome, result)
}

// enforce runs one call; the slot acquire counted is released when the sink has recorded the
// call (at once for a refusal, at the outcome for a dispatch).
func (h *Loop) enforce(ctx context.Context, agent string, r EnforceRequest) Decision {
	cfg := &h.cfg
	server := r.Server
	if server == "" && len(cfg.Servers) == 1 {
		for name := range cfg.Servers {
			server = name
		}
	}
	dest, known := cfg.Servers[server]
	session := r.Session
	if session == "" {
		session = DefaultHostSession
	}
	principal := cfg.Principal
	if principal == "" {
		principal = agent
	}
	mc := act.MappingContext{
		SessionID: session, Principal: act.Principal{PrincipalID: principal},
		Agent: act.Agent{AgentID: agent, RuntimeID: cfg.RuntimeID}, SinkID: SinkID, Now: cfg.Now, TTL: cfg.ActTTL, IDs: cfg.IDs,
	}
	if known {
		mc.Server, mc.Destination = act.ServerIdentity{Name: server, URL: dest}, dest
	}
	var (
		cand   *act.Candidate
		err    error
		vendor act.Vendor
	)
	// The block is mapped here only to read the tool, the arguments and the vendor id; the
	// sink maps the call again into the act it decides and binds.
	switch r.Vendor {
	case HostAnthropic:
		vendor = act.VendorAnthropic
		cand, err = act.MapAnthropicToolUse(r.Block, mc)
	case HostOpenAI:
		vendor = act.VendorOpenAIChat
		cand, err = act.MapOpenAIToolCall(r.Block, mc)
	case HostOpenAIResponses:
		vendor = act.VendorOpenAIResponses
		cand, err = act.MapResponsesFunctionCall(r.Block, mc)
	default:
		err = badField("vendor", "unknown")
	}
	if err != nil {
		h.release(agent)
		cfg.Log.V(1).Info("Host-loop block not mapped to an act", "server", server, "cause", actCode(err))
		d := act.DenialFor(err)
		return refusedDecision(sink.Result{Code: d.Code, Message: orDescription(d.Code, d.Message)}, "", "")
	}
	if !known {
		h.release(agent)
		res := sink.Result{Code: ef.EFUnknownTool, Message: "Name the server the tool belongs to; this gate does not protect that one."}
		return refusedDecision(res, vendor, cand.VendorID)
	}
	c := sink.Call{Session: session, Agent: agent, Server: server, Destination: dest, Tool: cand.Act.Tool.ToolID,
		Args: cand.Arguments, Provenance: r.Provenance, Vendor: vendor, VendorID: cand.VendorID}

	allow := make(chan allowed, 1)
	done := make(chan sink.Result, 1)
	h.running.Add(1)
	go func() {
		defer h.running.Done()
		defer h.release(agent)
		// Once the call is under way it finishes (or fails closed) whatever the client does,
		// as the MCP proxy detaches the gate.
		var hd *hostDispatch
		res, _ := cfg.Gate.Handle(context.WithoutCancel(ctx), c, h.invoker(agent, allow, &hd))
		if hd != nil {
			hd.recorded <- res.State // the outcome, its receipt and its report are done
		}
		done <- res
	}()
	allowedDecision := func(a allowed) Decision {
		d := Decision{Allow: true, ActID: "", AuditCode: ""}
		if a.inv.Journaled {
			d.AuthorityID, d.OperationID, d.State = a.inv.AuthorityID, a.inv.OperationID, journal.StateDispatchPending
		}
		// The act id and the audit code are known once Handle answers; on the hot path that is
		// at once.
		if !a.inv.Journaled {
			res := <-done
			d.ActID, d.AuditCode, d.Resolutions = res.ActID, res.AuditCode, res.Resolutions
		} else {
			d.ActID = h.actOf(a.inv.OperationID)
		}
		return d
	}
	select {
	case a := <-allow:
		return allowedDecision(a)
	case res := <-done:
		// On the hot path the Invoker's allow and Handle's result are both ready once Handle
		// returns, and select picks either: an allow sent on the hot path is the decision. (A
		// journaled dispatch whose Handle already returned was ended without the host's outcome:
		// no allow then.)
		select {
		case a := <-allow:
			if !a.inv.Journaled {
				return Decision{Allow: true, ActID: res.ActID, AuditCode: res.AuditCode, Resolutions: res.Resolutions}
			}
		default:
		}
		if res.Replayed {
			// A retry of a dispatch already settled in this session: not to be run again; the
			// recorded result is the tool's result (tool-use-binding §9).
			return Decision{Replayed: true, Result: res.Upstream, Message: res.Message, ActID: res.ActID, State: res.State,
				OperationID: res.OperationID, Resolutions: res.Resolutions}
		}
		return refusedDecision(res, vendor, cand.VendorID)
	}
}

// actOf is the act id of a journaled dispatch ("" if it cannot be read).
func (h *Loop) actOf(operationID string) string {
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.RecordTimeout)
	defer cancel()
	rec, err := h.cfg.Records.Record(ctx, operationID)
	if err != nil {
		return ""
	}
	return rec.ActID
}

// invoker is the Invoker of a host-loop call: it tells Enforce the call may run and, for a
// journaled dispatch, waits for the host's outcome.
func (h *Loop) invoker(agent string, allow chan<- allowed, registered **hostDispatch) sink.Invoker {
	return func(ctx context.Context, operationID string) (sink.InvokeResult, error) {
		inv, _ := sink.InvocationFrom(ctx)
		inv.OperationID = operationID
		if !inv.Journaled {
			allow <- allowed{inv: inv}
			return sink.InvokeResult{Outcome: sink.OutcomeExecuted}, nil
		}
		hd := &hostDispatch{agent: agent, report: make(chan hostReport, 1), recorded: make(chan journal.State, 1)}
		*registered = hd
		h.mu.Lock()
		h.waiting[operationID] = hd
		h.mu.Unlock()
		allow <- allowed{inv: inv}
		t := time.NewTimer(h.cfg.Timeout)
		defer t.Stop()
		select {
		case rep := <-hd.report:
			switch rep.outcome {
			case HostExecuted:
				return sink.InvokeResult{Result: rep.result, Outcome: sink.OutcomeExecuted}, nil
			case HostFailed:
				return sink.InvokeResult{Result: rep.result, Outcome: sink.OutcomeFailed}, nil
			}
			return sink.InvokeResult{Result: rep.result, Outcome: sink.OutcomeIndeterminate}, nil
		case <-h.closing:
			h.mu.Lock()
			delete(h.waiting, operationID)
			h.mu.Unlock()
			h.cfg.Log.Info("Gate stopping before the host loop reported the outcome; INDETERMINATE", "operation", operationID)
			return sink.InvokeResult{Outcome: sink.OutcomeIndeterminate}, nil
		case <-t.C:
			h.mu.Lock()
			delete(h.waiting, operationID)
			h.mu.Unlock()
			h.cfg.Log.Info("Host loop did not report the outcome in time; INDETERMINATE", "operation", operationID)
			return sink.InvokeResult{Outcome: sink.OutcomeIndeterminate}, nil
		}
	}
}

func (h *Loop) complete(ctx context.Context, agent, operationID string, outcome HostOutcome, result []byte) (journal.DispatchRecord, error) {
	switch outcome {
	case HostExecuted, HostFailed, HostIndeterminate:
	default:
		return journal.DispatchRecord{}, fmt.Errorf("hostloop: outcome %q is not executed, failed or indeterminate", clip(string(outcome)))
	}
	h.mu.Lock()
	hd, ok := h.waiting[operationID]
	if ok && hd.agent != agent {
		// Another agent's dispatch under way: as unknown to this one as one never issued.
		h.mu.Unlock()
		return journal.DispatchRecord{}, fmt.Errorf("%w: %s", ErrUnknownOperation, clip(operationID))
	}
	delete(h.waiting, operationID)
	h.mu.Unlock()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.cfg.RecordTimeout)
	defer cancel()
	if !ok {
		rec, err := h.cfg.Records.Record(rctx, operationID)
		switch {
		case errors.Is(err, journal.ErrNotFound):
			return journal.DispatchRecord{}, fmt.Errorf("%w: %s", ErrUnknownOperation, clip(operationID))
		case err != nil:
			return journal.DispatchRecord{}, err
		}
		return rec, fmt.Errorf("%w: %s is %s", ErrSettled, operationID, rec.State)
	}
	hd.report <- hostReport{outcome: outcome, result: append(json.RawMessage(nil), result...)}
	h.cfg.Log.Info("Dispatch outcome reported by the host loop", "operation", operationID, "outcome", string(outcome))
	// The sink records the outcome when the Invoker returns; read what it recorded.
	select {
	case <-hd.recorded:
	case <-rctx.Done():
		return journal.DispatchRecord{}, fmt.Errorf("hostloop: the outcome of %s was not recorded in time: %w", operationID, rctx.Err())
	}
	return h.cfg.Records.Record(rctx, operationID)
}

// Close ends the host loops' dispatches still awaiting their outcome (INDETERMINATE: the host
// may have run the tool) and waits, at most a record timeout, for their records.
func (h *Loop) Close() {
	h.closeOnce.Do(func() { close(h.closing) })
	done := make(chan struct{})
	go func() {
		h.running.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(h.cfg.RecordTimeout):
	}
}

// refusedDecision is the Decision of a refusal, with the deny payload in the block's vendor
// shape.
func refusedDecision(res sink.Result, vendor act.Vendor, vendorID string) Decision {
	d := Decision{Code: res.Code, Message: res.Message, ActID: res.ActID, Retryable: res.Code.Retryable(), Resolutions: res.Resolutions,
		State: res.State}
	if res.Moment != nil {
		d.BindingMoments = []string{res.Moment.ID}
		d.EnvelopeDigest = res.Moment.Digest
		if res.Moment.Envelope != nil {
			d.BindingMoment = res.Moment.Envelope.Canonical()
		}
	}
	if vendor != "" {
		if b, err := act.DenyResult(vendor, vendorID, act.Denial{Code: res.Code, Message: res.Message}); err == nil {
			d.Deny = b
		}
	}
	return d
}

func orDescription(code ef.EFCode, msg string) string {
	if msg == "" {
		return code.Description()
	}
	return msg
}

// clip bounds an untrusted string for errors and logs.
func clip(s string) string {
	if len(s) > 128 {
		return s[:128] + "…"
	}
	return s
}

func actCode(err error) string {
	if c, ok := act.CodeOf(err); ok {
		return string(c)
	}
	return "unknown"
}

// Authenticator names the agent behind a host-loop request, or reports that it carries no
// agent's credential.
type Authenticator func(r *http.Request) (agent string, ok bool)

// FixedAgent is the Authenticator of a listener only its agent reaches: the pod's sidecar on
// loopback, whose host loop calls as the pod's service-account user.
func FixedAgent(agent string) Authenticator {
	return func(*http.Request) (string, bool) { return agent, true }
}

// Handler serves POST /v1/enforce and POST /v1/complete, each call made as the agent auth
// names; a request auth refuses is answered 401 HOSTLOOP_UNAUTHENTICATED before its body is
// read, and nothing is enforced.
func (h *Loop) Handler(auth Authenticator) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(EnforcePath, func(w http.ResponseWriter, r *http.Request) {
		agent, ok := authenticate(w, r, auth)
		if !ok {
			return
		}
		body, ok := readBody(w, r)
		if !ok {
			return
		}
		req, err := ParseEnforceRequest(body)
		if err != nil {
			writeError(w, http.StatusBadRequest, CodeBadRequest, err)
			return
		}
		// The host waits for the answer; once the consume is under way it must finish (or
		// fail closed) whatever the client does, as the MCP proxy detaches the gate.
		d, err := h.Enforce(context.WithoutCancel(r.Context()), agent, req)
		if err != nil {
			h.cfg.Log.Info("Host-loop call refused at the bound of calls under way", "agent", agent)
			writeError(w, http.StatusTooManyRequests, CodePendingLimit, err)
			return
		}
		writeJSON(w, http.StatusOK, d)
	})
	mux.HandleFunc(CompletePath, func(w http.ResponseWriter, r *http.Request) {
		agent, ok := authenticate(w, r, auth)
		if !ok {
			return
		}
		body, ok := readBody(w, r)
		if !ok {
			return
		}
		req, err := ParseCompleteRequest(body)
		if err != nil {
			writeError(w, http.StatusBadRequest, CodeBadRequest, err)
			return
		}
		rec, err := h.Complete(r.Context(), agent, req.OperationID, req.Outcome, req.Result)
		switch {
		case errors.Is(err, ErrUnknownOperation):
			writeError(w, http.StatusNotFound, CodeUnknownOperation, err)
		case errors.Is(err, ErrSettled):
			writeError(w, http.StatusConflict, CodeSettled, err)
		case err != nil:
			h.cfg.Log.Error(err, "Host-loop outcome not recorded", "operation", req.OperationID)
			writeError(w, http.StatusServiceUnavailable, CodeUnavailable, errors.New("the outcome could not be recorded"))
		default:
			writeJSON(w, http.StatusOK, CompleteResponse{OperationID: rec.OperationID, State: rec.State})
		}
	})
	return mux
}

// authenticate answers 403 for a request from a page of another site (the MCP proxy's DNS
// rebinding test, mcpproxy.RebindingHeader: without it a page could reach a loopback gate that
// needs no token, as the sidecar's) and 401 for a request auth refuses.
func authenticate(w http.ResponseWriter, r *http.Request, auth Authenticator) (string, bool) {
	if what := mcpproxy.RebindingHeader(r); what != "" {
		writeError(w, http.StatusForbidden, CodeHostRefused,
			fmt.Errorf("the %s header does not name the gate's loopback address (DNS rebinding protection)", what))
		return "", false
	}
	if auth != nil {
		if agent, ok := auth(r); ok && agent != "" {
			return agent, true
		}
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="actgate"`)
	writeError(w, http.StatusUnauthorized, CodeUnauthenticated, errors.New("this endpoint needs the agent's token in Authorization: Bearer (see the gate's agent.tokenFile)"))
	return "", false
}

// readBody checks method and media type and reads a bounded body; it answers the refusal
// itself.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, CodeBadRequest, errors.New("POST only"))
		return nil, false
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, CodeBadRequest, errors.New("the body is application/json"))
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxHostBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, CodeBadRequest, fmt.Errorf("body larger than %d bytes", MaxHostBodyBytes))
			return nil, false
		}
		writeError(w, http.StatusBadRequest, CodeBadRequest, errors.New("the body could not be read"))
		return nil, false
	}
	return body, true
}

func writeError(w http.ResponseWriter, status int, code ErrorCode, err error) {
	var e ErrorResponse
	e.Error.Code, e.Error.Message = code, err.Error()
	writeJSON(w, status, e)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
