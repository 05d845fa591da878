package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/failpoint"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
	"github.com/actgate/actgate/internal/sink"
)

// Attempt observes the one HTTP POST that carries a tools/call upstream.
type Attempt struct {
	wrote      atomic.Bool  // request headers were written to a connection: bytes may have left
	status     atomic.Int32 // HTTP status of the POST's response, 0 if none
	credential atomic.Bool  // the request was not sent: its credential could not be obtained
}

type attemptKey struct{}

// Wrote reports whether the request's headers were written to a connection: bytes may have
// left.
func (a *Attempt) Wrote() bool { return a.wrote.Load() }

// Bind returns ctx carrying a's trace, so that the SDK's POST for this call reports to a.
func (a *Attempt) Bind(ctx context.Context) context.Context {
	ctx = context.WithValue(ctx, attemptKey{}, a)
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		// GetConn starts each attempt. net/http retries a POST (no Idempotency-Key header is
		// ever set, so it is not idempotent to net/http) only when nothing of the previous
		// attempt reached the connection, so what counts is the last attempt.
		GetConn: func(string) { a.wrote.Store(false) },
		// WroteHeaders fires once the headers are written to the connection's buffer, which
		// may be before they reach the wire: treating that as sent errs towards
		// INDETERMINATE, never towards a second dispatch.
		WroteHeaders: func() { a.wrote.Store(true) },
		WroteRequest: func(httptrace.WroteRequestInfo) { _ = failpoint.Inject(failpoint.DuringInvoke) }, // request out, no response read
	})
}

// Classify turns the outcome of one upstream tools/call into the sink's invoke result
// (sink.Invoker contract; docs/architecture.md "tools/call and its outcomes").
func Classify(res *mcp.CallToolResult, err error, a *Attempt) (sink.InvokeResult, bool) {
	if err == nil {
		raw, merr := json.Marshal(res)
		if merr != nil {
			// The upstream answered, but the answer cannot be recorded: the outcome is known
			// only to a reconciler.
			return sink.InvokeResult{Outcome: sink.OutcomeIndeterminate}, false
		}
		if res.IsError {
			return sink.InvokeResult{Result: raw, Outcome: sink.OutcomeFailed}, false
		}
		return sink.InvokeResult{Result: raw, Outcome: sink.OutcomeExecuted}, false
	}
	if !a.wrote.Load() {
		// Nothing of the request reached a connection: whatever the error says (the SDK
		// reports transport failures as JSON-RPC errors of its own), the upstream cannot
		// have acted.
		return Unsent(a, err), true
	}
	status := int(a.status.Load())
	if RedirectStatus(status) {
		// The bound destination answered that the resource is elsewhere: it did not process
		// the call, and the gate never sends it anywhere else.
		return Redirected(status), false
	}
	if RefusedStatus(status) {
		// The upstream refused the request itself (authentication, unknown session, bad
		// request): it did not execute the call. 404 means the upstream session is gone.
		return Refused(status), status == http.StatusNotFound
	}
	if we := RPCError(err); we != nil {
		switch we.Code {
		case wire.CodeParseError, wire.CodeInvalidRequest, wire.CodeMethodNotFound, wire.CodeInvalidParams, wire.CodeURLElicitationRequired:
			// A protocol error answered before execution (MCP: unknown tool, invalid
			// arguments; a URL elicitation the request requires before it can proceed).
			return Failed(fmt.Sprintf("the upstream refused the call: JSON-RPC error %d: %s", we.Code, wire.Clip(we.Message, 200))), false
		}
		// Any other error answer may come from a handler that had already acted.
		return sink.InvokeResult{Outcome: sink.OutcomeIndeterminate}, false
	}
	return sink.InvokeResult{Outcome: sink.OutcomeIndeterminate}, errors.Is(err, mcp.ErrConnectionClosed)
}

// sdkLocalCodes are the codes of the JSON-RPC errors the SDK makes up itself (transport
// rejection, closing, unknown), which say nothing about what the upstream answered.
var sdkLocalCodes = map[int64]bool{-32001: true, -32003: true, -32004: true, -32005: true}

// RPCError finds, in err's tree, a JSON-RPC error that is not one of the SDK's own.
func RPCError(err error) *jsonrpc.Error {
	if err == nil {
		return nil
	}
	if we, ok := err.(*jsonrpc.Error); ok && !sdkLocalCodes[we.Code] {
		return we
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return RPCError(u.Unwrap())
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if we := RPCError(e); we != nil {
				return we
			}
		}
	}
	return nil
}

