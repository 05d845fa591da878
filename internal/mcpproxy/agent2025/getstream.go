package agent2025

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/logfield"
	"github.com/actgate/actgate/internal/mcpproxy/admission"
	"github.com/actgate/actgate/internal/mcpproxy/eventlog"
	"github.com/actgate/actgate/internal/mcpproxy/getrelay"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// The agent's standalone GET stream (MCP streamable HTTP, "Listening for messages from the
// server") is relayed from the upstream's GET on the same upstream session (the first from the
// one opened with the session, earlyGET; later ones from GETs of their own), and the gate
// writes the upstream's events as the upstream wrote them, with their event ids, retry fields,
// priming events and comments. Two things differ:
//
//   - A request the upstream puts to the agent on it (sampling, elicitation, roots/list) gets an
//     id of the gate's own (actgate-s-N), as on an answer stream (askOnStream): the agent's
//     response comes back through the same path (bridge.deliver) and goes upstream under the
//     upstream's id. A request whose capability the agent did not declare is answered by the
//     gate as the SDK client would (bridge.answer) and not written. A response on the GET
//     stream (which MCP does not allow) is dropped, except one to a request the gate carried
//     upstream, which an upstream replays when the agent's GET resumes one of its answer
//     streams (resume.go): it goes to the agent under the agent's id, and settles nothing.
//   - The gate's own messages to the agent outside any request (those of the agent-side SDK
//     session: an elicitation of a binding moment, an upstream message that reached the gate
//     through the SDK client) are merged into the stream as events of their own, with ids
//     "actgate:{n}:{last}", n the event's index on the gate session's own stream and last the
//     id of the upstream event before it. An upstream event id that begins with "actgate:" is
//     written "actgate:u:{id}", so that no upstream id can be taken for one of the gate's.
//
// Resumption: a GET with Last-Event-ID on the session resumes the upstream's GET with the
// upstream id it names (the last of an "actgate:" id; none when empty) and the gate's own
// events after the n it names, or, for an upstream id, after the last of the gate's own events
// written to the agent on any GET of the session; an upstream id of an answer stream is
// relayed the same way (resume.go). An upstream that offers no GET stream (HTTP
// 405) leaves the agent the gate's own stream alone; another refusal of the upstream's is the
// agent's answer.
const gateEventPrefix = eventlog.Prefix

// refuseSessionlessGET answers a GET without Mcp-Session-Id (after admission and
// authentication): the gate offers a standalone stream only on an initialized 2025 session,
// and 2026-07-28 has none, so the endpoint has no stream for it. The transport asks a server
// to answer such a GET with an event stream or HTTP 405 (MCP streamable HTTP, "Listening for
// messages from the server"); clients take 405 as "no stream here" and go on with POST. Allow
// names the methods the endpoint serves (RFC 9110 §15.5.6), the body is a JSON-RPC error.
func refuseSessionlessGET(w http.ResponseWriter) {
	w.Header().Set("Allow", "GET, POST, DELETE")
	wire.WriteRPCError(w, http.StatusMethodNotAllowed, jsonrpc.ID{}, &jsonrpc.Error{Code: wire.CodeInvalidRequest,
		Message: "actgate: no stream without a session: a GET needs the Mcp-Session-Id of an initialized session (MCP 2025-11-25); MCP 2026-07-28 has no GET stream"})
}

