package mcpproxy

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
	"go.opentelemetry.io/otel/trace"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/failpoint"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
	"github.com/actgate/actgate/internal/sink"
	"github.com/actgate/actgate/internal/tracing"
)

// upstreamTransport adds the upstream credential to every proxy→upstream request and reports
// the HTTP status of each request to the attempt in its context, if any.
type upstreamTransport struct {
	base       http.RoundTripper
	credential func(ctx context.Context) (string, error)
	origin     string // the only origin the credential is presented to
	trace      bool   // propagate the request context's W3C trace context (traceparent)
}

func (t *upstreamTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.credential != nil && origin(r.URL) == t.origin {
		tok, err := t.credential(r.Context())
		if err != nil {
			if r.Body != nil {
				_ = r.Body.Close()
			}
			return nil, fmt.Errorf("mcpproxy: upstream credential: %w", err)
		}
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+tok)
	}
	if t.trace && trace.SpanContextFromContext(r.Context()).IsValid() {
		if t.credential == nil || origin(r.URL) != t.origin {
			r = r.Clone(r.Context()) // not cloned above
		}
		tracing.Inject(r.Context(), r.Header)
	}
	resp, err := t.base.RoundTrip(r)
	observeInit(r, resp)
	if a, ok := r.Context().Value(attemptKey{}).(*attempt); ok && resp != nil && r.Method == http.MethodPost {
		a.status.Store(int32(resp.StatusCode))
	}
	return resp, err
}

// upstreamClient is an HTTP client on t that never follows a redirect: the destination the
// authority binds (Config.URL) is the only one contacted, so a 3xx answer is returned as it
// is, and classify records it FAILED (redirectStatus).
func upstreamClient(t http.RoundTripper) *http.Client {
	return &http.Client{Transport: t, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// CloseIdleConnections closes the base's idle connections, if it keeps any.
func (t *upstreamTransport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// attempt observes the one HTTP POST that carries a tools/call upstream.
type attempt struct {
	wrote  atomic.Bool  // request headers were written to a connection: bytes may have left
	status atomic.Int32 // HTTP status of the POST's response, 0 if none
}

type attemptKey struct{}

// bind returns ctx carrying a's trace, so that the SDK's POST for this call reports to a.
func (a *attempt) bind(ctx context.Context) context.Context {
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

// classify turns the outcome of one upstream tools/call into the sink's invoke result
// (sink.Invoker contract; docs/architecture.md "tools/call and its outcomes").
func classify(res *mcp.CallToolResult, err error, a *attempt) (sink.InvokeResult, bool) {
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
		return notSent("the upstream could not be reached; the call was not sent"), true
	}
	status := int(a.status.Load())
	if redirectStatus(status) {
		// The bound destination answered that the resource is elsewhere: it did not process
		// the call, and the gate never sends it anywhere else.
		return redirected(status), false
	}
	if refusedStatus(status) {
		// The upstream refused the request itself (authentication, unknown session, bad
		// request): it did not execute the call. 404 means the upstream session is gone.
		return failed(fmt.Sprintf("the upstream refused the call: HTTP %d", status)), status == http.StatusNotFound
	}
	if we := upstreamRPCError(err); we != nil {
		switch we.Code {
		case wire.CodeParseError, wire.CodeInvalidRequest, wire.CodeMethodNotFound, wire.CodeInvalidParams, wire.CodeURLElicitationRequired:
			// A protocol error answered before execution (MCP: unknown tool, invalid
			// arguments; a URL elicitation the request requires before it can proceed).
			return failed(fmt.Sprintf("the upstream refused the call: JSON-RPC error %d: %s", we.Code, wire.Clip(we.Message, 200))), false
		}
		// Any other error answer may come from a handler that had already acted.
		return sink.InvokeResult{Outcome: sink.OutcomeIndeterminate}, false
	}
	return sink.InvokeResult{Outcome: sink.OutcomeIndeterminate}, errors.Is(err, mcp.ErrConnectionClosed)
}

// sdkLocalCodes are the codes of the JSON-RPC errors the SDK makes up itself (transport
// rejection, closing, unknown), which say nothing about what the upstream answered.
var sdkLocalCodes = map[int64]bool{-32001: true, -32003: true, -32004: true, -32005: true}

// upstreamRPCError finds, in err's tree, a JSON-RPC error that is not one of the SDK's own.
func upstreamRPCError(err error) *jsonrpc.Error {
	if err == nil {
		return nil
	}
	if we, ok := err.(*jsonrpc.Error); ok && !sdkLocalCodes[we.Code] {
		return we
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return upstreamRPCError(u.Unwrap())
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if we := upstreamRPCError(e); we != nil {
				return we
			}
		}
	}
	return nil
}

// refusedStatus reports whether an HTTP status says the upstream refused the request without
// processing it: a 4xx other than 408 (timeout) and 429 (which some servers send after
// accepting work).
func refusedStatus(s int) bool {
	return s >= 400 && s < 500 && s != http.StatusRequestTimeout && s != http.StatusTooManyRequests
}

// redirectStatus reports whether an HTTP status is a redirection (RFC 9110 §15.4). The
// proxy's clients never follow one (upstreamClient).
func redirectStatus(s int) bool { return s >= 300 && s < 400 }

// redirected is the FAILED outcome of a call the upstream answered with a redirect: a
// synthesized isError result carrying ef.EFUpstreamRedirect in _meta.
func redirected(status int) sink.InvokeResult {
	text := fmt.Sprintf("%s: the upstream answered the call with HTTP %d, a redirect; "+
		"actgate contacts only the authorised destination, so the call ran nowhere", ef.EFUpstreamRedirect, status)
	raw, _ := json.Marshal(struct {
		Content []wire.TextBlock  `json:"content"`
		IsError bool              `json:"isError"`
		Meta    map[string]string `json:"_meta"`
	}{[]wire.TextBlock{{Type: "text", Text: text}}, true, map[string]string{MetaEFCode: string(ef.EFUpstreamRedirect)}})
	return sink.InvokeResult{Result: raw, Outcome: sink.OutcomeFailed}
}

// failed is an authoritative failure with a synthesized isError result.
func failed(text string) sink.InvokeResult {
	return sink.InvokeResult{Result: wire.ErrorResult(text), Outcome: sink.OutcomeFailed}
}

// notSent is a call that never left, with a synthesized isError result saying so (the sink
// records it FAILED: nothing can have happened).
func notSent(text string) sink.InvokeResult {
	return sink.InvokeResult{Result: wire.ErrorResult(text), Outcome: sink.OutcomeNotSent}
}

// safeCause describes an upstream failure for the log without anything the upstream wrote: an
// error answer or an error page may quote the call's arguments (docs/architecture.md "Privacy"), so
// only its code or HTTP status is kept; transport errors (dial, reset, timeout) are kept whole.
func safeCause(err error, a *attempt) string {
	if we := upstreamRPCError(err); we != nil {
		return fmt.Sprintf("JSON-RPC error %d from the upstream", we.Code)
	}
	if st := a.status.Load(); st >= 300 {
		return fmt.Sprintf("HTTP %d from the upstream", st)
	}
	return err.Error()
}
