package agent2026

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
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/logfield"
	"github.com/actgate/actgate/internal/mcpproxy/answerstream"
	"github.com/actgate/actgate/internal/mcpproxy/rounds"
	"github.com/actgate/actgate/internal/mcpproxy/stateless"
	"github.com/actgate/actgate/internal/mcpproxy/toolcall"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// upstreamMode is what the proxy learned of the upstream's revisions (probeUpstream).
type upstreamMode int

const (
	modeUnknown   upstreamMode = iota
	modeStateless              // the upstream speaks 2026-07-28: one POST per request
	modeStateful               // it does not: one upstream session per agent
)

// statelessState is the stateless path's state of one proxy.
type statelessState struct {
	probe sync.Mutex // one probe at a time
	mu    sync.Mutex
	mode  upstreamMode
	// sessions are the upstream sessions of a stateful upstream, by agent. Agents are the
	// configured ones (Config.Agents authenticates them), so the map is bounded by the
	// configuration, not by anything an agent sends.
	// sessions are keyed by agent and the client capabilities the agent's requests declare
	// (sessionKey): a 2025 upstream learns a client's capabilities once, at initialize. At most
	// maxSessionsPerAgent per agent.
	sessions map[string]*upstreamSession
	open     sync.Mutex // one upstream initialize at a time
	// held are the requests awaiting the agent's input (stateless_rounds.go).
	held heldTable
	// paramHeaders are the Mcp-Param-* headers each tool's inputSchema declares (x-mcp-header),
	// learnt from the upstream's tools/list results: tool → canonical header → the argument's
	// path. A tool listed is present, with the headers it declares (none included).
	paramHeaders map[string]map[string][]string
	// learn is held by the one listing of the upstream's tools for their headers at a time,
	// learnedAt is when the last began (learnTools).
	learn     sync.Mutex
	learnedAt time.Time
	// listens counts each agent's open subscriptions/listen streams of a stateful upstream
	// (listen.go), at most stateless.MaxListensPerAgent.
	listens map[string]int
	// tasks are the running tasks of dispatched calls, by agent (stateless_tasks.go).
	tasks slTaskTable
	// legs are the agents' requests in flight upstream, for their cancellations (notify.go).
	legs legTable
}

// statelessUpstreamVersion is the stateful version the proxy opens upstream sessions with for
// 2026-07-28 agents.
const statelessUpstreamVersion = "2025-11-25"