// serveGET answers the agent's GET on an initialized session with the relayed stream. It
// returns false, having written nothing, when the SDK's handler answers instead: no such
// session, a session of 2026-07-28, a request the SDK's handler refuses for its headers
// (Accept without text/event-stream, a Host that is not loopback on a loopback listener, an
// unknown Mcp-Protocol-Version), an upstream session that cannot be opened, or an upstream
// without a GET stream.
func (p *Handler) serveGET(w http.ResponseWriter, r *http.Request) bool {
	if _, streamOK := wire.Accepts(r.Header.Values("Accept")); !streamOK || admission.Rebinding(r) {
		return false // the SDK's handler refuses it (400; DNS rebinding: 403)
	}
	if v := r.Header.Get(wire.HeaderProtocolVersion); v != "" && !wire.StatefulVersions[v] {
		return false // the SDK's handler judges the version
	}
	b := p.bridgeByID(r.Header.Get(wire.HeaderSessionID))
	if b == nil || b.version == "" || b.version >= wire.VersionStandardHeaders {
		return false
	}
	if b.agent != p.requestAgent(r.Context()) {
		http.Error(w, "session user mismatch", http.StatusForbidden)
		return true
	}
	cs, err := b.upstream(r.Context())
	if err != nil {
		return false
	}
	version, ok := directVersion(cs)
	if !ok {
		return false
	}
	own, upID := b.resumePoint(r.Header.Get(wire.HeaderLastEventID))
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	resp := b.claimEarlyGET(ctx, cs, upID)
	if resp == nil {
		if resp, err = b.openGET(ctx, cs.ID(), version, upID); err != nil {
			p.log.Info("Upstream GET stream not opened; the agent gets the gate's own", "session", b.ss.ID(), "error", err.Error())
			return false
		}
	}
	defer resp.Body.Close()
	stop := context.AfterFunc(ctx, func() { _ = resp.Body.Close() }) // an early GET's own context is the session's
	defer stop()
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if resp.StatusCode == http.StatusMethodNotAllowed {
		return false // the upstream offers no GET stream: the gate's own alone
	}
	if resp.StatusCode != http.StatusOK || mt != wire.MediaSSE {
		if resp.StatusCode == http.StatusNotFound {
			b.drop(cs)
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if ct := resp.Header.Get("Content-Type"); ct != "" {
			w.Header().Set("Content-Type", ct)
		}
		status := resp.StatusCode
		if status == http.StatusOK {
			status = http.StatusBadGateway // a GET answer that is not an event stream
		}
		w.WriteHeader(status)
		_, _ = w.Write(body)
		return true
	}
	g := getrelay.New(w, getSession{b}, upID)
	wh := w.Header()
	wh.Set("Content-Type", wire.MediaSSE)
	wh.Set("Cache-Control", "no-cache, no-transform")
	w.WriteHeader(http.StatusOK)
	g.Flush()

	// The gate's own stream: the SDK session's standalone stream, read through a writer that
	// merges its events (getrelay.OwnWriter).
	ownDone := make(chan struct{})
	go func() {
		defer close(ownDone)
		sub := r.Clone(ctx)
		if own >= 0 {
			sub.Header.Set(wire.HeaderLastEventID, "_"+strconv.Itoa(own))
		} else {
			sub.Header.Del(wire.HeaderLastEventID)
		}
		ow := g.Own()
		p.sdk.ServeHTTP(ow, sub)
		if st := ow.Status(); st == 0 || st == http.StatusOK {
			cancel() // the gate session's end ends the relayed stream
		}
	}()
	g.Relay(ctx, cs.ID(), version, resp.Body)
	cancel()
	<-ownDone
	return true
}

// openGET opens the upstream's GET stream on session sid, resuming after upID when not empty.
func (b *bridge) openGET(ctx context.Context, sid, version, upID string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.p.cfg.URL, nil)
	if err != nil {
		return nil, err
	}
	h := req.Header
	h.Set("Accept", wire.MediaSSE)
	h.Set(wire.HeaderSessionID, sid)
	h.Set(wire.HeaderProtocolVersion, version)
	if upID != "" {
		h.Set(wire.HeaderLastEventID, upID)
	}
	return b.p.direct.Do(req)
}

// earlyGETGrace is how long an upstream GET stream opened with the session waits for the
// agent's GET to claim it before the gate closes it.
const earlyGETGrace = 10 * time.Second

// earlyGET is the upstream GET stream the gate opens as soon as the upstream session is open,
// as the SDK client would (and a direct client usually does right after initialize): an
// upstream that puts a request outside any request on it right after the session starts (the
// conformance reference server's test_elicitation) finds it connected, although the agent's
// GET reaches the upstream one hop later. The agent's first GET without Last-Event-ID claims
// it and reads it from its first byte (what the upstream wrote meanwhile is in the
// connection's buffers); unclaimed after earlyGETGrace, it is closed, and the agent's GET opens
// its own. The agent's requests after initialize reach the upstream once the upstream has
// answered it (awaitEarlyGET).
type earlyGET struct {
	sid   string
	ready chan struct{} // closed once resp is known
	resp  *http.Response
}

