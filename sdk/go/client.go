// Package actgate is the Go client of actgate's host-loop API (docs/api.md "The Go client of
// the host-loop API (sdk/go)"): a host loop that receives a tool call from a model asks the gate with Enforce before it runs the tool,
// runs it only on an allow, and reports the outcome with Complete (tool-use-binding §14–§16).
//
// The gate is `actgate serve` (BaseURL http://127.0.0.1:8787, the agent's bearer token) or the
// pod's sidecar (http://127.0.0.1:15080, no token). Run and the vendor helpers (anthropic.go,
// openai.go) do the whole dance for one call: enforce, run the tool once on allow, complete, and
// hand back the result the model reads — the refusal in the vendor's shape (invoked: false) when
// the gate refuses, and nothing run when the gate cannot be reached.
package actgate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Paths of the host-loop API.
const (
	EnforcePath  = "/v1/enforce"
	CompletePath = "/v1/complete"
)

// DefaultTimeout bounds one request when the Client has no HTTPClient of its own. An enforce of
// a call under authority waits for the consume and the journal write; a timeout never runs the
// tool.
const DefaultTimeout = 30 * time.Second

// maxAnswerBytes bounds an answer read from the gate: a Decision carries at most a binding
// moment's envelope and a recorded result.
const maxAnswerBytes = 8 << 20

// Vendor is the vendor shape of the block sent to Enforce.
type Vendor string

// Vendors the gate maps (tool-use-binding §6, §7).
const (
	// VendorAnthropic: a Messages API content block of type tool_use.
	VendorAnthropic Vendor = "anthropic"
	// VendorOpenAI: one Chat Completions tool_calls[] entry.
	VendorOpenAI Vendor = "openai"
	// VendorOpenAIResponses: one Responses API function_call output item.
	VendorOpenAIResponses Vendor = "openai-responses"
)

// Provenance is where the instruction behind a call came from, as the host attests it
// (tool-use-binding §12). Empty is unknown: the worst source for policy.
const (
	ProvenanceUser       = "user"
	ProvenanceSystem     = "system"
	ProvenanceRetrieval  = "retrieval"
	ProvenanceToolOutput = "tool_output"
)

// Outcome is what the host reports about a tool it ran.
type Outcome string

// Outcomes of Complete.
const (
	// Executed: the tool ran and returned its result.
	Executed Outcome = "executed"
	// Failed: the tool refused or failed with an error of its own.
	Failed Outcome = "failed"
	// Indeterminate: the host does not know whether the tool took effect (it timed out, lost
	// the connection); only reconciliation settles it.
	Indeterminate Outcome = "indeterminate"
)

// EF codes a host loop acts on (the full list: docs/api.md).
const (
	// CodeEscalationRequired: a principal must commit the call in a binding moment
	// (envelope-04); the Decision names the moment.
	CodeEscalationRequired = "EF_ESCALATION_REQUIRED"
	// CodeRetryable is the one retryable refusal (EF_060).
	CodeRetryable = "EF_060"
)

// HOSTLOOP_* codes of a request the gate refused as malformed or could not serve (not a refused
// tool call: that is a Decision).
const (
	ErrCodeBadRequest       = "HOSTLOOP_BAD_REQUEST"
	ErrCodeUnknownOperation = "HOSTLOOP_UNKNOWN_OPERATION"
	ErrCodeSettled          = "HOSTLOOP_SETTLED"
	ErrCodeUnavailable      = "HOSTLOOP_UNAVAILABLE"
	// ErrCodeUnauthenticated: a missing or wrong agent token (401); the client gives the same
	// code to a 401/403 without a HOSTLOOP body.
	ErrCodeUnauthenticated = "HOSTLOOP_UNAUTHENTICATED"
	// ErrCodeHostRefused: the request's Host is not the gate's loopback address (403, a DNS
	// rebinding guard).
	ErrCodeHostRefused = "HOSTLOOP_HOST_REFUSED"
	// ErrCodePendingLimit: too many host-loop calls under way (429); nothing was enforced.
	ErrCodePendingLimit = "HOSTLOOP_PENDING_LIMIT"
	// ErrCodeBadAnswer is the client's name for an answer it could not read.
	ErrCodeBadAnswer = "HOSTLOOP_BAD_ANSWER"
)

// Client talks to the gate's host-loop API. The zero HTTPClient is a client with
// DefaultTimeout.
type Client struct {
	// BaseURL is the gate: http://127.0.0.1:8787 (actgate serve) or http://127.0.0.1:15080 (the
	// sidecar). Required.
	BaseURL string
	// Token is the agent's bearer token (actgate serve); empty for the sidecar.
	Token string
	// HTTPClient sends the requests; nil uses a client with DefaultTimeout.
	HTTPClient *http.Client
}

