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
	"net/http/httptrace"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/logfield"
	"github.com/actgate/actgate/internal/mcpproxy/stateless"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// subscriptions/listen in front of a stateful upstream (docs/architecture.md "Listening toward
// a 2025 upstream"). MCP 2026-07-28 replaced the session's standalone GET stream and
// resources/subscribe with subscriptions/listen: a long-lived answer stream that opens with
// notifications/subscriptions/acknowledged (the honoured part of the request's filter) and then
// carries the list_changed and resources/updated notifications the filter names, each tagged
// with the listen's request id in _meta["io.modelcontextprotocol/subscriptionId"]. A 2025
// server sends those notifications on its session's GET stream, and resources/updated only for
// what the session subscribed to. The gate serves the listen itself from the agent's upstream
// session (the one its requests' client capabilities name, stateless_serve.go): it opens the
// session's GET stream with the session's first listen and holds it while the session lasts
// (reopened by the next listen when the upstream ends it), subscribes the session to the resources the
// listens name (counted, unsubscribed when the last listen naming one ends), and hands each
// change notification of the session (from the GET stream, or from the answer stream of any of
// the session's requests) to the listens whose filter takes it.
const (

	// listenBuffer is the notifications queued for one listen; a listen that falls further
	// behind is ended (its agent reopens it and lists again).
	listenBuffer = 64
	// listenKeepAlive is the interval of the comment lines that keep an idle listen stream open
	// through intermediaries.
	listenKeepAlive = 15 * time.Second
	// listenGETMinLife is the least time between two reopenings of an upstream GET stream the
	// upstream ends while listens are open (a server that keeps ending it gets one GET a
	// second while they are).
	listenGETMinLife = time.Second
)

// listener is one open listen on an upstream session.
type listener struct {
	id     json.RawMessage        // the listen request's id, as JSON
	filter stateless.ListenFilter // what it was acknowledged
	ch     chan []byte            // encoded, tagged notifications
	stop   chan struct{}          // closed when the listen is to end
	once   sync.Once
	final  bool // the listen ends gracefully (its result is written); set before stop closes
}

// end ends the listen: gracefully (the agent gets the listen's result) when its upstream
// session ended, abruptly when it fell behind or its upstream stream failed.
func (l *listener) end(graceful bool) {
	l.once.Do(func() {
		l.final = graceful
		close(l.stop)
	})
}

// listenHub is an upstream session's listens and what they share: the session's GET stream
// and its resource subscriptions.
type listenHub struct {
	setup sync.Mutex // one listen's start or end at a time (GET stream, subscriptions)

	mu       sync.Mutex
	subs     map[*listener]struct{}
	uris     map[string]int // subscribed upstream → listens naming it
	getStop  context.CancelFunc
	getGen   int
	reopened time.Time // when the GET stream was last reopened after the upstream ended it
	ended    bool      // the session ended: no listen joins
}

