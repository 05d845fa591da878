package agent2025

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/logfield"
	"github.com/actgate/actgate/internal/mcpproxy/admission"
	"github.com/actgate/actgate/internal/mcpproxy/answerstream"
	"github.com/actgate/actgate/internal/mcpproxy/tasks"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
	"github.com/actgate/actgate/internal/tracing"
)

// servePOST reads an agent's JSON POST, refuses a body that is not exactly one JSON value, and
// answers a plain tools/call through the direct path (serveToolsCall). It returns false, with
// the body readable again, for everything it leaves to the SDK's handler; requests the SDK
// refuses for their headers (Host, Content-Type, Accept, Last-Event-ID) are left to it unread.
//
// The SDK's decoder reads the first JSON value of a body and ignores what follows it, so
// `{...tools/call...}0` ran as a tools/call (FuzzAgentMessage found it). Input that is not
// well-formed is never repaired into an action (envelope-04 §12.7): such a body is refused here,
// on both paths, with 400 as the SDK refuses JSON it cannot parse.
func (p *Handler) servePOST(w http.ResponseWriter, r *http.Request) bool {
	if r.Header.Get(wire.HeaderLastEventID) != "" || admission.Rebinding(r) {
		return false
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != wire.MediaJSON {
		return false
	}
	if jsonOK, streamOK := wire.Accepts(r.Header.Values("Accept")); !jsonOK || !streamOK {
		return false
	}
	var buf bytes.Buffer
	_, err := buf.ReadFrom(io.LimitReader(r.Body, mcp.DefaultMaxRequestBodyBytes+1))
	body := buf.Bytes()
	if err != nil || len(body) > mcp.DefaultMaxRequestBodyBytes {
		// Give the SDK the request as it came (it refuses an oversized body with 413): what was
		// read, then the rest.
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
		return false
	}
	if len(body) > 0 && !json.Valid(body) {
		http.Error(w, "malformed payload: the body is not one well-formed JSON value", http.StatusBadRequest)
		return true
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if refuseSessionless(w, r, body) {
		return true
	}
	if p.cfg.SDKOnly {
		return false
	}
	b, exact, handled := p.directBridge(w, r)
	if b == nil {
		return handled
	}
	msg, err := wire.DecodeMessage(body) // the SDK's decoder, with its depth limit
	if err != nil {
		return false
	}
	if resp, ok := msg.(*jsonrpc.Response); ok && b.deliver(resp) {
		w.WriteHeader(http.StatusAccepted) // the agent's answer to a request put on an answer stream
		return true
	}
	return (exact && p.serveToolsCall(w, r, b, msg)) || p.serveRelay(w, r, b, msg)
}

// refuseSessionless answers a POSTed request of a stateful revision that carries no
// Mcp-Session-Id and is not initialize: HTTP 400 with a JSON-RPC invalid-request error (MCP
// streamable HTTP: every request after initialize carries the session id). The SDK's handler
// would answer such a request HTTP 200 with a JSON-RPC error of code 0. Requests of the
// sessionless revision (2026-07-28: the version in Mcp-Protocol-Version or in params._meta,
// or server/discover) are left to the SDK.
func refuseSessionless(w http.ResponseWriter, r *http.Request, body []byte) bool {
	if r.Header.Get(wire.HeaderSessionID) != "" || r.Header.Get(wire.HeaderProtocolVersion) >= wire.VersionStandardHeaders {
		return false
	}
	msg, err := wire.DecodeMessage(body)
	if err != nil {
		return false
	}
	req, ok := msg.(*jsonrpc.Request)
	if !ok || req.Method == wire.MethodInitialize || req.Method == wire.MethodDiscover {
		return false
	}
	var params struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(req.Params, &params) == nil {
		if _, ok := params.Meta["protocolVersion"]; ok {
			return false
		}
	}
	const msgText = "Bad Request: Mcp-Session-Id header is required (initialize first)"
	if !req.IsCall() {
		http.Error(w, msgText, http.StatusBadRequest)
		return true
	}
	wire.WriteRPCError(w, http.StatusBadRequest, req.ID, &jsonrpc.Error{Code: wire.CodeInvalidRequest, Message: msgText})
	return true
}

// directBridge returns the bridge of the request's session when the direct paths may answer
// it: a session this proxy bridged, below 2026-07-28, of the agent that opened it, with a
// stateful version the SDK's handler would accept in Mcp-Protocol-Version (or none, which it
// reads as 2025-03-26); exact reports that it is the session's own negotiated version, which
// the direct tools/call path requires. Otherwise it returns nil, and handled reports whether it
// wrote the refusal (another agent's request on the session, refused as the SDK's handler
// refuses it).
func (p *Handler) directBridge(w http.ResponseWriter, r *http.Request) (b *bridge, exact, handled bool) {
	b = p.bridgeByID(r.Header.Get(wire.HeaderSessionID))
	if b == nil || b.version == "" || b.version >= wire.VersionStandardHeaders {
		return nil, false, false
	}
	v := r.Header.Get(wire.HeaderProtocolVersion)
	if v != "" && !wire.StatefulVersions[v] {
		return nil, false, false
	}
	if b.agent != p.requestAgent(r.Context()) {
		http.Error(w, "session user mismatch", http.StatusForbidden)
		return nil, false, true
	}
	return b, v == b.version, false
}

// serveToolsCall answers the agent's tools/call POST on an initialized session itself, without
// the SDK's server session: it decodes the request, runs bridge.callTool (the same code the SDK
// path reaches through Handler.receive) and writes the JSON-RPC response as the SDK's handler does
// in its JSONResponse mode. The SDK path costs a tools/call several goroutine hand-offs and a
// reflective decode and encode, the larger part of the gate's overhead as a separate process
// (docs/performance.md "The MCP proxy's direct paths").
//
// It takes only the plainest request, one the SDK would accept as it is: besides servePOST's
// checks, a session this proxy bridged, the session's own negotiated protocol version (below
// 2026-07-28) in Mcp-Protocol-Version, and a body of one JSON-RPC request with an id, method
// tools/call and object params that decode as the SDK decodes them (no per-request
// protocolVersion in _meta). Anything else returns false, and the SDK's handler answers it with
// its own checks and errors. TestDirectAgentPathMatchesSDK compares both paths on the same
// requests.
func (p *Handler) serveToolsCall(w http.ResponseWriter, r *http.Request, b *bridge, msg jsonrpc.Message) bool {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || !req.IsCall() || req.Method != wire.MethodCallTool || !wire.IsObject(req.Params) {
		return false // absent or null params included: the SDK has its own answers
	}
	var params mcp.CallToolParamsRaw
	if wire.Unmarshal(req.Params, &params) != nil {
		return false
	}
	if _, ok := params.Meta["protocolVersion"]; ok {
		return false // SEP-2575 per-request version: the SDK validates it
	}
	if !b.begin(req.ID) {
		// As the SDK answers a call whose id is in flight on the session.
		wire.WriteRPCError(w, http.StatusBadRequest, req.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
			Message: fmt.Sprintf("duplicate in-flight request ID %v", req.ID.Raw())})
		return true
	}
	p.directAgent.Add(1)
	stream := answerstream.New(w, answerstream.Options{Lazy: true, Session: &b.streams})
	if !b.streams.Resumable.Load() && b.answered.Load() {
		// The hot path: the call runs on the handler's goroutine (handing every call to
		// another goroutine costs the gate about 50 µs of CPU per call). An upstream that
		// answered a call of the session with no event ids does not close one for the agent to
		// resume.
		p.toolsCall(r.Context(), w, r, b, req, &params, stream)
		return true
	}
	// The upstream's streams are resumable, or not known yet (the session's first call): when
	// it closes a call's stream before the response (MCP 2025-11-25 streamable HTTP: polling
	// after an event with an id; docs/api.md "Per transport feature"), the agent's is closed
	// too and the call goes on (runDetachable): the gate resumes the upstream's, records the
	// outcome once, and logs the rest for the agent's GET with Last-Event-ID (resume.go).
	p.runDetachable(r, stream, func(ctx context.Context) { p.toolsCall(ctx, w, r, b, req, &params, stream) })
	return true
}

// toolsCall runs one direct-path tools/call and answers it on stream.
func (p *Handler) toolsCall(ctx context.Context, w http.ResponseWriter, r *http.Request, b *bridge, req *jsonrpc.Request,
	params *mcp.CallToolParamsRaw, stream *answerstream.Stream) {
	defer stream.Finish()
	res, err := func() (mcp.Result, error) {
		defer b.end(req.ID)
		ctx := answerstream.With(ctx, stream)
		if p.tracer != nil {
			ctx = tracing.ExtractAgent(ctx, r.Header)
		}
		ctx = context.WithValue(ctx, agentRequestKey{}, req.ID) // for the agent's cancellation (callDirect)
		// A task-augmented call takes a place among the session's tasks (tasks.go).
		if task := tasks.Param(req.Params); task != nil {
			if !b.reserveTask() {
				return b.taskLimited(params.Name)
			}
			defer b.unreserveTask()
			ctx = withTask(ctx, task)
		}
		return b.callTool(ctx, &mcp.CallToolRequest{Session: b.ss, Params: params})
	}()
	var result json.RawMessage
	if err == nil {
		result, err = wire.MarshalNoEscape(res)
	}
	out, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: req.ID, Result: result, Error: err})
	if err != nil {
		b.p.log.Error(err, "Response could not be encoded", "tool", logfield.Bound(params.Name))
		if !stream.IsStarted() { // an answer that is not an event stream is never detached
			http.Error(w, "actgate: response could not be encoded", http.StatusInternalServerError)
		}
		return
	}
	stream.Answer(out)
}

// agentRequestKey is the context key of the agent's JSON-RPC id of a direct-path tools/call.
type agentRequestKey struct{}