// startEarlyGET opens the session's early GET in the background.
func (b *bridge) startEarlyGET(cs *mcp.ClientSession) {
	version, ok := directVersion(cs)
	if !ok {
		return
	}
	e := &earlyGET{sid: cs.ID(), ready: make(chan struct{})}
	b.mu.Lock()
	b.early, b.started = e, e
	b.mu.Unlock()
	go func() {
		// The stream lives as long as the session (its claimant closes it sooner); a slow
		// answer is bounded by the claimant's wait (claimEarlyGET).
		resp, err := b.openGET(b.lifetime(), e.sid, version, "")
		if err == nil {
			mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
			if resp.StatusCode != http.StatusOK || mt != wire.MediaSSE {
				_ = resp.Body.Close()
				resp = nil
			}
		} else {
			resp = nil
		}
		b.mu.Lock()
		e.resp = resp
		b.mu.Unlock()
		close(e.ready)
		if resp == nil {
			return
		}
		t := time.NewTimer(earlyGETGrace)
		defer t.Stop()
		select {
		case <-t.C:
		case <-b.lifetime().Done():
		}
		b.mu.Lock()
		unclaimed := b.early == e && e.resp != nil
		if unclaimed {
			b.early = nil
		}
		b.mu.Unlock()
		if unclaimed || b.lifetime().Err() != nil {
			_ = resp.Body.Close()
		}
	}()
}

// awaitEarlyGET waits until the upstream has answered the early GET of upstream session cs
// (bounded by ConnectTimeout and ctx); at once when it has, when cs has none, and for
// initialize itself (the agent's initialize is not held up by the upstream's GET). A request
// the agent sends on the session reaches the upstream only then: an upstream writes a message
// outside any request to the GET stream connected at that moment and drops it (or keeps it for
// a Last-Event-ID the agent does not have) when there is none, and the TypeScript SDK server
// sends a request its tool handler makes without naming the tools/call (server.request) there.
// Were the agent's tools/call to reach the upstream before the gate's GET, that request would
// be lost and the call would wait for an answer that never comes.
func (b *bridge) awaitEarlyGET(ctx context.Context, cs *mcp.ClientSession) {
	b.mu.Lock()
	e := b.started
	b.mu.Unlock()
	if e == nil || e.sid != cs.ID() {
		return
	}
	select {
	case <-e.ready:
		return
	default:
	}
	t := time.NewTimer(b.p.cfg.ConnectTimeout)
	defer t.Stop()
	select {
	case <-e.ready:
	case <-t.C:
		b.p.log.Info("Upstream GET stream not answered in time; the request goes upstream without it", "session", b.ss.ID(), "timeout", b.p.cfg.ConnectTimeout.String())
	case <-ctx.Done():
	}
}