// publish hands a change notification of the session to each listen whose filter takes it,
// tagged with that listen's id. A listen whose queue is full is ended.
func (h *listenHub) publish(m *jsonrpc.Request) {
	if h == nil || !stateless.IsChangeNotification(m.Method) {
		return
	}
	var uri string
	if m.Method == wire.NotifyResourceUpdated {
		var p struct {
			URI string `json:"uri"`
		}
		if json.Unmarshal(m.Params, &p) != nil || p.URI == "" {
			return
		}
		uri = p.URI
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for l := range h.subs {
		if !l.filter.Accepts(m.Method, uri) {
			continue
		}
		params, ok := stateless.StampSubscription(m.Params, l.id)
		if !ok {
			return // the same params for every listen
		}
		out, err := jsonrpc.EncodeMessage(&jsonrpc.Request{Method: m.Method, Params: params})
		if err != nil {
			return
		}
		select {
		case l.ch <- out:
		default:
			l.end(false)
		}
	}
}

// end ends every listen of the session gracefully (the session ended) and its GET stream.
func (h *listenHub) end() {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.ended = true
	for l := range h.subs {
		l.end(true)
	}
	if h.getStop != nil {
		h.getStop()
		h.getStop = nil
	}
	h.mu.Unlock()
}

// takeListen counts one more open listen of agent; false at stateless.MaxListensPerAgent.
func (st *statelessState) takeListen(agent string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.listens[agent] >= stateless.MaxListensPerAgent {
		return false
	}
	if st.listens == nil {
		st.listens = map[string]int{}
	}
	st.listens[agent]++
	return true
}

func (st *statelessState) releaseListen(agent string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if n := st.listens[agent] - 1; n > 0 {
		st.listens[agent] = n
	} else {
		delete(st.listens, agent)
	}
}

// serveListen answers a 2026-07-28 subscriptions/listen in front of a stateful upstream: the
// acknowledgement, then the session's change notifications the honoured filter takes, until the
// agent closes the stream (nothing more is written), the upstream session ends (the listen's
// result is written, the revision's graceful end), or the listen falls behind or its upstream
// stream fails (the stream is closed without a result, as a disconnect). A filter the upstream
// can honour none of is acknowledged empty and ended at once with its result.
func (p *Handler) serveListen(ctx context.Context, w http.ResponseWriter, agent string, sr *stateless.Request) {
	id := sr.Req.ID
	want, perr := stateless.ParseListen(sr.Params)
	if perr != nil {
		p.log.Info("MCP 2026-07-28 listen refused", "code", perr.Code, "reason", perr.Message)
		wire.WriteRPCError(w, http.StatusOK, id, perr)
		return
	}
	if !p.sl.takeListen(agent) {
		p.log.Info("MCP 2026-07-28 listen refused: the agent has too many open", "code", ef.EFListenLimit, "limit", stateless.MaxListensPerAgent)
		wire.WriteRPCError(w, http.StatusOK, id, stateless.ListenLimitErr())
		return
	}
	defer p.sl.releaseListen(agent)
	idRaw, err := json.Marshal(id.Raw())
	if err != nil {
		wire.WriteRPCError(w, http.StatusOK, id, &jsonrpc.Error{Code: wire.CodeInvalidRequest, Message: "actgate: subscriptions/listen needs a request id"})
		return
	}
	var s *upstreamSession
	var l *listener
	var honored stateless.ListenFilter
	for try := 0; ; try++ {
		if s, err = p.upstreamSession(ctx, agent, sessionCaps(sr)); err != nil {
			p.log.Info("Upstream session not opened for a listen", "error", err.Error())
			wire.WriteRPCError(w, http.StatusOK, id, p.unavailableErr())
			return
		}
		honored = stateless.HonoredFilter(want, s.init)
		if honored.Empty() {
			break
		}
		l, err = p.joinListen(ctx, s, idRaw, &honored)
		if errors.Is(err, errSessionGone) && try == 0 {
			p.dropUpstreamSession(s)
			continue
		}
		if err != nil {
			p.log.Info("Listen not opened upstream", "upstreamSession", s.id, "error", err.Error())
			wire.WriteRPCError(w, http.StatusOK, id, p.unavailableErr())
			return
		}
		break
	}
	if l != nil {
		defer p.leaveListen(s, l)
	}
	// The listen lives until one of its ends, not within a POST's write bound.
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", wire.MediaSSE)
	h.Set("Cache-Control", "no-cache, no-transform")
	w.WriteHeader(http.StatusOK)
	write := func(b []byte) bool {
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	ackParams, ok := stateless.StampSubscription(wire.JSONOrEmpty(map[string]any{"notifications": honored}), idRaw)
	if !ok {
		return
	}
	ack, err := jsonrpc.EncodeMessage(&jsonrpc.Request{Method: wire.NotifyListenAck, Params: ackParams})
	if err != nil || !write(listenEvent(ack)) {
		return
	}
	if l == nil {
		p.endListen(write, s, id, idRaw)
		return
	}
	tick := time.NewTicker(listenKeepAlive)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case out := <-l.ch:
			if !write(listenEvent(out)) {
				return
			}
		case <-l.stop:
			if l.final && drain(l.ch, write) {
				p.endListen(write, s, id, idRaw)
			}
			return
		case <-tick.C:
			if !write([]byte(": keepalive\n\n")) {
				return
			}
		}
	}
}

