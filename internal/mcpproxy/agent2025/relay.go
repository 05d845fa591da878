package agent2025

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/logfield"
	"github.com/actgate/actgate/internal/mcpproxy/answerstream"
	"github.com/actgate/actgate/internal/mcpproxy/eventlog"
	"github.com/actgate/actgate/internal/mcpproxy/toolcall"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// maxRelayed bounds the agent requests one session has relayed and not yet answered: the map
// that lets the agent's cancellation reach the upstream (bridge.relayed). A request beyond it
// is refused with wire.CodeTooManyRequests, never dropped silently.
const maxRelayed = 1024

// hopByHop are the agent requests and notifications the agent-side SDK server answers itself:
// the session's own lifecycle (initialize, notifications/initialized). tools/call has its own
// path (serveToolsCall). ping and logging/setLevel are relayed: the upstream answers them, and
// the log messages it then sends are forwarded as they come (the gate's session filters only
// the messages it logs itself, and it logs none).
var hopByHop = map[string]bool{
	wire.MethodInitialize:       true,
	"notifications/initialized": true,
	wire.MethodCallTool:         true,
}

// serveRelay relays an agent's request or notification that the gate does not decide to the
// upstream session as the agent wrote it (its method, params and _meta, byte for byte; only
// the JSON-RPC id is the proxy's own on the upstream leg) and answers with the upstream's
// result or error as the upstream wrote them: resources/*, prompts/*, completion/complete,
// tasks/*, methods the proxy does not know, and tools/list (whose result gets the gate's
// additions, toolcall.AugmentToolsRaw). It takes the same plain requests as serveToolsCall (an
// initialized session below 2026-07-28 with its own Mcp-Protocol-Version) on a stateful
// upstream session; it returns false, having written nothing, for everything else, which the
// SDK's handler answers.
//
// The agent's notifications/cancelled of a relayed request or a direct tools/call is sent to
// the upstream with the upstream leg's id; the revision's other client notifications (progress,
// roots/list_changed, tasks/status) are relayed as they are, and any other notification — a
// request's method without an id included — is refused (wire.NotificationRefusal).
func (p *Handler) serveRelay(w http.ResponseWriter, r *http.Request, b *bridge, msg jsonrpc.Message) bool {
	req, ok := msg.(*jsonrpc.Request)
	if !ok {
		return false // responses to the server session's own requests are the SDK's
	}
	if hopByHop[req.Method] {
		return false // tools/call without an id included: the SDK's handler refuses it (400)
	}
	if !req.IsCall() && !statefulClientNotifications[req.Method] {
		b.p.refuseNotification(w, req.Method, b.version) // never relayed (refuseNotification below)
		return true
	}
	cs, err := b.upstream(r.Context())
	if err != nil {
		return false // the SDK path reports it with its own error
	}
	version, ok := directVersion(cs)
	if !ok {
		return false
	}
	if !req.IsCall() {
		if req.Method == wire.NotifyCancelled && !b.cancelUpstream(r.Context(), cs, version, req.Params) {
			return false // not a request the relay carried: the SDK's own to cancel
		}
		if req.Method != wire.NotifyCancelled {
			fwd := &jsonrpc.Request{Method: req.Method, Params: req.Params}
			if err := b.postMessage(r.Context(), cs.ID(), version, fwd); err != nil {
				b.p.log.Info("Notification not delivered upstream", "method", logfield.Bound(req.Method), "error", err.Error())
			}
		}
		w.WriteHeader(http.StatusAccepted)
		return true
	}
	if !b.begin(req.ID) {
		wire.WriteRPCError(w, http.StatusBadRequest, req.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
			Message: fmt.Sprintf("duplicate in-flight request ID %v", req.ID.Raw())})
		return true
	}
	stream := answerstream.New(w, answerstream.Options{Session: &b.streams})
	b.p.runDetachable(r, stream, func(ctx context.Context) {
		defer stream.Finish()
		resp := func() *jsonrpc.Response {
			defer b.end(req.ID)
			return b.relay(answerstream.With(ctx, stream), cs, version, req)
		}()
		out, err := jsonrpc.EncodeMessage(resp)
		if err != nil {
			b.p.log.Error(err, "Response could not be encoded", "method", logfield.Bound(req.Method))
			if !stream.IsStarted() {
				http.Error(w, "actgate: response could not be encoded", http.StatusInternalServerError)
			}
			return
		}
		stream.Answer(out)
	})
	return true
}