// EnforceOptions say which server, session, provenance and destination a call has.
type EnforceOptions struct {
	// Vendor is the block's shape. Required (the vendor helpers set it).
	Vendor Vendor
	// Server is the policy's server the tool belongs to; optional when the gate fronts one.
	Server string
	// Session is the conversation; resolutions of binding moments are delivered per session.
	Session string
	// Provenance is where the instruction came from (Provenance* constants).
	Provenance string
	// Destination is the URL the host is about to contact for the call: the URL its MCP client
	// is connected to, an HTTP API endpoint, or for computer use the live page's URL. Optional:
	// without it the gate takes the server's configured URL. The gate refuses a destination its
	// policy does not allow with EF_DESTINATION_MISMATCH and binds the authority to it
	// (tool-use-binding §12 MCP_SERVER_SWAP and COMPUTER_USE_ORIGIN_CHANGE, §22 T-D and T-E;
	// docs/api.md "Destinations (T-D, T-E)").
	Destination string
}

// Resolution is a binding-moment resolution delivered to the session (envelope-04 §7.3).
type Resolution struct {
	MomentID       string `json:"moment_id"`
	EnvelopeDigest string `json:"envelope_digest"`
	Kind           string `json:"resolution"`
	OptionIdx      *int   `json:"option_idx,omitempty"`
	Answer         string `json:"answer,omitempty"`
	Tool           string `json:"tool,omitempty"`
	Server         string `json:"server,omitempty"`
	ActionDigest   string `json:"action_digest,omitempty"`
	Authorized     bool   `json:"authorized"`
	Expires        string `json:"authority_expires,omitempty"`
}

// Decision is the gate's answer to Enforce (tool-use-binding §16's {allow, authority_id, code,
// message} and what the host needs to go on).
type Decision struct {
	// Allow: the host may run the tool now, once.
	Allow bool `json:"allow"`
	// AuthorityID is the authority consumed for the call (an allow under authority).
	AuthorityID string `json:"authority_id,omitempty"`
	// Code is the EF code of a refusal.
	Code string `json:"code,omitempty"`
	// Message is safe to show the model.
	Message string `json:"message,omitempty"`
	// Retryable is true only for EF_060.
	Retryable bool `json:"retryable,omitempty"`
	// OperationID is the journaled dispatch to report with Complete, and the idempotency key
	// to give the tool if it takes one.
	OperationID string `json:"operation_id,omitempty"`
	// State is the dispatch's journal state.
	State string `json:"state,omitempty"`
	// ActID is the act the gate built for the call.
	ActID string `json:"act_id,omitempty"`
	// BindingMoments, EnvelopeDigest and BindingMoment describe an escalation.
	BindingMoments []string        `json:"binding_moments,omitempty"`
	EnvelopeDigest string          `json:"envelope_digest,omitempty"`
	BindingMoment  json.RawMessage `json:"binding_moment,omitempty"`
	// Resolutions are binding-moment resolutions delivered to the session.
	Resolutions []Resolution `json:"resolutions,omitempty"`
	// AuditCode is, in audit mode, the code enforcement would have returned.
	AuditCode string `json:"audit_code,omitempty"`
	// Replayed: a retry of a dispatch already settled in this session; the tool must not run
	// again and Result is the result recorded for it.
	Replayed bool            `json:"replayed,omitempty"`
	Result   json.RawMessage `json:"result,omitempty"`
	// Deny is the refusal in the block's vendor shape, to hand to the model as the tool result.
	Deny json.RawMessage `json:"deny,omitempty"`
}

// Escalated reports whether the call waits for a principal's binding moment.
func (d Decision) Escalated() bool { return d.Code == CodeEscalationRequired }

// Error is a host-loop request the gate refused (a HOSTLOOP_* code), or an answer the client
// could not read. A refused tool call is not an Error: it is a Decision with Allow false.
type Error struct {
	// Status is the HTTP status (0 when the answer was not read).
	Status int
	// Code is a HOSTLOOP_* code.
	Code string
	// Message is the gate's explanation.
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("actgate: %s (HTTP %d): %s", e.Code, e.Status, e.Message)
}

// CodeOf is the HOSTLOOP_* code of err, or "" when err is not an *Error (a transport error).
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

type enforceRequest struct {
	Vendor      Vendor          `json:"vendor"`
	Block       json.RawMessage `json:"block"`
	Server      string          `json:"server,omitempty"`
	Session     string          `json:"session,omitempty"`
	Provenance  string          `json:"provenance,omitempty"`
	Destination string          `json:"destination,omitempty"`
}

type completeRequest struct {
	OperationID string          `json:"operation_id"`
	Outcome     Outcome         `json:"outcome"`
	Result      json.RawMessage `json:"result,omitempty"`
}

// CompleteResponse is the gate's answer to Complete.
type CompleteResponse struct {
	OperationID string `json:"operation_id"`
	State       string `json:"state"`
}