// endListen writes a listen's result: its graceful end, with its id and the upstream's
// serverInfo in _meta.
func (p *Handler) endListen(write func([]byte) bool, s *upstreamSession, id jsonrpc.ID, idRaw json.RawMessage) {
	meta := map[string]json.RawMessage{wire.MetaSubscriptionID: idRaw}
	var init struct {
		ServerInfo json.RawMessage `json:"serverInfo"`
	}
	if json.Unmarshal(s.init, &init) == nil && stateless.IsJSONObject(init.ServerInfo) {
		meta[wire.MetaServerInfo] = init.ServerInfo
	}
	res, err := wire.MarshalNoEscape(map[string]any{"resultType": wire.ResultTypeComplete, "_meta": meta})
	if err != nil {
		return
	}
	out, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Result: bytes.TrimSpace(res)})
	if err == nil {
		write(listenEvent(out))
	}
}

// drain writes what is queued in ch (what the session sent before the listen ended); false
// once a write fails.
func drain(ch chan []byte, write func([]byte) bool) bool {
	for {
		select {
		case out := <-ch:
			if !write(listenEvent(out)) {
				return false
			}
		default:
			return true
		}
	}
}

func listenEvent(data []byte) []byte {
	out := make([]byte, 0, len(data)+24)
	out = append(out, "event: message\ndata: "...)
	out = append(out, data...)
	return append(out, "\n\n"...)
}

// joinListen adds a listen with the filter f to s's hub: the session is subscribed to f's
// resources not subscribed yet (a resource the upstream refuses is taken out of f: the
// acknowledgement names what is honoured), and the session's GET stream is opened if it is not.
// It returns nil without an error when nothing of f is left to listen for.
func (p *Handler) joinListen(ctx context.Context, s *upstreamSession, id json.RawMessage, f *stateless.ListenFilter) (*listener, error) {
	h := s.hub
	h.setup.Lock()
	defer h.setup.Unlock()
	h.mu.Lock()
	ended := h.ended
	h.mu.Unlock()
	if ended {
		return nil, errSessionGone
	}
	var uris []string
	for _, uri := range f.URIs {
		h.mu.Lock()
		n := h.uris[uri]
		h.mu.Unlock()
		if n == 0 {
			if err := p.sessionRequest(ctx, s, wire.MethodSubscribe, uri); err != nil {
				if errors.Is(err, errSessionGone) {
					p.releaseURIs(s, uris)
					return nil, err
				}
				p.log.Info("Upstream refused a resource subscription of a listen", "upstreamSession", s.id, "error", err.Error())
				continue
			}
		}
		h.mu.Lock()
		if h.uris == nil {
			h.uris = map[string]int{}
		}
		h.uris[uri]++
		h.mu.Unlock()
		uris = append(uris, uri)
	}
	f.URIs = uris
	if f.Empty() {
		return nil, nil
	}
	h.mu.Lock()
	open := h.getStop != nil
	h.mu.Unlock()
	if !open {
		if err := p.openListenGET(s); err != nil {
			p.releaseURIs(s, uris)
			return nil, err
		}
	}
	l := &listener{id: id, filter: *f, ch: make(chan []byte, listenBuffer), stop: make(chan struct{})}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended {
		return nil, errSessionGone
	}
	if h.subs == nil {
		h.subs = map[*listener]struct{}{}
	}
	h.subs[l] = struct{}{}
	return l, nil
}

// leaveListen removes l from s's hub; the resources no other listen names are unsubscribed.
// The session's GET stream stays open for the listens to come: a 2025 client holds one GET
// stream for its session's life, and a server may refuse a second one (HTTP 409) until it
// notices that the first has gone.
func (p *Handler) leaveListen(s *upstreamSession, l *listener) {
	h := s.hub
	h.setup.Lock()
	defer h.setup.Unlock()
	h.mu.Lock()
	delete(h.subs, l)
	h.mu.Unlock()
	p.releaseURIs(s, l.filter.URIs)
}

// releaseURIs drops one listen's count of each of uris, unsubscribing the session from those no
// listen names any more (unless the session ended). h.setup is held.
func (p *Handler) releaseURIs(s *upstreamSession, uris []string) {
	h := s.hub
	for _, uri := range uris {
		h.mu.Lock()
		h.uris[uri]--
		last := h.uris[uri] <= 0
		if last {
			delete(h.uris, uri)
		}
		ended := h.ended
		h.mu.Unlock()
		if last && !ended {
			ctx, cancel := context.WithTimeout(context.Background(), p.cfg.ConnectTimeout)
			if err := p.sessionRequest(ctx, s, wire.MethodUnsubscribe, uri); err != nil {
				p.log.Info("Upstream resource subscription not ended", "upstreamSession", s.id, "error", err.Error())
			}
			cancel()
		}
	}
}