// claimEarlyGET returns the session's early GET for the agent's GET without Last-Event-ID on
// upstream session cs, waiting for it to open (bounded by ConnectTimeout); nil when there is
// none to claim.
func (b *bridge) claimEarlyGET(ctx context.Context, cs *mcp.ClientSession, upID string) *http.Response {
	b.mu.Lock()
	e := b.early
	b.mu.Unlock()
	if e == nil || upID != "" || e.sid != cs.ID() {
		return nil
	}
	t := time.NewTimer(b.p.cfg.ConnectTimeout)
	defer t.Stop()
	select {
	case <-e.ready:
	case <-t.C:
		return nil
	case <-ctx.Done():
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.early != e || e.resp == nil {
		return nil
	}
	b.early = nil
	return e.resp
}

// resumePoint reads the agent's Last-Event-ID on the GET stream: the index of the gate's own
// event to resume after (-1: from the first not yet written) and the upstream id to resume
// the upstream's stream with ("" for none).
func (b *bridge) resumePoint(last string) (own int, upID string) {
	b.mu.Lock()
	own = b.ownSent
	b.mu.Unlock()
	if last == "" {
		return own, ""
	}
	rest, ok := strings.CutPrefix(last, gateEventPrefix)
	if !ok {
		return own, last
	}
	if up, ok := strings.CutPrefix(rest, "u:"); ok {
		return own, up
	}
	num, up, ok := strings.Cut(rest, ":")
	if n, err := strconv.Atoi(num); ok && err == nil && n >= 0 && eventlog.Decimal(num) {
		return n, up
	}
	return own, last // not an id the gate wrote: the upstream's to judge
}

// askOnGET puts an upstream request of the GET stream to the agent under an id of the gate's
// own and returns the request to write; the agent's response goes upstream in the background,
// under the upstream's id (bounded by the elicitation timeout or CallTimeout, and the
// session). ok is false when the gate answers it itself, at once (a capability the agent did
// not declare, as the SDK client would; or maxRelayed requests waiting already): nothing is
// written.
func (b *bridge) askOnGET(ctx context.Context, sid, version string, req *jsonrpc.Request) (data []byte, ok bool) {
	if !b.agentCan(req.Method) {
		b.fromUpstream(ctx, sid, version, req) // answered without the agent (bridge.answer)
		return nil, false
	}
	// A request the upstream replays (a resumed GET) while the agent has not answered it yet
	// is put to the agent again under the same id: one wait, one answer upstream.
	key := fmt.Sprintf("%T:%v", req.ID.Raw(), req.ID.Raw())
	b.mu.Lock()
	pending, replayed := b.getAsks[key]
	b.mu.Unlock()
	if replayed {
		out, err := jsonrpc.EncodeMessage(&jsonrpc.Request{ID: pending, Method: req.Method, Params: req.Params})
		return out, err == nil
	}
	id, _ := jsonrpc.MakeID("actgate-s-" + strconv.FormatUint(streamSeq.Add(1), 10))
	ch := make(chan *jsonrpc.Response, 1)
	if !b.await(id, ch) {
		resp := &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: wire.CodeTooManyRequests,
			Message: fmt.Sprintf("actgate: more than %d requests to the agent in flight on this session", maxRelayed)}}
		if err := b.postMessage(ctx, sid, version, resp); err != nil {
			b.p.log.Info("Answer not delivered upstream", "method", logfield.Bound(req.Method), "error", err.Error())
		}
		return nil, false
	}
	out, err := jsonrpc.EncodeMessage(&jsonrpc.Request{ID: id, Method: req.Method, Params: req.Params})
	if err != nil {
		b.unawait(id)
		return nil, false
	}
	b.mu.Lock()
	if b.getAsks == nil {
		b.getAsks = make(map[string]jsonrpc.ID)
	}
	b.getAsks[key] = id // at most maxRelayed, as awaiting
	b.mu.Unlock()
	d := b.p.cfg.CallTimeout
	if req.Method == wire.MethodElicit {
		if d = b.p.cfg.ElicitationTimeout; d == 0 {
			d = DefaultElicitationTimeout
		}
	}
	go func() {
		// The wait outlives the GET connection (the agent may answer after reconnecting),
		// not the session.
		wctx, cancel := context.WithTimeout(b.lifetime(), d)
		defer cancel()
		defer b.unawait(id)
		defer func() {
			b.mu.Lock()
			delete(b.getAsks, key)
			b.mu.Unlock()
		}()
		var resp *jsonrpc.Response
		select {
		case r := <-ch:
			resp = &jsonrpc.Response{ID: req.ID, Result: r.Result, Error: r.Error}
		case <-wctx.Done():
			b.p.log.Info("The agent did not answer a request of the upstream", "method", logfield.Bound(req.Method), "session", b.ss.ID())
			resp = &jsonrpc.Response{ID: req.ID, Error: errAgentSilent}
		}
		pctx, pcancel := context.WithTimeout(context.Background(), b.p.cfg.ConnectTimeout)
		defer pcancel()
		if err := b.postMessage(pctx, sid, version, resp); err != nil {
			b.p.log.Info("Answer not delivered upstream", "method", logfield.Bound(req.Method), "error", err.Error())
		}
	}()
	return out, true
}

// lifetime is a context that ends when the session closes.
func (b *bridge) lifetime() context.Context {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.life == nil {
		b.life, b.endLife = context.WithCancel(context.Background())
		if b.closed {
			b.endLife()
		}
	}
	return b.life
}

// getSession is the bridge as its relayed GET streams see it (getrelay.Session).
type getSession struct{ b *bridge }

func (s getSession) ID() string       { return s.b.ss.ID() }
func (s getSession) Log() logr.Logger { return s.b.p.log }
func (s getSession) LegAgent(up jsonrpc.ID) (jsonrpc.ID, bool) {
	return s.b.legAgent(up)
}
func (s getSession) AskOnGET(ctx context.Context, sid, version string, req *jsonrpc.Request) ([]byte, bool) {
	return s.b.askOnGET(ctx, sid, version, req)
}
func (s getSession) TaskStatusNotified(params json.RawMessage) { s.b.taskStatusNotified(params) }

// OwnSent records the last event of the gate session's own stream written to the agent, where
// a later GET with an upstream Last-Event-ID resumes the gate's own (resumePoint).
func (s getSession) OwnSent(n int) {
	s.b.mu.Lock()
	if n > s.b.ownSent {
		s.b.ownSent = n
	}
	s.b.mu.Unlock()
}