// RefusedStatus reports whether an HTTP status says the upstream refused the request without
// processing it: a 4xx other than 408 (timeout) and 429 (which some servers send after
// accepting work).
func RefusedStatus(s int) bool {
	return s >= 400 && s < 500 && s != http.StatusRequestTimeout && s != http.StatusTooManyRequests
}

// RedirectStatus reports whether an HTTP status is a redirection (RFC 9110 §15.4). The
// proxy's clients never follow one (Client).
func RedirectStatus(s int) bool { return s >= 300 && s < 400 }

// Redirected is the FAILED outcome of a call the upstream answered with a redirect: a
// synthesized isError result carrying ef.EFUpstreamRedirect in _meta.
func Redirected(status int) sink.InvokeResult {
	text := fmt.Sprintf("%s: the upstream answered the call with HTTP %d, a redirect; "+
		"actgate contacts only the authorised destination, so the call ran nowhere", ef.EFUpstreamRedirect, status)
	raw, _ := json.Marshal(struct {
		Content []wire.TextBlock  `json:"content"`
		IsError bool              `json:"isError"`
		Meta    map[string]string `json:"_meta"`
	}{[]wire.TextBlock{{Type: "text", Text: text}}, true, map[string]string{wire.MetaEFCode: string(ef.EFUpstreamRedirect)}})
	return sink.InvokeResult{Result: raw, Outcome: sink.OutcomeFailed}
}

// Unsent is the outcome of a call none of whose bytes reached a connection (NotSent): for lack
// of its credential (the identity provider unreachable or refusing; docs/identity.md "Gate →
// upstream"), an isError result carrying ef.EFUpstreamIDPUnavailable in _meta.
func Unsent(a *Attempt, err error) sink.InvokeResult {
	if a.credential.Load() || CredentialFailed(err) {
		return NotSentCode(ef.EFUpstreamIDPUnavailable, "no credential for the upstream could be obtained from the identity provider; the call was not sent")
	}
	return NotSent("the upstream could not be reached; the call was not sent")
}

// NotSentCode is NotSent with code in the result's _meta and at the start of its text.
func NotSentCode(code ef.EFCode, text string) sink.InvokeResult {
	raw, _ := json.Marshal(struct {
		Content []wire.TextBlock  `json:"content"`
		IsError bool              `json:"isError"`
		Meta    map[string]string `json:"_meta"`
	}{[]wire.TextBlock{{Type: "text", Text: string(code) + ": " + text}}, true, map[string]string{wire.MetaEFCode: string(code)}})
	return sink.InvokeResult{Result: raw, Outcome: sink.OutcomeNotSent}
}

// Refused is the FAILED outcome of a call the upstream refused with a 4xx status before
// processing it (RefusedStatus). 401 is the upstream refusing the gate's credential (its
// WWW-Authenticate challenge, RFC 6750 §3): the call did not run.
func Refused(status int) sink.InvokeResult {
	if status == http.StatusUnauthorized {
		return Failed("the upstream refused the gate's credential for the call (HTTP 401); the call did not run")
	}
	return Failed(fmt.Sprintf("the upstream refused the call: HTTP %d", status))
}

// Failed is an authoritative failure with a synthesized isError result.
func Failed(text string) sink.InvokeResult {
	return sink.InvokeResult{Result: wire.ErrorResult(text), Outcome: sink.OutcomeFailed}
}

// NotSent is a call that never left, with a synthesized isError result saying so (the sink
// records it FAILED: nothing can have happened).
func NotSent(text string) sink.InvokeResult {
	return sink.InvokeResult{Result: wire.ErrorResult(text), Outcome: sink.OutcomeNotSent}
}

// SafeCause describes an upstream failure for the log without anything the upstream wrote: an
// error answer or an error page may quote the call's arguments (docs/architecture.md "Privacy"), so
// only its code or HTTP status is kept; transport errors (dial, reset, timeout) are kept whole.
func SafeCause(err error, a *Attempt) string {
	if we := RPCError(err); we != nil {
		return fmt.Sprintf("JSON-RPC error %d from the upstream", we.Code)
	}
	if st := a.status.Load(); st >= 300 {
		return fmt.Sprintf("HTTP %d from the upstream", st)
	}
	return err.Error()
}