// sessionHeaders are the headers of the gate's own messages on upstream session s.
func sessionHeaders(s *upstreamSession) http.Header {
	h := http.Header{}
	if s.id != "" {
		h.Set(wire.HeaderSessionID, s.id)
	}
	h.Set(wire.HeaderProtocolVersion, s.version)
	return h
}

// sessionRequest sends resources/subscribe or resources/unsubscribe of uri on s (bounded by
// ConnectTimeout); errSessionGone when the upstream no longer knows the session.
func (p *Handler) sessionRequest(ctx context.Context, s *upstreamSession, method, uri string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.ConnectTimeout)
	defer cancel()
	upID, _ := jsonrpc.MakeID("actgate-" + strconv.FormatUint(wire.CallSeq.Add(1), 10))
	params, err := wire.MarshalNoEscape(map[string]string{"uri": uri})
	if err != nil {
		return err
	}
	body, err := jsonrpc.EncodeMessage(&jsonrpc.Request{ID: upID, Method: method, Params: bytes.TrimSpace(params)})
	if err != nil {
		return err
	}
	resp, status, err := p.slExchange(ctx, sessionHeaders(s), body, upID)
	if status == http.StatusNotFound {
		return errSessionGone
	}
	if err != nil {
		return err
	}
	if resp.Error != nil {
		return fmt.Errorf("mcpproxy: upstream %s: %s", method, safeRPC(resp.Error))
	}
	return nil
}

// listenHeadersGrace is how long opening a listen's upstream GET waits, once the request is
// written, for the upstream's answer: a server that has answered has registered the stream, so
// no change it announces after the acknowledgement is lost.
const listenHeadersGrace = time.Second

// openListenGET opens s's upstream GET stream and reads it in the background until the
// upstream ends it or the session ends. It returns once the upstream has answered the request,
// or listenHeadersGrace after it was written (within ConnectTimeout): a server may send the
// stream's headers only with its first event. A refusal that comes later (HTTP 404: the session
// is gone; another status) ends the listens then (listenGETEnded). h.setup is held.
func (p *Handler) openListenGET(s *upstreamSession) error {
	ctx, cancel := context.WithCancel(context.Background())
	wrote := make(chan struct{})
	var once sync.Once
	sent := func() { once.Do(func() { close(wrote) }) }
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { sent() },
	}), http.MethodGet, p.cfg.URL, nil)
	if err != nil {
		cancel()
		return err
	}
	for k, vs := range sessionHeaders(s) {
		req.Header[k] = vs
	}
	req.Header.Set("Accept", wire.MediaSSE)
	h := s.hub
	h.mu.Lock()
	h.getGen++
	gen := h.getGen
	h.getStop = cancel
	h.mu.Unlock()
	failed := make(chan error, 1)
	answered := make(chan struct{})
	go func() {
		defer cancel()
		resp, err := p.direct.Do(req)
		if err == nil {
			mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
			if resp.StatusCode != http.StatusOK || mt != wire.MediaSSE {
				_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
				_ = resp.Body.Close()
				err = fmt.Errorf("mcpproxy: upstream answered the session's GET with HTTP %d (%s)", resp.StatusCode, wire.Clip(mt, 64))
				if resp.StatusCode == http.StatusNotFound {
					err = errSessionGone
				}
			}
		}
		if err != nil {
			failed <- err
			sent()
			close(answered)
			p.listenGETEnded(ctx, s, gen, err)
			return
		}
		close(answered)
		p.readListenGET(s, resp)
		p.listenGETEnded(ctx, s, gen, nil)
	}()
	t := time.NewTimer(p.cfg.ConnectTimeout)
	defer t.Stop()
	select {
	case <-wrote:
	case <-t.C:
		cancel()
		return fmt.Errorf("mcpproxy: the session's GET was not sent within %s", p.cfg.ConnectTimeout)
	}
	grace := time.NewTimer(listenHeadersGrace)
	defer grace.Stop()
	select {
	case <-answered:
	case <-grace.C:
	}
	select {
	case err := <-failed:
		return err
	default:
		return nil
	}
}

