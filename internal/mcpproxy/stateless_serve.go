package mcpproxy

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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/jcs"
	"github.com/actgate/actgate/internal/logfield"
	"github.com/actgate/actgate/internal/mcpproxy/stateless"
	"github.com/actgate/actgate/internal/mcpproxy/tasks"
	"github.com/actgate/actgate/internal/mcpproxy/toolcall"
	"github.com/actgate/actgate/internal/mcpproxy/upstream"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
	"github.com/actgate/actgate/internal/sink"
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

// maxSessionsPerAgent bounds the upstream sessions one agent's distinct client capabilities
// open; beyond it the least recently opened one is closed.
const maxSessionsPerAgent = 4

// upstreamSession is a stateful upstream's session held for one agent's 2026-07-28 requests.
type upstreamSession struct {
	id, version string
	init        json.RawMessage // the upstream's initialize result
	agent, key  string
	opened      uint64     // order of opening, for the per-agent bound
	hub         *listenHub // the session's listens (listen.go)
}

type upstreamSessionKey struct{}

// withUpstreamSession returns ctx carrying s, for the exchanges on it: their change
// notifications go to s's listens (listen.go).
func withUpstreamSession(ctx context.Context, s *upstreamSession) context.Context {
	return context.WithValue(ctx, upstreamSessionKey{}, s)
}

func upstreamSessionOf(ctx context.Context) *upstreamSession {
	s, _ := ctx.Value(upstreamSessionKey{}).(*upstreamSession)
	return s
}

// sessionCaps are the client capabilities a 2026-07-28 request declares
// (_meta["io.modelcontextprotocol/clientCapabilities"]) in canonical form, "{}" when absent or
// not canonicalizable: the capabilities its upstream session declares at initialize.
func sessionCaps(sr *stateless.Request) string {
	var meta map[string]json.RawMessage
	if sr == nil || json.Unmarshal(sr.Params["_meta"], &meta) != nil {
		return "{}"
	}
	raw := meta[wire.MetaClientCapabilities]
	if !stateless.IsJSONObject(raw) {
		return "{}"
	}
	canon, err := jcs.Canonicalize(raw, jcs.Full)
	if err != nil {
		return "{}"
	}
	return string(canon)
}

// sessionKey names an agent's upstream session for the capabilities caps.
func sessionKey(agent, caps string) string {
	return agent + "\x00" + caps
}

// statelessUpstreamVersion is the stateful version the proxy opens upstream sessions with for
// 2026-07-28 agents.
const statelessUpstreamVersion = "2025-11-25"

// serveStateless answers an agent's MCP 2026-07-28 POST (docs/architecture.md "MCP 2026-07-28
// (stateless)"); it returns false, having read nothing it does not give back, for a request of
// a stateful revision.
func (p *Proxy) serveStateless(w http.ResponseWriter, r *http.Request) bool {
	if r.Body == nil || r.Body == http.NoBody || len(r.Header.Values(wire.HeaderSessionID)) > 0 {
		return false // a session's request: the hot path reads nothing here
	}
	if v := r.Header.Get(wire.HeaderProtocolVersion); v != "" && v < wire.VersionStandardHeaders {
		return false
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
		} else if msg, err := jsonrpc.DecodeMessage(body); err == nil {
			if req, ok := msg.(*jsonrpc.Request); ok {
				id = req.ID
			}
		}
		p.log.Info("MCP 2026-07-28 request refused", "code", serr.Err.Code, "reason", serr.Err.Message)
		wire.WriteRPCError(w, serr.Status, id, serr.Err)
		return true
	}
	ctx := r.Context()
	agent := p.requestAgent(ctx)
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
	stream := &agentStream{w: w, lazy: true}
	defer stream.finish()
	ctx = withAgentStream(ctx, stream)
	resp, status := p.statelessAnswer(ctx, mode, agent, r.Header, sr, stream)
	out, err := jsonrpc.EncodeMessage(resp)
	if err != nil {
		p.log.Error(err, "Response could not be encoded", "method", logfield.Bound(sr.Req.Method))
		out, _ = jsonrpc.EncodeMessage(&jsonrpc.Response{ID: sr.Req.ID, Error: &jsonrpc.Error{Code: wire.CodeInternalError, Message: "actgate: response could not be encoded"}})
	}
	if status != http.StatusOK && !stream.isStarted() {
		writeRaw(w, status, out)
		return true
	}
	stream.answer(out)
	return true
}