// relay sends req upstream under an id of the proxy's own and returns the upstream's answer
// under the agent's id.
func (b *bridge) relay(ctx context.Context, cs *mcp.ClientSession, version string, req *jsonrpc.Request) *jsonrpc.Response {
	upID, _ := jsonrpc.MakeID("actgate-" + strconv.FormatUint(wire.CallSeq.Add(1), 10))
	if !b.track(req.ID, upID) {
		return &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: wire.CodeTooManyRequests,
			Message: fmt.Sprintf("actgate: more than %d requests in flight on this session", maxRelayed)}}
	}
	defer b.untrack(req.ID)
	if resp := b.foreignTaskRequest(req); resp != nil { // taskowners.go
		return resp
	}
	answer, err := b.exchange(ctx, cs, version, &jsonrpc.Request{ID: upID, Method: req.Method, Params: req.Params})
	if err != nil {
		if errors.Is(err, errSessionGone) {
			b.drop(cs) // logged there
		} else {
			b.p.log.Error(err, "Upstream request failed", "method", logfield.Bound(req.Method))
		}
		return &jsonrpc.Response{ID: req.ID, Error: b.unavailable()}
	}
	if strings.HasPrefix(req.Method, "tasks/") {
		b.observeTaskAnswer(req, answer) // tasks.go
		b.p.owners.OwnOnly(b.agent, req.Method, answer)
	}
	if req.Method == wire.MethodListTools && answer.Error == nil {
		raw, err := toolcall.GateTools(ctx, b.p.cfg.Gate, b.p.cfg.Server, answer.Result, wire.FirstPage(req.Params), b.listed)
		if err != nil {
			b.p.log.Error(err, "Upstream tools/list result not understood")
			return &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: wire.CodeInternalError, Message: "actgate: the upstream's tools/list result is not a list of tools"}}
		}
		answer.Result = raw
		answerstream.Of(ctx).GateAnswer() // the gate's additions: not the upstream's bytes
	}
	return &jsonrpc.Response{ID: req.ID, Result: answer.Result, Error: answer.Error}
}

// errSessionGone: the upstream answered 404, the session is over (MCP streamable HTTP: the
// client starts a new one).
var errSessionGone = errors.New("mcpproxy: the upstream session is gone (HTTP 404)")

// exchange POSTs one request on the upstream session and reads its response: a JSON body, or
// an event stream whose earlier messages are handled as for a tools/call (readStream). An
// error status with a JSON-RPC response body gives that response (the upstream's own refusal).
func (b *bridge) exchange(ctx context.Context, cs *mcp.ClientSession, version string, req *jsonrpc.Request) (*jsonrpc.Response, error) {
	body, err := jsonrpc.EncodeMessage(req)
	if err != nil {
		return nil, err
	}
	resp, err := b.post(ctx, cs.ID(), version, body)
	if err != nil {
		return nil, err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case resp.StatusCode == http.StatusNotFound:
		_ = resp.Body.Close()
		return nil, errSessionGone
	case mt == wire.MediaJSON:
		defer resp.Body.Close()
		answer, err := wire.ReadJSONAnswer(resp.Body, req.ID)
		if err != nil && (resp.StatusCode < 200 || resp.StatusCode > 299) {
			return nil, fmt.Errorf("mcpproxy: upstream answered %s with HTTP %d", logfield.Bound(req.Method), resp.StatusCode)
		}
		return answer, err
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		_ = resp.Body.Close()
		return nil, fmt.Errorf("mcpproxy: upstream answered %s with HTTP %d", logfield.Bound(req.Method), resp.StatusCode)
	case mt == wire.MediaSSE:
		answerstream.Of(ctx).Start() // the agent's answer follows the server's framing
		answer, err := b.readStream(ctx, cs.ID(), version, resp.Body, req.ID)
		if err != nil {
			_ = resp.Body.Close()
			return nil, err
		}
		go func() { // the stream's end, so that the connection goes back to the pool
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}()
		return answer, nil
	}
	_ = resp.Body.Close()
	return nil, fmt.Errorf("mcpproxy: upstream answered %s with content type %q", logfield.Bound(req.Method), mt)
}

// track records that the agent's request id is carried upstream as upID (for the agent's
// cancellation); false when the session has maxRelayed requests in flight already.
func (b *bridge) track(agentID, upID jsonrpc.ID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.relayed == nil {
		b.relayed = make(map[jsonrpc.ID]jsonrpc.ID)
	}
	if len(b.relayed) >= maxRelayed {
		return false
	}
	b.relayed[agentID] = upID
	b.legs.add(upID, agentID)
	return true
}

// legs remembers, for the session's last requests carried upstream, the agent's id of each
// upstream leg's id: a response the upstream replays on a relayed resumption (a GET with
// Last-Event-ID, getstream.go) goes to the agent under the agent's id, as it would directly.
// Relaying it settles nothing: the request's own answer was given (or is being read) where it
// was sent. A leg's id is "actgate-N" (wire.CallSeq); the ring holds it at N mod maxRelayed, so a
// leg is kept until one of the session's later legs takes its place (at most maxRelayed legs,
// one store per request, no hashing on the hot path).
type legs struct {
	ring []leg // maxRelayed once the session carries a request
}