// readListenGET reads s's upstream GET stream to its end: its change notifications go to the
// listens, a request on it is answered with an error (a 2026-07-28 agent has no stream to be
// asked on outside a request of its own), anything else is dropped.
func (p *Handler) readListenGET(s *upstreamSession, resp *http.Response) {
	defer resp.Body.Close()
	r := bufio.NewReaderSize(resp.Body, 4096)
	var ev wire.EventLines
	for {
		line, err := wire.ReadLine(r)
		if err != nil {
			return
		}
		if len(line) > 0 {
			if ev.Field(line); len(ev.Data) > wire.MaxEventSize {
				p.log.Info("Upstream GET stream event too large; stream ended", "upstreamSession", s.id, "limit", wire.MaxEventSize)
				return
			}
			continue
		}
		if ev.HasData && len(ev.Data) > 0 && (ev.Name == "" || ev.Name == "message") {
			if msg, err := wire.DecodeMessage(ev.Data); err == nil {
				if m, ok := msg.(*jsonrpc.Request); ok {
					if m.IsCall() {
						go p.refuseSessionRequest(s, m)
					} else {
						s.hub.publish(m)
					}
				}
			}
		}
		ev.Reset()
	}
}

// listenGETEnded handles the end of s's GET stream gen (err: why it was not opened). While
// listens are open, a stream the upstream ends is reopened, at most once per listenGETMinLife
// (the upstream's answer says whether the session is still there); an upstream that no longer
// knows the session ends the session (its listens get their results), and any other refusal
// ends the listens as a disconnect. A stream the gate closed, or one replaced meanwhile, is not
// acted on.
func (p *Handler) listenGETEnded(ctx context.Context, s *upstreamSession, gen int, err error) {
	h := s.hub
	h.mu.Lock()
	current := h.getGen == gen && h.getStop != nil
	if current {
		h.getStop = nil
	}
	open := len(h.subs) > 0 && !h.ended
	wait := listenGETMinLife - time.Since(h.reopened)
	h.mu.Unlock()
	switch {
	case !current || ctx.Err() != nil || !open:
	case err != nil:
		p.failListens(s, err)
	case wait <= 0:
		p.reopenListenGET(s)
	default:
		time.AfterFunc(wait, func() { p.reopenListenGET(s) })
	}
}

// reopenListenGET opens s's GET stream again for its listens, unless one is open already (a
// listen that joined meanwhile opened it) or no listen is left.
func (p *Handler) reopenListenGET(s *upstreamSession) {
	h := s.hub
	h.setup.Lock()
	defer h.setup.Unlock()
	h.mu.Lock()
	settled := h.getStop != nil || len(h.subs) == 0 || h.ended
	if !settled {
		h.reopened = time.Now()
	}
	h.mu.Unlock()
	if settled {
		return
	}
	if err := p.openListenGET(s); err != nil {
		p.failListens(s, err)
	}
}

// failListens ends s's listens because its GET stream could not be opened: with the session
// when the upstream no longer knows it, else as a disconnect.
func (p *Handler) failListens(s *upstreamSession, err error) {
	if errors.Is(err, errSessionGone) {
		p.dropUpstreamSession(s)
		return
	}
	p.log.Info("Upstream GET stream of a session's listens not reopened; the listens are closed", "upstreamSession", s.id, "error", err.Error())
	h := s.hub
	h.mu.Lock()
	for l := range h.subs {
		l.end(false)
	}
	h.mu.Unlock()
}

// refuseSessionRequest answers an upstream request of s's GET stream with an error.
func (p *Handler) refuseSessionRequest(s *upstreamSession, m *jsonrpc.Request) {
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.ConnectTimeout)
	defer cancel()
	body, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: m.ID, Error: &jsonrpc.Error{Code: wire.CodeMethodNotFound,
		Message: "actgate: the client speaks MCP 2026-07-28 and takes no request outside one of its own"}})
	if err != nil {
		return
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return
	}
	for k, vs := range sessionHeaders(s) {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", wire.MediaJSON)
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := p.direct.Do(req)
	if err != nil {
		p.log.Info("Answer not delivered upstream", "method", logfield.Bound(m.Method), "error", err.Error())
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
}
