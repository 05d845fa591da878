package agent2025

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/logfield"
	"github.com/actgate/actgate/internal/mcpproxy/answerstream"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// directVersion returns the protocol version of cs's session when a tools/call can be sent on
// it by callDirect: a session initialized at a version below 2026-07-28. A session the
// upstream gave no id (a server serving the 2025 revisions without sessions) is carried the
// same way, its requests without Mcp-Session-Id, so that what the upstream sends on a call's
// stream goes on the agent's answer stream of that call.
func directVersion(cs *mcp.ClientSession) (string, bool) {
	ir := cs.InitializeResult()
	if ir == nil || ir.ProtocolVersion == "" || ir.ProtocolVersion >= wire.VersionStandardHeaders {
		return "", false
	}
	return ir.ProtocolVersion, true
}

// callDirect sends one tools/call on the upstream session cs as an HTTP POST of its own, through
// the proxy's HTTP client (so the credential and the attempt's trace apply as for the SDK's
// POST), and reads the answer on the calling goroutine. The SDK client would hand the request
// and its answer across four goroutines; this is the same exchange, as MCP streamable HTTP
// defines it, without them.
//
// The answer is either one JSON-RPC response (application/json) or an event stream that may
// carry, before the response, the upstream's notifications (forwarded to the agent session, as
// the SDK client's handlers do: bridge.client) and requests (sampling, elicitation, roots/list,
// ping: answered as the SDK client would, by asking the agent, and POSTed back on the session).
// A stream the upstream ends after an event with an id, before the response, is resumed
// (readStream); one that breaks otherwise, or whose resumption fails, leaves the call's outcome
// unknown (upstream.Classify: INDETERMINATE), never retried.
//
// release is called once the answer's body is finished with, which for an event stream can be
// after callDirect returns: the stream's end is read in the background, so that the connection
// goes back to the pool instead of being cut by the call's context.
func (b *bridge) callDirect(ctx context.Context, cs *mcp.ClientSession, version string, params any, release func()) (*mcp.CallToolResult, json.RawMessage, error) {
	b.p.directUpstream.Add(1)
	id, _ := jsonrpc.MakeID("actgate-" + strconv.FormatUint(wire.CallSeq.Add(1), 10))
	if agentID, ok := ctx.Value(agentRequestKey{}).(jsonrpc.ID); ok && agentID.IsValid() && b.track(agentID, id) {
		defer b.untrack(agentID) // the agent's cancellation reaches the upstream (relay.go)
	}
	res, raw, rest, err := b.sendCall(ctx, cs, version, id, params)
	// Judged before release cancels ctx: only a call its deadline ended was abandoned.
	abandoned := err != nil && ctx.Err() != nil
	if f, ok := rest.(interface{ finished() bool }); ok && f.finished() {
		// The stream's end came with the response (upstream.SyncTransport read it already, as for
		// about three calls in four in BenchmarkToolsCallRoundTripServe): nothing is left to
		// wait for, and no goroutine is started for it.
		_ = rest.Close()
		rest = nil
	}
	if rest != nil {
		// The rest of the event stream (normally just its end) is read in the background, so
		// that the connection goes back to the pool instead of being cut by release.
		go func() {
			_, _ = io.Copy(io.Discard, rest)
			_ = rest.Close()
			release()
		}()
	} else {
		release()
	}
	if abandoned {
		// Tell the upstream, as the SDK client does, so that its handler can stop.
		go b.notifyCancelled(cs.ID(), version, id)
	}
	return res, raw, err
}