// Serve answers an agent's MCP 2026-07-28 POST (docs/architecture.md "MCP 2026-07-28
// (stateless)"); it returns false, having read nothing it does not give back, for a request of
// a stateful revision.
func (p *Handler) Serve(w http.ResponseWriter, r *http.Request) bool {
	if r.Body == nil || r.Body == http.NoBody || len(r.Header.Values(wire.HeaderSessionID)) > 0 {
		return false // a session's request: the hot path reads nothing here
	}
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil || !stateless.IsRequest(r.Header, body) {
		return false
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != wire.MediaJSON {
		http.Error(w, "Content-Type must be application/json", http.StatusUnsupportedMediaType)
		return true
	}
	if !json.Valid(body) {
		wire.WriteRPCError(w, http.StatusBadRequest, jsonrpc.ID{}, &jsonrpc.Error{Code: wire.CodeParseError, Message: "actgate: the body is not one well-formed JSON value"})
		return true
	}
	sr, serr := stateless.Parse(r.Header, body)
	if serr != nil {
		var id jsonrpc.ID
		if sr != nil {
			id = sr.Req.ID
		} else if msg, err := wire.DecodeMessage(body); err == nil {
			if req, ok := msg.(*jsonrpc.Request); ok {
				id = req.ID
			}
		}
		p.log.Info("MCP 2026-07-28 request refused", "code", serr.Err.Code, "reason", serr.Err.Message)
		wire.WriteRPCError(w, serr.Status, id, serr.Err)
		return true
	}
	ctx := r.Context()
	agent := p.cfg.AgentOf(ctx)
	if !sr.Req.IsCall() {
		// notify.go: the revision's one client notification, for the agent's own requests.
		if !statelessClientNotifications[sr.Req.Method] {
			p.refuseNotification(w, sr.Req.Method, sr.Version)
			return true
		}
		p.statelessCancel(ctx, agent, sr)
		w.WriteHeader(http.StatusAccepted)
		return true
	}
	mode, err := p.upstreamMode(ctx)
	if err != nil {
		p.log.Info("Upstream unreachable for an MCP 2026-07-28 request", "method", logfield.Bound(sr.Req.Method), "error", err.Error())
		wire.WriteRPCError(w, http.StatusOK, sr.Req.ID, p.unavailableErr())
		return true
	}
	if sr.Req.Method == wire.MethodListen {
		if mode == modeStateful {
			p.serveListen(ctx, w, agent, sr) // listen.go
			return true
		}
		// A relayed listen counts toward the agent's bound too, and lives until the agent or
		// the upstream ends it.
		if !p.sl.takeListen(agent) {
			p.log.Info("MCP 2026-07-28 listen refused: the agent has too many open", "code", ef.EFListenLimit, "limit", stateless.MaxListensPerAgent)
			wire.WriteRPCError(w, http.StatusOK, sr.Req.ID, stateless.ListenLimitErr())
			return true
		}
		defer p.sl.releaseListen(agent)
		_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	}
	// A relayed listen's headers go out when the upstream's do: its body may not come for as
	// long as the listen lives (docs/api.md "MCP 2026-07-28").
	stream := answerstream.New(w, answerstream.Options{Lazy: true, Early: sr.Req.Method == wire.MethodListen})
	defer stream.Finish()
	ctx = answerstream.With(ctx, stream)
	resp, status := p.statelessAnswer(ctx, mode, agent, r.Header, sr, stream)
	out, err := jsonrpc.EncodeMessage(resp)
	if err != nil {
		p.log.Error(err, "Response could not be encoded", "method", logfield.Bound(sr.Req.Method))
		out, _ = jsonrpc.EncodeMessage(&jsonrpc.Response{ID: sr.Req.ID, Error: &jsonrpc.Error{Code: wire.CodeInternalError, Message: "actgate: response could not be encoded"}})
	}
	if status != http.StatusOK && !stream.IsStarted() && !stream.HeadersSent() {
		writeRaw(w, status, out)
		return true
	}
	if isReplay(resp) && !stream.MarkReplayed() {
		p.log.V(1).Info("Replay not marked: the answer's headers are out")
	}
	stream.Answer(out)
	return true
}

// statelessAnswer answers one 2026-07-28 request (not a notification) in the upstream's mode:
// the header checks of a tools/call, the gate's own answers, a continuation or a held exchange
// toward a stateful upstream, the call or relay toward a stateless one.
func (p *Handler) statelessAnswer(ctx context.Context, mode upstreamMode, agent string, hdr http.Header, sr *stateless.Request,
	stream *answerstream.Stream) (*jsonrpc.Response, int) {
	var resp *jsonrpc.Response
	status := http.StatusOK
	var perr *stateless.Error
	if sr.Req.Method == wire.MethodCallTool {
		perr = stateless.CheckParamHeaders(hdr, sr)
		if perr == nil && p.paramsUnmapped(hdr, sr) {
			p.learnTools(mode, agent, sr) // the headers' declarations before anything is forwarded
		}
		if perr == nil {
			perr = p.checkDeclaredParams(hdr, sr)
		}
	}
	call := func(ctx context.Context) (*jsonrpc.Response, int) {
		if sr.Req.Method == wire.MethodCallTool {
			var refused slRefusal
			resp := p.statelessCall(ctx, mode, agent, hdr, sr, &refused)
			if resp.Error != nil && refused.Get() != nil {
				return resp, int(refused.status.Load()) // the upstream's refusal, as it answered it
			}
			return resp, http.StatusOK
		}
		return p.statelessRelay(ctx, mode, agent, hdr, sr)
	}
	_, continues := sr.Params["requestState"]
	switch {
	case perr != nil:
		p.log.Info("MCP 2026-07-28 request refused", "code", perr.Err.Code, "reason", perr.Err.Message)
		resp, status = &jsonrpc.Response{ID: sr.Req.ID, Error: perr.Err}, perr.Status
	case sr.Req.Method == wire.MethodDiscover && mode == modeStateful:
		resp = p.statelessDiscover(ctx, agent, sr)
	case mode == modeStateful && stateless.Removed[sr.Req.Method]:
		e := stateless.MethodNotFound(sr.Req.Method)
		resp, status = &jsonrpc.Response{ID: sr.Req.ID, Error: e.Err}, e.Status
	case continues && (mode == modeStateful || p.gateState(sr)):
		// A stateful upstream returns no requestState: this one continues a round of the gate's.
		// A state under the gate's key is the gate's whatever the upstream's mode is now (the
		// session it was minted on may be gone), so it is never sent on as a new request.
		resp, status = p.continueHeld(ctx, agent, sr, stream)
	case mode == modeStateful:
		resp, status = p.startHeld(ctx, agent, sr, stream, call)
	default:
		resp, status = call(ctx)
	}
	return resp, status
}

func writeRaw(w http.ResponseWriter, status int, out []byte) {
	w.Header().Set("Content-Type", wire.MediaJSON)
	w.WriteHeader(status)
	_, _ = w.Write(out)
}

func (p *Handler) unavailableErr() *jsonrpc.Error {
	return &jsonrpc.Error{Code: wire.CodeInternalError, Message: fmt.Sprintf("actgate: upstream %q unavailable", p.cfg.Server)}
}

// statusError is an upstream HTTP answer without a JSON-RPC response in it.
type statusError struct{ status int }

func (e *statusError) Error() string {
	return fmt.Sprintf("mcpproxy: upstream answered HTTP %d", e.status)
}

// slExchange POSTs one JSON-RPC request upstream with the headers h and returns the response
// to id and the HTTP status. An event-stream answer's notifications before the response are
// written to the agent's answer stream (when ctx has one), as the upstream wrote them; requests
// on it are not answered (2026-07-28 has none, and a stateful upstream session is opened
// without the capabilities they need). An error status with a JSON-RPC response body gives
// that response; without one, a *statusError.
func (p *Handler) slExchange(ctx context.Context, h http.Header, body []byte, id jsonrpc.ID) (*jsonrpc.Response, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return nil, 0, err
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", wire.MediaJSON)
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := p.direct.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 && heldOf(ctx) == nil {
		answerstream.Of(ctx).UpstreamHeaders(mt) // a relayed listen's headers, at once
	}
	switch {
	case mt == wire.MediaJSON:
		answer, err := wire.ReadJSONAnswer(resp.Body, id)
		if err != nil {
			if resp.StatusCode < 200 || resp.StatusCode > 299 {
				return nil, resp.StatusCode, &statusError{resp.StatusCode}
			}
			return nil, resp.StatusCode, err
		}
		return answer, resp.StatusCode, nil
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return nil, resp.StatusCode, &statusError{resp.StatusCode}
	case mt == wire.MediaSSE:
		// A stateful upstream's change notifications are its session's listens' (listen.go):
		// 2026-07-28 delivers them on listen streams only.
		us := upstreamSessionOf(ctx)
		toListens := func(m *jsonrpc.Request) bool {
			if us == nil || m.IsCall() || !stateless.IsChangeNotification(m.Method) {
				return false
			}
			us.hub.publish(m)
			return true
		}
		if hc := heldOf(ctx); hc != nil {
			// A held exchange: the upstream's messages, its requests for input included, go to
			// whichever agent request waits on it now.
			hc.send(heldEvent{start: true})
			answer, err := readEvents(resp.Body, id, func(m *jsonrpc.Request) {
				if toListens(m) {
					return
				}
				if (m.IsCall() || m.Method != wire.NotifyMessage || stateless.LogAllowed(ctx, m.Params)) && !hc.send(heldEvent{msg: m}) && m.IsCall() {
					// No agent request can answer it any more: a 2025 server waits for an answer.
					p.answerUpstream(hc, m.ID, nil, &jsonrpc.Error{Code: wire.CodeInternalError, Message: "actgate: the agent's request for this call has ended"})
				}
			})
			if answer != nil || ctx.Err() != nil {
				// The upstream's part of the exchange is over before its outcome is recorded:
				// a continuation from now on continues nothing, and is refused as such.
				p.abandonWaiting(hc)
			}
			return answer, resp.StatusCode, err
		}
		stream := answerstream.Of(ctx)
		stream.Start() // the agent's answer follows the server's framing
		answer, err := readEvents(resp.Body, id, func(m *jsonrpc.Request) {
			if !toListens(m) && !m.IsCall() && (m.Method != wire.NotifyMessage || stateless.LogAllowed(ctx, m.Params)) {
				stream.Message(relabel(ctx, m))
			}
		})
		return answer, resp.StatusCode, err
	}
	return nil, resp.StatusCode, fmt.Errorf("mcpproxy: upstream answered with content type %q", wire.Clip(mt, 64))
}

// readEvents reads an event stream until the response to id, giving every request or
// notification before it to onRequest.
func readEvents(body io.Reader, id jsonrpc.ID, onRequest func(*jsonrpc.Request)) (*jsonrpc.Response, error) {
	return wire.ScanEvents(bufio.NewReaderSize(body, 4096), id, wire.EventHooks{Request: onRequest})
}

// statelessHeaders are the agent's headers a stateless upstream is given with its message:
// the revision's own (Mcp-Param-* where params is set: on a tools/call only once
// stateless.CheckParamHeaders has tied each to a decided argument).
func statelessHeaders(agent http.Header, sr *stateless.Request, params bool) http.Header {
	h := http.Header{}
	h.Set(wire.HeaderProtocolVersion, sr.Version)
	h.Set(wire.HeaderMethod, sr.Req.Method)
	if sr.Name != "" {
		h.Set(wire.HeaderName, agent.Get(wire.HeaderName))
	}
	if params {
		for k, vs := range agent {
			if strings.HasPrefix(k, wire.HeaderParamPrefix) {
				h[k] = vs
			}
		}
	}
	return h
}

// statelessSend sends one request upstream in the upstream's mode, under an id of the proxy's
// own (newUpID: no id an agent chooses names another's request upstream): as it is to a
// stateless upstream, or on the agent's upstream session of a stateful one (reopened once if
// the upstream forgot it, when retry allows). It returns the response under the agent's id.
// While it is in flight the agent's notifications/cancelled of its id reaches it (trackLeg).
func (p *Handler) statelessSend(ctx context.Context, mode upstreamMode, agent string, h http.Header, sr *stateless.Request,
	params json.RawMessage, retry bool,
) (*jsonrpc.Response, int, error) {
	if mode == modeStateless {
		upID := newUpID()
		body, err := jsonrpc.EncodeMessage(&jsonrpc.Request{ID: upID, Method: sr.Req.Method, Params: params})
		if err != nil {
			return nil, 0, err
		}
		defer p.trackLeg(agent, sr.Req.ID, &upLeg{up: upID, version: sr.Version})()
		ctx = withLegIDs(ctx, upID, sr.Req.ID)
		resp, status, err := p.slExchange(ctx, h, body, upID)
		if resp != nil {
			resp.ID = sr.Req.ID
			resp.Result = relabelResult(ctx, resp.Result)
		}
		return resp, status, err
	}
	for try := 0; ; try++ {
		s, err := p.upstreamSession(ctx, agent, sessionCaps(sr))
		if err != nil {
			return nil, 0, err
		}
		if hc := heldOf(ctx); hc != nil {
			hc.setSession(s)
		}
		upID := newUpID()
		// A task's inputResponses are its request's own.
		sent := forStateful(params, sr.Req.Method == wire.MethodTasksUpdate)
		body, err := jsonrpc.EncodeMessage(&jsonrpc.Request{ID: upID, Method: sr.Req.Method, Params: sent})
		if err != nil {
			return nil, 0, err
		}
		sh := http.Header{}
		if s.id != "" {
			sh.Set(wire.HeaderSessionID, s.id)
		}
		sh.Set(wire.HeaderProtocolVersion, s.version)
		untrack := p.trackLeg(agent, sr.Req.ID, &upLeg{up: upID, session: s})
		resp, status, err := p.slExchange(withUpstreamSession(stateless.WithLogLevel(ctx, sr), s), sh, body, upID)
		untrack()
		if status == http.StatusNotFound {
			p.dropUpstreamSession(s)
			if retry && try == 0 {
				continue
			}
		}
		if resp != nil {
			resp.ID = sr.Req.ID
			if resp.Error == nil {
				resp.Result = stateless.WithCacheHints(sr.Req.Method, stateless.WithResultType(resp.Result))
			} else if werr := (*jsonrpc.Error)(nil); errors.As(resp.Error, &werr) && status >= 200 && status <= 299 {
				status = stateless.ErrorStatus(werr.Code, status)
			}
		}
		return resp, status, err
	}
}

// statelessRelay relays a request the gate does not decide and answers with the upstream's
// answer; tools/list gets the gate's additions.
func (p *Handler) statelessRelay(ctx context.Context, mode upstreamMode, agent string, hdr http.Header, sr *stateless.Request) (*jsonrpc.Response, int) {
	if resp := p.foreignTask(agent, sr); resp != nil {
		return resp, http.StatusOK
	}
	resp, status, err := p.statelessSend(ctx, mode, agent, statelessHeaders(hdr, sr, true), sr, sr.Req.Params, true)
	if err != nil {
		p.log.Info("Upstream request failed", "method", logfield.Bound(sr.Req.Method), "error", err.Error())
		return &jsonrpc.Response{ID: sr.Req.ID, Error: p.unavailableErr()}, http.StatusOK
	}
	p.observeTask2026(agent, sr, resp)
	p.owners.OwnOnly(agent, sr.Req.Method, resp)
	if sr.Req.Method == wire.MethodListTools && resp.Error == nil {
		p.learnParamHeaders(resp.Result)
		raw, err := toolcall.GateTools(ctx, p.cfg.Gate, p.cfg.Server, resp.Result, wire.FirstPage(sr.Req.Params), nil)
		if err != nil {
			p.log.Error(err, "Upstream tools/list result not understood")
			msg := "actgate: the upstream's tools/list result is not a list of tools"
			return &jsonrpc.Response{ID: sr.Req.ID, Error: &jsonrpc.Error{Code: wire.CodeInternalError, Message: msg}}, http.StatusOK
		}
		resp.Result = raw
	}
	if status < 200 || status > 299 {
		return resp, status
	}
	return resp, http.StatusOK
}

// postNotification POSTs one notification upstream with the headers h.
func (p *Handler) postNotification(ctx context.Context, h http.Header, sr *stateless.Request, body []byte) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", wire.MediaJSON)
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := p.direct.Do(req)
	if err != nil {
		p.log.Info("Notification not delivered upstream", "method", logfield.Bound(sr.Req.Method), "error", err.Error())
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		p.log.Info("Notification not delivered upstream", "method", logfield.Bound(sr.Req.Method), "status", resp.StatusCode)
	}
}