type leg struct {
	n     uint64 // the N of the upstream leg's id; 0: none
	agent jsonrpc.ID
}

// add records one leg. The caller holds bridge.mu.
func (l *legs) add(up, agent jsonrpc.ID) {
	n, ok := legSeq(up)
	if !ok {
		return
	}
	if l.ring == nil {
		l.ring = make([]leg, maxRelayed)
	}
	l.ring[n%maxRelayed] = leg{n: n, agent: agent}
}

// legSeq returns the N of an upstream leg's id "actgate-N"; false for any other id.
func legSeq(id jsonrpc.ID) (uint64, bool) {
	s, ok := id.Raw().(string)
	if !ok {
		return 0, false
	}
	num, ok := strings.CutPrefix(s, "actgate-")
	if !ok || !eventlog.Decimal(num) || num[0] == '0' { // as the gate writes N: no leading zero
		return 0, false
	}
	n, err := strconv.ParseUint(num, 10, 64)
	return n, err == nil && n > 0
}

// legAgent returns the agent's id of the request carried upstream as up; false for an id the
// gate did not send (or no longer remembers).
func (b *bridge) legAgent(up jsonrpc.ID) (jsonrpc.ID, bool) {
	n, ok := legSeq(up)
	if !ok {
		return jsonrpc.ID{}, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.legs.ring == nil {
		return jsonrpc.ID{}, false
	}
	l := b.legs.ring[n%maxRelayed]
	return l.agent, l.n == n
}

func (b *bridge) untrack(agentID jsonrpc.ID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if upID, ok := b.relayed[agentID]; ok {
		delete(b.cancelled, upID)
	}
	delete(b.relayed, agentID)
}

// wasCancelled reports whether the agent cancelled the request carried upstream as upID: the
// upstream then ends its stream without a response, and the proxy does not resume it.
func (b *bridge) wasCancelled(upID jsonrpc.ID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cancelled[upID]
}

// cancelUpstream sends the agent's notifications/cancelled upstream for a request the proxy
// carries, with the upstream leg's id and the agent's reason; false when params name no such
// request.
func (b *bridge) cancelUpstream(ctx context.Context, cs *mcp.ClientSession, version string, params json.RawMessage) bool {
	agentID, reason, ok := wire.ParseCancelled(params)
	if !ok {
		return false
	}
	b.mu.Lock()
	upID, ok := b.relayed[agentID]
	if ok {
		if b.cancelled == nil {
			b.cancelled = make(map[jsonrpc.ID]bool)
		}
		b.cancelled[upID] = true // at most one per entry of relayed
	}
	b.mu.Unlock()
	if !ok {
		return false
	}
	out, err := json.Marshal(&mcp.CancelledParams{RequestID: upID.Raw(), Reason: reason})
	if err != nil {
		return false
	}
	if err := b.postMessage(context.WithoutCancel(ctx), cs.ID(), version, &jsonrpc.Request{Method: wire.NotifyCancelled, Params: out}); err != nil {
		b.p.log.Info("Cancellation not delivered upstream", "error", err.Error())
	}
	return true
}

// statefulClientNotifications are the client notifications of the 2025 revisions (MCP
// 2025-11-25 schema, ClientNotification): cancellation, the handshake's end, progress of a
// request the server sent, a changed roots list and a task's status (the tasks utility).
// Client notifications: what an agent may send without an id. A JSON-RPC notification gets no
// answer, so one whose method is a request's (a tools/call without an id) would reach an
// upstream undecided — no act, no journal, no receipt — and an upstream that dispatches on the
// method alone would run it. The gate relays only the notifications the revision defines for a
// client and refuses any other before anything is relayed: HTTP 400 (as the streamable HTTP
// transport answers input the server does not accept), a JSON-RPC error without an id, -32600,
// EF_NOTIFICATION_INVALID (docs/architecture.md "What passes through").
var statefulClientNotifications = map[string]bool{
	wire.NotifyCancelled: true, wire.NotifyInitialized: true, wire.NotifyProgress: true, wire.NotifyRootsChanged: true, wire.NotifyTaskStatus: true,
}

// refuseNotification writes the refusal of a notification of method on revision.
func (p *Handler) refuseNotification(w http.ResponseWriter, method, revision string) {
	p.log.Info("Agent notification refused", "method", logfield.Bound(method), "code", ef.EFNotificationInvalid, "revision", revision)
	wire.WriteRPCError(w, http.StatusBadRequest, jsonrpc.ID{}, wire.NotificationRefusal(method, revision))
}