// sendCall POSTs the call and reads its answer: the result, decoded and as the upstream wrote
// it (raw). rest, when not nil, is the unread remainder of an event-stream answer, for the
// caller to drain and close.
func (b *bridge) sendCall(ctx context.Context, cs *mcp.ClientSession, version string, id jsonrpc.ID,
	params any) (res *mcp.CallToolResult, raw json.RawMessage, rest io.ReadCloser, err error) {
	praw, err := wire.MarshalNoEscape(params)
	if err != nil {
		return nil, nil, nil, err
	}
	body, err := jsonrpc.EncodeMessage(&jsonrpc.Request{ID: id, Method: wire.MethodCallTool, Params: praw})
	if err != nil {
		return nil, nil, nil, err
	}
	resp, err := b.post(ctx, cs.ID(), version, body)
	if err != nil {
		return nil, nil, nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		_ = resp.Body.Close()
		return nil, nil, nil, fmt.Errorf("mcpproxy: upstream answered tools/call with HTTP %d", resp.StatusCode)
	}
	var answer *jsonrpc.Response
	switch mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt {
	case wire.MediaJSON:
		answer, err = wire.ReadJSONAnswer(resp.Body, id)
		_ = resp.Body.Close()
	case wire.MediaSSE:
		answerstream.Of(ctx).Start() // the agent's answer follows the server's framing
		answer, err = b.readStream(ctx, cs.ID(), version, resp.Body, id)
		if err != nil {
			_ = resp.Body.Close()
		} else {
			rest = resp.Body
		}
	default:
		_ = resp.Body.Close()
		err = fmt.Errorf("mcpproxy: upstream answered tools/call with content type %q", mt)
	}
	if err != nil {
		return nil, nil, nil, err
	}
	if !b.answered.Load() {
		b.answered.Store(true) // the session's streams have shown whether they carry ids
	}
	if answer.Error != nil {
		var we *jsonrpc.Error
		if errors.As(answer.Error, &we) {
			return nil, nil, rest, we
		}
		return nil, nil, rest, answer.Error
	}
	if len(answer.Result) == 0 {
		answerstream.Of(ctx).GateAnswer()
		return nil, nil, rest, errors.New("mcpproxy: upstream tools/call result: empty JSON")
	}
	res, err = wire.DecodeCallToolResult(answer.Result)
	if err != nil {
		answerstream.Of(ctx).GateAnswer() // the agent's answer is the gate's, not this response
		return nil, nil, rest, fmt.Errorf("mcpproxy: upstream tools/call result: %w", err)
	}
	return res, answer.Result, rest, nil
}

// post sends one JSON-RPC message on upstream session sid.
func (b *bridge) post(ctx context.Context, sid, version string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.p.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	h := req.Header
	h.Set("Content-Type", wire.MediaJSON)
	h.Set("Accept", "application/json, text/event-stream")
	if sid != "" { // a sessionless upstream (directVersion)
		h.Set(wire.HeaderSessionID, sid)
	}
	h.Set(wire.HeaderProtocolVersion, version)
	return b.p.direct.Do(req)
}

// postMessage sends a response or notification upstream; the upstream answers 202 with no body.
func (b *bridge) postMessage(ctx context.Context, sid, version string, msg jsonrpc.Message) error {
	body, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	resp, err := b.post(ctx, sid, version, body)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}

// notifyCancelled sends notifications/cancelled for the call id on upstream session sid.
func (b *bridge) notifyCancelled(sid, version string, id jsonrpc.ID) {
	params, err := json.Marshal(&mcp.CancelledParams{RequestID: id.Raw(), Reason: "actgate: the call timed out"})
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.p.cfg.ConnectTimeout)
	defer cancel()
	if err := b.postMessage(ctx, sid, version, &jsonrpc.Request{Method: "notifications/cancelled", Params: params}); err != nil {
		b.p.log.Info("Cancellation not delivered upstream", "error", err.Error())
	}
}

// maxResumesWithoutProgress bounds the resumptions of an upstream answer stream that bring no
// new event (MCP streamable HTTP, resumability): an upstream that keeps closing the stream
// without progress ends the wait as the SDK client's reconnection does; one that makes
// progress is bounded by ctx.
const maxResumesWithoutProgress = 3

// defaultResumeDelay is the wait before resuming an upstream stream that closed without a
// retry field; maxResumeDelay bounds an upstream's retry field.
const (
	defaultResumeDelay = time.Second
	maxResumeDelay     = time.Minute
)

// streamState is what the proxy remembers of an upstream answer stream across resumptions: the
// last event id it saw and the reconnection delay of the last retry field.
type streamState struct {
	lastID string
	retry  time.Duration // 0: none seen
}