// statelessDiscover answers server/discover for a stateful upstream from its initialize
// result: its capabilities, instructions and serverInfo, and the sessionless versions the
// gate speaks.
func (p *Handler) statelessDiscover(ctx context.Context, agent string, sr *stateless.Request) *jsonrpc.Response {
	s, err := p.upstreamSession(ctx, agent, sessionCaps(sr))
	if err != nil {
		p.log.Info("Upstream session not opened", "error", err.Error())
		return &jsonrpc.Response{ID: sr.Req.ID, Error: p.unavailableErr()}
	}
	var init struct {
		Capabilities json.RawMessage `json:"capabilities"`
		Instructions string          `json:"instructions"`
		ServerInfo   json.RawMessage `json:"serverInfo"`
	}
	_ = json.Unmarshal(s.init, &init)
	out := map[string]any{"supportedVersions": stateless.Versions, "resultType": wire.ResultTypeComplete}
	if len(init.Capabilities) > 0 {
		out["capabilities"] = init.Capabilities
	} else {
		out["capabilities"] = json.RawMessage("{}")
	}
	if init.Instructions != "" {
		out["instructions"] = init.Instructions
	}
	if len(init.ServerInfo) > 0 {
		out["_meta"] = map[string]json.RawMessage{wire.MetaServerInfo: init.ServerInfo}
	}
	raw, err := wire.MarshalNoEscape(out)
	if err != nil {
		return &jsonrpc.Response{ID: sr.Req.ID, Error: &jsonrpc.Error{Code: wire.CodeInternalError, Message: "actgate: discover result could not be encoded"}}
	}
	return &jsonrpc.Response{ID: sr.Req.ID, Result: stateless.WithCacheHints(wire.MethodDiscover, raw)}
}

// gateState reports whether sr's requestState carries the gate's own MAC: one the gate minted
// for an input-required round of a stateful upstream.
func (p *Handler) gateState(sr *stateless.Request) bool {
	_, err := rounds.Parse(p.sl.held.macKey(), sr.Params["requestState"])
	return err == nil
}