// statelessAnswer answers one 2026-07-28 request (not a notification) in the upstream's mode:
// the header checks of a tools/call, the gate's own answers, a continuation or a held exchange
// toward a stateful upstream, the call or relay toward a stateless one.
func (p *Proxy) statelessAnswer(ctx context.Context, mode upstreamMode, agent string, hdr http.Header, sr *stateless.Request, stream *agentStream) (*jsonrpc.Response, int) {
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

func (p *Proxy) unavailableErr() *jsonrpc.Error {
	return &jsonrpc.Error{Code: wire.CodeInternalError, Message: fmt.Sprintf("actgate: upstream %q unavailable", p.cfg.Server)}
}

// upstreamMode returns the upstream's mode, probing it the first time (and after a probe that
// could not reach it).
func (p *Proxy) upstreamMode(ctx context.Context) (upstreamMode, error) {
	p.sl.mu.Lock()
	m := p.sl.mode
	p.sl.mu.Unlock()
	if m != modeUnknown {
		return m, nil
	}
	p.sl.probe.Lock()
	defer p.sl.probe.Unlock()
	p.sl.mu.Lock()
	m = p.sl.mode
	p.sl.mu.Unlock()
	if m != modeUnknown {
		return m, nil
	}
	m, err := p.probeUpstream(ctx)
	if err != nil {
		return modeUnknown, err
	}
	p.sl.mu.Lock()
	p.sl.mode = m
	p.sl.mu.Unlock()
	p.log.Info("Upstream revision learned for MCP 2026-07-28 agents", "stateless", m == modeStateless)
	return m, nil
}

// probeUpstream asks the upstream server/discover at 2026-07-28: an answer listing that
// version makes it stateless; any other answer (an error, an HTTP refusal) makes it stateful.
// Only a failure to reach it is an error.
func (p *Proxy) probeUpstream(ctx context.Context) (upstreamMode, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.ConnectTimeout)
	defer cancel()
	id, _ := jsonrpc.MakeID("actgate-discover-" + strconv.FormatUint(callSeq.Add(1), 10))
	params := fmt.Sprintf(`{"_meta":{%q:%q,%q:{}}}`, wire.MetaProtocolVersion, wire.VersionStandardHeaders, wire.MetaClientCapabilities)
	body, err := jsonrpc.EncodeMessage(&jsonrpc.Request{ID: id, Method: wire.MethodDiscover, Params: json.RawMessage(params)})
	if err != nil {
		return modeUnknown, err
	}
	h := http.Header{}
	h.Set(wire.HeaderProtocolVersion, wire.VersionStandardHeaders)
	h.Set(wire.HeaderMethod, wire.MethodDiscover)
	resp, _, err := p.slExchange(ctx, h, body, id)
	if err != nil {
		var se *statusError
		if errors.As(err, &se) {
			return modeStateful, nil
		}
		return modeUnknown, err
	}
	var res struct {
		SupportedVersions []string `json:"supportedVersions"`
	}
	if resp.Error == nil && json.Unmarshal(resp.Result, &res) == nil {
		for _, v := range res.SupportedVersions {
			if stateless.Speaks(v) {
				return modeStateless, nil
			}
		}
	}
	return modeStateful, nil
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
func (p *Proxy) slExchange(ctx context.Context, h http.Header, body []byte, id jsonrpc.ID) (*jsonrpc.Response, int, error) {
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
		stream := agentStreamOf(ctx)
		stream.start() // the agent's answer follows the server's framing
		answer, err := readEvents(resp.Body, id, func(m *jsonrpc.Request) {
			if !toListens(m) && !m.IsCall() && (m.Method != wire.NotifyMessage || stateless.LogAllowed(ctx, m.Params)) {
				stream.message(relabel(ctx, m))
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
func (p *Proxy) statelessSend(ctx context.Context, mode upstreamMode, agent string, h http.Header, sr *stateless.Request,
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
		sent := params
		if sr.Req.Method != wire.MethodTasksUpdate { // a task's inputResponses are its request's own
			sent = withoutRoundMembers(params)
		}
		body, err := jsonrpc.EncodeMessage(&jsonrpc.Request{ID: upID, Method: sr.Req.Method, Params: withoutRevisionMeta(sent)})
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
func (p *Proxy) statelessRelay(ctx context.Context, mode upstreamMode, agent string, hdr http.Header, sr *stateless.Request) (*jsonrpc.Response, int) {
	if resp := p.foreignTask(agent, sr); resp != nil {
		return resp, http.StatusOK
	}
	resp, status, err := p.statelessSend(ctx, mode, agent, statelessHeaders(hdr, sr, true), sr, sr.Req.Params, true)
	if err != nil {
		p.log.Info("Upstream request failed", "method", logfield.Bound(sr.Req.Method), "error", err.Error())
		return &jsonrpc.Response{ID: sr.Req.ID, Error: p.unavailableErr()}, http.StatusOK
	}
	p.observeTask2026(agent, sr, resp)
	p.ownTasksOnly(agent, sr.Req.Method, resp)
	if sr.Req.Method == wire.MethodListTools && resp.Error == nil {
		p.learnParamHeaders(resp.Result)
		raw, err := toolcall.AugmentToolsRaw(resp.Result, firstPage(sr.Req.Params), func(tool string) bool { return p.cfg.Gate.CanEscalate(p.cfg.Server, tool) }, nil)
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
func (p *Proxy) postNotification(ctx context.Context, h http.Header, sr *stateless.Request, body []byte) {
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
func (p *Proxy) statelessDiscover(ctx context.Context, agent string, sr *stateless.Request) *jsonrpc.Response {
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

// upstreamSession returns the agent's upstream session of a stateful upstream for the client
// capabilities caps (canonical JSON), opening it (initialize at statelessUpstreamVersion
// declaring caps, then notifications/initialized) if there is none. Opening one beyond
// maxSessionsPerAgent closes the agent's oldest.
func (p *Proxy) upstreamSession(ctx context.Context, agent, caps string) (*upstreamSession, error) {
	key := sessionKey(agent, caps)
	p.sl.mu.Lock()
	s := p.sl.sessions[key]
	p.sl.mu.Unlock()
	if s != nil {
		return s, nil
	}
	p.sl.open.Lock()
	defer p.sl.open.Unlock()
	p.sl.mu.Lock()
	s = p.sl.sessions[key]
	p.sl.mu.Unlock()
	if s != nil {
		return s, nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.ConnectTimeout)
	defer cancel()
	id, _ := jsonrpc.MakeID("actgate-init-" + strconv.FormatUint(callSeq.Add(1), 10))
	params := fmt.Sprintf(`{"protocolVersion":%q,"capabilities":%s,"clientInfo":{"name":"actgate","version":"v1alpha1"}}`, statelessUpstreamVersion, caps)
	body, err := jsonrpc.EncodeMessage(&jsonrpc.Request{ID: id, Method: wire.MethodInitialize, Params: json.RawMessage(params)})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", wire.MediaJSON)
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := p.direct.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNoUpstream, err)
	}
	defer resp.Body.Close()
	var answer *jsonrpc.Response
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return nil, fmt.Errorf("%w: initialize answered HTTP %d", errNoUpstream, resp.StatusCode)
	case mt == wire.MediaJSON:
		answer, err = wire.ReadJSONAnswer(resp.Body, id)
	case mt == wire.MediaSSE:
		answer, err = readEvents(resp.Body, id, func(*jsonrpc.Request) {})
	default:
		err = fmt.Errorf("initialize answered with content type %q", wire.Clip(mt, 64))
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNoUpstream, err)
	}
	if answer.Error != nil {
		return nil, fmt.Errorf("%w: initialize refused: %s", errNoUpstream, safeRPC(answer.Error))
	}
	var init struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if json.Unmarshal(answer.Result, &init) != nil || !statefulVersions[init.ProtocolVersion] {
		return nil, fmt.Errorf("%w: initialize negotiated no stateful version", errNoUpstream)
	}
	s = &upstreamSession{id: resp.Header.Get(wire.HeaderSessionID), version: init.ProtocolVersion, init: answer.Result,
		agent: agent, key: key, opened: callSeq.Add(1), hub: &listenHub{}}
	note, _ := jsonrpc.EncodeMessage(&jsonrpc.Request{Method: "notifications/initialized"})
	nreq, err := http.NewRequestWithContext(ctx, http.MethodPost, p.cfg.URL, bytes.NewReader(note))
	if err != nil {
		return nil, err
	}
	nreq.Header.Set("Content-Type", wire.MediaJSON)
	nreq.Header.Set("Accept", "application/json, text/event-stream")
	if s.id != "" {
		nreq.Header.Set(wire.HeaderSessionID, s.id)
	}
	nreq.Header.Set(wire.HeaderProtocolVersion, s.version)
	nresp, err := p.direct.Do(nreq)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNoUpstream, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(nresp.Body, 64<<10))
	_ = nresp.Body.Close()
	p.sl.mu.Lock()
	if p.sl.sessions == nil {
		p.sl.sessions = make(map[string]*upstreamSession)
	}
	p.sl.sessions[key] = s
	var oldest *upstreamSession
	n := 0
	for _, o := range p.sl.sessions {
		if o.agent == agent {
			n++
			if oldest == nil || o.opened < oldest.opened {
				oldest = o
			}
		}
	}
	if n <= maxSessionsPerAgent {
		oldest = nil
	} else {
		delete(p.sl.sessions, oldest.key)
	}
	p.sl.mu.Unlock()
	if oldest != nil {
		p.log.Info("Upstream session of a 2026-07-28 agent closed: the agent's requests declare more sets of client capabilities than the gate holds sessions for",
			"upstreamSession", oldest.id, "limit", maxSessionsPerAgent)
		oldest.hub.end()
		p.deleteUpstreamSessions([]*upstreamSession{oldest})
	}
	return s, nil
}

// dropUpstreamSession forgets s if it is still the agent's session (the upstream answered 404:
// it is gone) and ends its listens; the next request opens a new one.
func (p *Proxy) dropUpstreamSession(s *upstreamSession) {
	s.hub.end()
	p.sl.mu.Lock()
	current := p.sl.sessions[s.key] == s
	if current {
		delete(p.sl.sessions, s.key)
	}
	p.sl.mu.Unlock()
	if current {
		p.log.Info("Upstream session of a 2026-07-28 agent ended; the next request opens a new one", "upstreamSession", s.id)
	}
}

// closeStateless ends the upstream sessions held for 2026-07-28 agents (a DELETE each, in the
// background: no one waits for the upstream's answer).
func (p *Proxy) closeStateless() {
	p.sl.mu.Lock()
	ss := p.sl.sessions
	p.sl.sessions = nil
	p.sl.mu.Unlock()
	for _, hc := range p.sl.held.closeAll() {
		p.abandonWaiting(hc)
	}
	p.abandonTasks2026()
	list := make([]*upstreamSession, 0, len(ss))
	for _, s := range ss {
		s.hub.end()
		list = append(list, s)
	}
	p.deleteUpstreamSessions(list)
}

// deleteUpstreamSessions DELETEs each session upstream in the background.
func (p *Proxy) deleteUpstreamSessions(ss []*upstreamSession) {
	for _, s := range ss {
		if s.id == "" {
			continue
		}
		go func(s *upstreamSession) {
			ctx, cancel := context.WithTimeout(context.Background(), p.cfg.ConnectTimeout)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodDelete, p.cfg.URL, nil)
			if err != nil {
				return
			}
			req.Header.Set(wire.HeaderSessionID, s.id)
			req.Header.Set(wire.HeaderProtocolVersion, s.version)
			if resp, err := p.direct.Do(req); err == nil {
				_ = resp.Body.Close()
			}
		}(s)
	}
}

// slRefusal is an upstream's authoritative refusal of a tools/call before execution, with the
// HTTP status it came with (2026-07-28 answers some refusals with HTTP 400; the agent gets the
// upstream's answer as it was given).
type slRefusal struct {
	toolcall.Refusal
	status atomic.Int32
}

// statelessCall is a 2026-07-28 tools/call: one act through the gate, in the agent's scope
// (stateless.Scope; an input-required continuation in a narrower one, stateless.ContinuationScope), with
// the same outcomes as a session's (bridge.callTool) rendered as 2026-07-28 results. An
// upstream refusal before execution is recorded in refused.
//
//nolint:gocyclo // the order of a 2026-07-28 tools/call's checks (headers, agent, replay, sink, continuation) reads as one sequence
func (p *Proxy) statelessCall(ctx context.Context, mode upstreamMode, agent string, hdr http.Header, sr *stateless.Request, refused *slRefusal) *jsonrpc.Response {
	id := sr.Req.ID
	reply := func(raw json.RawMessage, err error) *jsonrpc.Response {
		if err != nil {
			p.log.Error(err, "Result could not be rendered")
			return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: wire.CodeInternalError, Message: "actgate: result could not be rendered"}}
		}
		return &jsonrpc.Response{ID: id, Result: stateless.WithResultType(raw)}
	}
	render := func(r *toolcall.RawResult, err error) *jsonrpc.Response {
		if err != nil {
			return reply(nil, err)
		}
		raw, err := r.MarshalJSON()
		return reply(raw, err)
	}
	scope := stateless.ContinuationScope(stateless.Scope(p.cfg.Server, agent), sr.Params["requestState"], sr.Params["inputResponses"])
	raw := sr.Params["arguments"]
	if len(raw) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		raw = json.RawMessage("{}")
	}
	if sr.Name == sink.RequestBindingMomentTool {
		r, _, err := toolcall.Moment(ctx, p.cfg.Gate, p.log, scope, agent, raw)
		return render(r, err)
	}
	args, fwd, canonical := toolcall.Arguments(raw) // the hand-off (toolcall), as a session's call
	var meta map[string]json.RawMessage
	_ = json.Unmarshal(sr.Params["_meta"], &meta)
	call := sink.Call{
		Session: scope, Agent: agent, Server: p.cfg.Server, Destination: p.cfg.URL,
		Tool: sr.Name, Args: args, Vendor: act.VendorMCP,
	}
	if s, ok := id.Raw().(string); ok {
		call.VendorID = wire.Clip(s, 128)
	} else if n, ok := id.Raw().(int64); ok {
		call.VendorID = strconv.FormatInt(n, 10)
	}
	if p.cfg.TrustDeclaredProvenance {
		var prov string
		if json.Unmarshal(meta[MetaProvenance], &prov) == nil {
			call.Provenance = prov
		}
	}
	if !p.sl.tasks.reserve(agent) {
		return p.taskLimited2026(id)
	}
	if !p.owners.Reserve(agent) { // any tools/call may create a task: its creator is remembered (taskowners.go)
		p.sl.tasks.release(agent)
		return p.taskLimited2026(id)
	}
	inv := p.statelessInvoker(mode, agent, hdr, sr, fwd, refused)
	res, err := p.cfg.Gate.Handle(context.WithoutCancel(ctx), call, inv)
	p.learnCreated(agent, res, true)
	if !p.followTask2026(agent, res) {
		p.sl.tasks.release(agent)
	}
	if res.Allowed && len(res.Accepted) > 0 {
		res.Upstream = res.Accepted // the task's handle, to the call and to a retry
	}
	h := toolcall.Handoff{Log: p.log, Tool: sr.Name, Session: scope, Canonical: canonical}
	res, verdict := h.Decide(h.Settle(res, err), refused.Get(), true)
	switch verdict {
	case toolcall.UpstreamRefused:
		return &jsonrpc.Response{ID: id, Error: refused.Get()}
	case toolcall.Allowed:
		return render(toolcall.AllowedResult(res))
	}
	// No session remembers which tools declare an outputSchema: a refusal never carries
	// structuredContent on 2026-07-28 (its text, _meta code and binding_moment do).
	return render(toolcall.RefusalFor(res, false))
}

// statelessInvoker sends the authorised tools/call upstream once: the agent's params with the
// canonical arguments and the sink's operation id in _meta, nothing else changed. An
// input-required result is recorded FAILED: the server did not run the call.
func (p *Proxy) statelessInvoker(mode upstreamMode, agent string, hdr http.Header, sr *stateless.Request, args json.RawMessage, refused *slRefusal) sink.Invoker {
	return func(ctx context.Context, operationID string) (sink.InvokeResult, error) {
		if args == nil {
			return upstream.NotSent("the arguments could not be canonicalized; the call was not sent"), nil
		}
		if hc := heldOf(ctx); hc != nil {
			hc.setOperation(operationID)
		}
		params := make(map[string]json.RawMessage, len(sr.Params)+1)
		for k, v := range sr.Params {
			params[k] = v
		}
		params["arguments"] = args
		meta := map[string]json.RawMessage{}
		_ = json.Unmarshal(sr.Params["_meta"], &meta)
		op, _ := json.Marshal(operationID)
		meta[MetaOperationID] = op
		m, err := json.Marshal(meta)
		if err != nil {
			return upstream.NotSent("actgate: the call could not be encoded; it was not sent"), nil
		}
		params["_meta"] = m
		body, err := wire.MarshalNoEscape(params)
		if err != nil {
			return upstream.NotSent("actgate: the call could not be encoded; it was not sent"), nil
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.CallTimeout)
		defer cancel()
		var a upstream.Attempt
		// The agent's Mcp-Param-* headers each copy a value of the arguments the gate decided on
		// (stateless.CheckParamHeaders).
		resp, status, err := p.statelessSend(a.Bind(ctx), mode, agent, statelessHeaders(hdr, sr, true), sr, body, false)
		if err != nil {
			switch {
			case errors.Is(err, errNoUpstream):
				return upstream.NotSent(fmt.Sprintf("actgate: upstream %q could not be reached; the call was not sent", p.cfg.Server)), nil
			case !a.Wrote():
				return upstream.NotSent("the upstream could not be reached; the call was not sent"), nil
			case upstream.RedirectStatus(status):
				return upstream.Redirected(status), nil
			case upstream.RefusedStatus(status):
				return upstream.Failed(fmt.Sprintf("the upstream refused the call: HTTP %d", status)), nil
			}
			p.log.Info("Upstream tools/call failed", "tool", logfield.Bound(sr.Name), "operation", operationID, "cause", upstream.SafeCause(err, &a))
			return sink.InvokeResult{Outcome: sink.OutcomeIndeterminate}, err
		}
		if resp.Error != nil {
			var werr *jsonrpc.Error
			if !errors.As(resp.Error, &werr) {
				return sink.InvokeResult{Outcome: sink.OutcomeIndeterminate}, fmt.Errorf("mcpproxy: upstream answered an error")
			}
			switch werr.Code {
			case wire.CodeParseError, wire.CodeInvalidRequest, wire.CodeMethodNotFound, wire.CodeInvalidParams, wire.CodeURLElicitationRequired,
				wire.CodeHeaderMismatch, wire.CodeUnsupportedProtocolVersion,
				wire.CodeMissingClientCapability:
				refused.Set(werr)
				refused.status.Store(int32(min(max(status, 200), 599)))
				return upstream.Failed(fmt.Sprintf("the upstream refused the call: JSON-RPC error %d: %s", werr.Code, wire.Clip(werr.Message, 200))), nil
			}
			// Any other error answer may come from a handler that had already acted.
			return sink.InvokeResult{Outcome: sink.OutcomeIndeterminate}, fmt.Errorf("mcpproxy: upstream answered JSON-RPC error %d", werr.Code)
		}
		var r struct {
			IsError bool `json:"isError"`
		}
		_ = json.Unmarshal(resp.Result, &r)
		if r.IsError || stateless.ResultTypeOf(resp.Result) == wire.ResultTypeInputRequired {
			return sink.InvokeResult{Result: resp.Result, Outcome: sink.OutcomeFailed}, nil
		}
		// A CreateTaskResult: the upstream accepted the call to run it as a task.
		return tasks.Classify(resp.Result, sink.InvokeResult{Result: resp.Result, Outcome: sink.OutcomeExecuted}, tasks.ParseCreated2026), nil
	}
}

// safeRPC names a JSON-RPC error by its code only (its message may quote the request).
func safeRPC(err error) string {
	var werr *jsonrpc.Error
	if errors.As(err, &werr) {
		return "JSON-RPC error " + strconv.FormatInt(werr.Code, 10)
	}
	return "an error"
}

// withoutRoundMembers returns params without requestState and inputResponses, the
// 2026-07-28 members a stateful upstream does not know: its requests for input are answered on
// its session (stateless_rounds.go). A tasks/update keeps them: its inputResponses are the
// request itself.
func withoutRoundMembers(params json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(params, &m) != nil || m == nil {
		return params
	}
	_, rs := m["requestState"]
	_, ir := m["inputResponses"]
	if !rs && !ir {
		return params
	}
	delete(m, "requestState")
	delete(m, "inputResponses")
	out, err := wire.MarshalNoEscape(m)
	if err != nil {
		return params
	}
	return out
}

// withoutRevisionMeta returns params without the 2026-07-28 per-request _meta members
// (io.modelcontextprotocol/…), for a stateful upstream session: its version and the client's
// capabilities are the session's, and a stateful server refuses a request that carries them.
// Every other member is kept as written; params that are not an object are returned unchanged.
func withoutRevisionMeta(params json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(params, &m) != nil || m == nil {
		return params
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(m["_meta"], &meta) != nil || meta == nil {
		return params
	}
	changed := false
	for k := range meta {
		if strings.HasPrefix(k, "io.modelcontextprotocol/") {
			delete(meta, k)
			changed = true
		}
	}
	if !changed {
		return params
	}
	if len(meta) == 0 {
		delete(m, "_meta")
	} else if raw, err := wire.MarshalNoEscape(meta); err == nil {
		m["_meta"] = raw
	} else {
		return params
	}
	out, err := wire.MarshalNoEscape(m)
	if err != nil {
		return params
	}
	return out
}

// gateState reports whether sr's requestState carries the gate's own MAC: one the gate minted
// for an input-required round of a stateful upstream.
func (p *Proxy) gateState(sr *stateless.Request) bool {
	_, err := parseState(p.sl.held.macKey(), sr.Params["requestState"])
	return err == nil
}