// Enforce asks the gate whether block may run (tool-use-binding §16 enforce()). A refusal is a
// Decision with Allow false and a nil error; an error (transport, timeout, HOSTLOOP_*) means
// there is no decision, and the tool must not run.
func (c *Client) Enforce(ctx context.Context, block json.RawMessage, o EnforceOptions) (Decision, error) {
	if o.Vendor == "" {
		return Decision{}, &Error{Code: ErrCodeBadRequest, Message: "EnforceOptions.Vendor is required"}
	}
	if !json.Valid(block) {
		return Decision{}, &Error{Code: ErrCodeBadRequest, Message: "the block is not JSON"}
	}
	var d Decision
	err := c.post(ctx, EnforcePath, enforceRequest{Vendor: o.Vendor, Block: block, Server: o.Server, Session: o.Session, Provenance: o.Provenance,
		Destination: o.Destination}, &d)
	if err != nil {
		return Decision{}, err
	}
	if err := checkDecision(d); err != nil {
		return Decision{}, err
	}
	return d, nil
}

// checkDecision refuses an answer that both allows the call and refuses or replays it: it is no
// allow.
func checkDecision(d Decision) error {
	if d.Allow && (d.Code != "" || d.Replayed) {
		return &Error{Code: ErrCodeBadAnswer, Status: http.StatusOK, Message: "the decision both allows the call and refuses or replays it"}
	}
	return nil
}

// Complete reports the outcome of a dispatch Enforce allowed under authority (the Decision's
// OperationID). result is the tool's result as JSON (nil for none); it is kept for a retry and
// digested as evidence. A dispatch is settled once: a second report is HOSTLOOP_SETTLED.
func (c *Client) Complete(ctx context.Context, operationID string, outcome Outcome, result json.RawMessage) error {
	_, err := c.CompleteWithState(ctx, operationID, outcome, result)
	return err
}

// CompleteWithState is Complete, returning the journal state the gate recorded.
func (c *Client) CompleteWithState(ctx context.Context, operationID string, outcome Outcome, result json.RawMessage) (CompleteResponse, error) {
	if operationID == "" {
		return CompleteResponse{}, &Error{Code: ErrCodeBadRequest, Message: "operation id is required"}
	}
	if result != nil && !json.Valid(result) {
		return CompleteResponse{}, &Error{Code: ErrCodeBadRequest, Message: "the result is not JSON"}
	}
	var r CompleteResponse
	err := c.post(ctx, CompletePath, completeRequest{OperationID: operationID, Outcome: outcome, Result: result}, &r)
	return r, err
}

func (c *Client) httpClient() *http.Client {
	if c.HTTPClient != nil {
		return c.HTTPClient
	}
	return &http.Client{Timeout: DefaultTimeout}
}

func (c *Client) post(ctx context.Context, path string, body, out any) error {
	if c.BaseURL == "" {
		return &Error{Code: ErrCodeBadRequest, Message: "Client.BaseURL is required"}
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return &Error{Code: ErrCodeBadRequest, Message: err.Error()}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(c.BaseURL, "/")+path, bytes.NewReader(raw))
	if err != nil {
		return &Error{Code: ErrCodeBadRequest, Message: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return fmt.Errorf("actgate: %s: %w", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	ans, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return fmt.Errorf("actgate: %s: reading the answer: %w", path, err)
	}
	return decodeAnswer(resp.StatusCode, ans, out)
}

// decodeAnswer reads the gate's answer into out: a 200 with the expected JSON, else an *Error.
func decodeAnswer(status int, ans []byte, out any) error {
	if len(ans) > maxAnswerBytes {
		return &Error{Status: status, Code: ErrCodeBadAnswer, Message: fmt.Sprintf("answer larger than %d bytes", maxAnswerBytes)}
	}
	if status != http.StatusOK {
		return answerError(status, ans)
	}
	if err := json.Unmarshal(ans, out); err != nil {
		return &Error{Status: status, Code: ErrCodeBadAnswer, Message: "the answer is not the expected JSON: " + clip(err.Error())}
	}
	return nil
}

// answerError reads a non-200 answer: the gate's HOSTLOOP_* error body when there is one.
func answerError(status int, body []byte) error {
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && strings.HasPrefix(e.Error.Code, "HOSTLOOP_") {
		return &Error{Status: status, Code: e.Error.Code, Message: clip(e.Error.Message)}
	}
	code := ErrCodeBadAnswer
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden:
		code = ErrCodeUnauthenticated
	case http.StatusTooManyRequests:
		code = ErrCodePendingLimit
	case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
		code = ErrCodeUnavailable
	}
	return &Error{Status: status, Code: code, Message: clip(strings.TrimSpace(string(body)))}
}

// clip bounds a string from the network for errors.
func clip(s string) string {
	if len(s) > 256 {
		return s[:256] + "…"
	}
	return s
}