// readStream reads a text/event-stream answer until the response to id, handling the
// upstream's notifications and requests before it. Events other than "message" (and priming
// events without data) are skipped, as by the SDK client. When the upstream ends the stream
// before the response after an event with an id (MCP streamable HTTP, resumability and
// redelivery: polling) and the agent did not cancel the request, the proxy resumes it as a
// client does: a GET on the session with Last-Event-ID, after the stream's retry delay (or as
// soon as the agent resumes the gate's stream, if sooner), and reads on until the response; a
// resumption that fails ends the read with its error (the outcome of a dispatched call is then
// unknown).
func (b *bridge) readStream(ctx context.Context, sid, version string, body io.Reader, id jsonrpc.ID) (*jsonrpc.Response, error) {
	var st streamState
	answer, err := b.readEvents(ctx, sid, version, body, id, &st)
	for stalled := 0; errors.Is(err, wire.ErrNoAnswer) && st.lastID != "" && !b.wasCancelled(id); {
		if stalled >= maxResumesWithoutProgress {
			return nil, fmt.Errorf("mcpproxy: the upstream's stream ended %d times without a new event: %w", stalled, wire.ErrNoAnswer)
		}
		delay := st.retry
		if delay == 0 {
			delay = defaultResumeDelay
		}
		as := answerstream.Of(ctx)
		as.UpstreamClosed()
		// The agent got the same retry field; its GET resuming the gate's stream ends the
		// wait early, so that the upstream is resumed when the agent is.
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		case <-as.AgentResumed():
			t.Stop()
		}
		resp, gerr := b.resume(ctx, sid, version, st.lastID)
		if gerr != nil {
			return nil, gerr
		}
		before := st.lastID
		answer, err = b.readEvents(ctx, sid, version, resp.Body, id, &st)
		_ = resp.Body.Close()
		if st.lastID == before {
			stalled++
		} else {
			stalled = 0
		}
	}
	return answer, err
}

// resume opens the GET that resumes an upstream stream after the event lastID.
func (b *bridge) resume(ctx context.Context, sid, version, lastID string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.p.cfg.URL, nil)
	if err != nil {
		return nil, err
	}
	h := req.Header
	h.Set("Accept", wire.MediaSSE)
	if sid != "" {
		h.Set(wire.HeaderSessionID, sid)
	}
	h.Set(wire.HeaderProtocolVersion, version)
	h.Set(wire.HeaderLastEventID, lastID)
	resp, err := b.p.direct.Do(req)
	if err != nil {
		return nil, fmt.Errorf("mcpproxy: resuming the upstream's stream: %w", err)
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if resp.StatusCode != http.StatusOK || mt != wire.MediaSSE {
		_ = resp.Body.Close()
		return nil, fmt.Errorf("mcpproxy: resuming the upstream's stream: HTTP %d, content type %q", resp.StatusCode, mt)
	}
	return resp, nil
}

// readEvents reads one upstream event stream (readStream), recording its event ids and retry
// field in st.
func (b *bridge) readEvents(ctx context.Context, sid, version string, body io.Reader, id jsonrpc.ID, st *streamState) (*jsonrpc.Response, error) {
	r := wire.StreamReaders.Get().(*bufio.Reader)
	r.Reset(body)
	defer func() { // nothing read keeps a reference to r's buffer: events are copied into data
		r.Reset(nil)
		wire.StreamReaders.Put(r)
	}()
	as := answerstream.Of(ctx)
	// carried: the event last ended had an id (upstreamEvent holds it for its carrier); on a
	// resumed stream, the first event is told too, so that no id of the last stream is left.
	carried := st.lastID != ""
	answer, err := wire.ScanEvents(r, id, wire.EventHooks{
		Field: func(field, value []byte) bool {
			switch string(field) {
			case "id":
				// An id with NUL is ignored (WHATWG server-sent events); one beyond
				// wire.MaxEventID is not one the proxy resumes with.
				if len(value) <= wire.MaxEventID && bytes.IndexByte(value, 0) < 0 {
					st.lastID = string(value)
					return true
				}
			case "retry":
				if ms, err := strconv.ParseUint(string(value), 10, 32); err == nil {
					st.retry = min(time.Duration(ms)*time.Millisecond, maxResumeDelay)
					as.UpstreamRetry(st.retry)
				}
			}
			return false
		},
		End: func(hasID bool, data []byte) {
			// A stream without ids costs nothing here: only an event with one, or the one
			// after it (whose carrier must not take the earlier id), is told.
			if hasID || carried {
				as.UpstreamEvent(st.lastID, hasID, hasID && len(bytes.TrimSpace(data)) == 0)
				carried = hasID
			}
		},
		Request: func(m *jsonrpc.Request) { b.fromUpstream(ctx, sid, version, m) },
	})
	if err == nil && carried {
		as.UpstreamResponse() // the agent's answer carries the response event's id
	}
	return answer, err
}

