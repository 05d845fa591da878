package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"unicode/utf8"

	sigsjson "sigs.k8s.io/json"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/journal"
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
	// Server is the ToolPolicy server the tool belongs to; optional when the sidecar fronts one
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
	// ActID is the act the sidecar built for the call.
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
)

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

func (e *RequestError) Error() string { return fmt.Sprintf("sidecar: %s: %s", e.Field, e.Detail) }

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

func printable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// Enforce is tool-use-binding §16 enforce() for one block a host loop is about to run: allow
// only after the authority was verified and consumed and the dispatch journaled, or when the
// policy allows the call without authority. agent is the pod's identity.
func (g *Gate) Enforce(ctx context.Context, agent string, r EnforceRequest) Decision {
	start := g.now()
	var obs callObservation
	dec := g.enforce(ctx, agent, r, &obs)
	// The host invokes the tool after an allow: the event is the decision alone (Invoked false,
	// the duration is enforce's), its outcome arrives by Complete.
	g.observer.CallDecided(obs.event(sink.Call{Server: r.Server},
		sink.Result{Allowed: dec.Allow, ActID: dec.ActID, State: dec.State, Code: dec.Code, AuditCode: dec.AuditCode},
		g.now().Sub(start)))
	return dec
}

func (g *Gate) enforce(ctx context.Context, agent string, r EnforceRequest, obs *callObservation) Decision {
	server := r.Server
	if server == "" && len(g.servers) == 1 {
		for name := range g.servers {
			server = name
		}
	}
	_, known := g.servers[server]
	session := r.Session
	if session == "" {
		session = DefaultHostSession
	}
	mc := g.mapping(session, agent, server, sourceType(r.Provenance))
	if !known {
		// Mapped only to address the refusal to the block's vendor id.
		mc.Server, mc.Destination = act.ServerIdentity{}, ""
	}
	var (
		cand   *act.Candidate
		err    error
		vendor act.Vendor
	)
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
		g.log.V(1).Info("Host-loop block not mapped to an act", "server", server, "cause", actCode(err))
		d := act.DenialFor(err)
		return decisionOf(refusal(d.Code, d.Message), admission{})
	}
	var dec Decision
	ad := admission{}
	obs.class, obs.actionDigest = cand.Act.ConsequenceClass, cand.ActionDigest()
	if known {
		ad = g.admit(ctx, cand, server)
		if ad.class != "" {
			obs.class = ad.class
		}
		obs.outcome, obs.audit = ad.outcome, ad.audit
	} else {
		ad.res = refusal(ef.EFUnknownTool, "Name the server the tool belongs to; this sidecar does not front that one.")
	}
	switch {
	case !ad.ok:
		g.receiptRefusal(cand, server, ad.class, ad.res.Code)
		dec = decisionOf(ad.res, ad)
	case ad.rec == nil:
		// The host invokes after this answer: the allow is in the log first (receipts.go). The
		// hot path has no operation of its own here; the act id names the decision.
		if res, ok := g.receiptHot(cand, server, ad, ""); !ok {
			dec = decisionOf(res, admission{})
			break
		}
		dec = Decision{Allow: true, ActID: cand.Act.CandidateActID, AuditCode: ad.auditCode, Resolutions: ad.deliveries}
	default:
		if res, ok := g.receiptDispatch(ctx, cand, server, ad); !ok {
			dec = decisionOf(res, admission{})
			break
		}
		dec = Decision{Allow: true, ActID: cand.Act.CandidateActID, AuditCode: ad.auditCode, Resolutions: ad.deliveries}
		dec.AuthorityID, dec.OperationID, dec.State = ad.rec.AuthorityID, ad.rec.OperationID, ad.rec.State
	}
	if !dec.Allow {
		if b, derr := act.DenyResult(vendor, cand.VendorID, act.Denial{Code: dec.Code, Message: dec.Message}); derr == nil {
			dec.Deny = b
		}
	}
	return dec
}

// decisionOf is the Decision of a refusal.
func decisionOf(res sink.Result, ad admission) Decision {
	d := Decision{Code: res.Code, Message: res.Message, ActID: res.ActID, Retryable: res.Code.Retryable() && (ad.retryable || res.Code == ef.EF060),
		BindingMoments: ad.moments, EnvelopeDigest: ad.envelopeDigest, Resolutions: res.Resolutions}
	if res.Moment != nil && res.Moment.Envelope != nil {
		d.BindingMoment = res.Moment.Envelope.Canonical()
	}
	return d
}

// HostLoopHandler serves POST /v1/enforce and POST /v1/complete for host loops in the pod,
// whose calls are made as agent (the pod's service-account user).
func (g *Gate) HostLoopHandler(agent string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(EnforcePath, func(w http.ResponseWriter, r *http.Request) {
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
		writeJSON(w, http.StatusOK, g.Enforce(context.WithoutCancel(r.Context()), agent, req))
	})
	mux.HandleFunc(CompletePath, func(w http.ResponseWriter, r *http.Request) {
		body, ok := readBody(w, r)
		if !ok {
			return
		}
		req, err := ParseCompleteRequest(body)
		if err != nil {
			writeError(w, http.StatusBadRequest, CodeBadRequest, err)
			return
		}
		rec, err := g.Complete(r.Context(), req.OperationID, req.Outcome, req.Result)
		switch {
		case errors.Is(err, ErrUnknownOperation):
			writeError(w, http.StatusNotFound, CodeUnknownOperation, err)
		case errors.Is(err, ErrSettled):
			writeError(w, http.StatusConflict, CodeSettled, err)
		case err != nil:
			g.log.Error(err, "Host-loop outcome not recorded", "operation", req.OperationID)
			writeError(w, http.StatusServiceUnavailable, CodeUnavailable, errors.New("the outcome could not be recorded"))
		default:
			writeJSON(w, http.StatusOK, CompleteResponse{OperationID: rec.OperationID, State: rec.State})
		}
	})
	return mux
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