// fromUpstream handles a message the upstream sent on a call's stream: a notification is
// forwarded to the agent session; a request is answered as the SDK client would answer it
// (bridge.client) and the answer POSTed upstream.
func (b *bridge) fromUpstream(ctx context.Context, sid, version string, req *jsonrpc.Request) {
	if !req.IsCall() && req.Method == wire.NotifyTaskStatus {
		// Not a method of the SDK's types: on the agent's answer stream as written, or not at
		// all (tasks.go).
		b.taskStatusNotified(req.Params)
		answerstream.Of(ctx).Message(&jsonrpc.Request{Method: req.Method, Params: req.Params})
		return
	}
	if !req.IsCall() {
		if _, ok := notificationParams(req.Method); ok && answerstream.Of(ctx).Message(&jsonrpc.Request{Method: req.Method, Params: req.Params}) {
			return // on the agent's own answer stream, as the upstream wrote it
		}
		if params, ok := notificationParams(req.Method); ok {
			if len(req.Params) == 0 {
				b.notify(ctx, req.Method, nil) // absent params stay absent
				return
			}
			if wire.Unmarshal(req.Params, params) != nil {
				b.p.log.Info("Upstream notification not decodable; not forwarded", "method", logfield.Bound(req.Method))
				return
			}
			b.notify(ctx, req.Method, params)
		}
		return
	}
	resp, ok := b.askOnStream(ctx, req) // on the agent's answer stream, when there is one
	if !ok {
		result, err := b.answer(ctx, req)
		resp = &jsonrpc.Response{ID: req.ID, Error: err}
		if err == nil {
			if resp.Result, err = wire.MarshalNoEscape(result); err != nil {
				resp.Error = &jsonrpc.Error{Code: wire.CodeInternalError, Message: "actgate: answer could not be encoded"}
			}
		}
	}
	if err := b.postMessage(ctx, sid, version, resp); err != nil {
		b.p.log.Info("Answer not delivered upstream", "method", logfield.Bound(req.Method), "error", err.Error())
	}
}

// notificationParams returns the params type of an upstream notification the proxy forwards
// (the SDK client's notification handlers in bridge.client), or false for one it drops.
func notificationParams(method string) (mcp.Params, bool) {
	switch method {
	case wire.NotifyProgress:
		return &mcp.ProgressNotificationParams{}, true
	case wire.NotifyMessage:
		return &mcp.LoggingMessageParams{}, true
	case wire.NotifyToolsChanged:
		return &mcp.ToolListChangedParams{}, true
	case wire.NotifyPromptsChanged:
		return &mcp.PromptListChangedParams{}, true
	case wire.NotifyResourcesChanged:
		return &mcp.ResourceListChangedParams{}, true
	case wire.NotifyResourceUpdated:
		return &mcp.ResourceUpdatedNotificationParams{}, true
	case wire.NotifyElicitationComplete:
		return &mcp.ElicitationCompleteParams{}, true
	}
	return nil, false
}

// answer answers an upstream request as the upstream client (bridge.client) would.
func (b *bridge) answer(ctx context.Context, req *jsonrpc.Request) (any, error) {
	decode := func(v any) error {
		if len(req.Params) == 0 {
			return nil
		}
		if err := wire.Unmarshal(req.Params, v); err != nil {
			return &jsonrpc.Error{Code: wire.CodeInvalidParams, Message: "invalid params: " + wire.Clip(err.Error(), 200)}
		}
		return nil
	}
	switch req.Method {
	case wire.MethodPing:
		return struct{}{}, nil
	case "sampling/createMessage":
		if b.caps.Sampling == nil {
			return nil, &jsonrpc.Error{Code: wire.CodeUnsupportedMethod, Message: "client does not support CreateMessage"}
		}
		var p mcp.CreateMessageWithToolsParams
		if err := decode(&p); err != nil {
			return nil, err
		}
		return b.ss.CreateMessageWithTools(ctx, &p)
	case "elicitation/create":
		if b.caps.Elicitation == nil {
			return nil, &jsonrpc.Error{Code: wire.CodeInvalidParams, Message: "client does not support elicitation"}
		}
		var p mcp.ElicitParams
		if err := decode(&p); err != nil {
			return nil, err
		}
		return b.elicitAgent(ctx, &p)
	case wire.MethodListRoots:
		if b.caps.RootsV2 == nil {
			return &mcp.ListRootsResult{Roots: []*mcp.Root{}}, nil // the SDK client's own (empty) roots
		}
		var p mcp.ListRootsParams
		if err := decode(&p); err != nil {
			return nil, err
		}
		return b.ss.ListRoots(ctx, &p)
	}
	return nil, &jsonrpc.Error{Code: wire.CodeMethodNotFound, Message: "method not found: " + wire.Clip(req.Method, 100)}
}
