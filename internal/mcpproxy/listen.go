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

	// maxListensPerAgent bounds the listens one agent holds open on one proxy (each is an open
	// agent stream and, relayed, an upstream request; served, a share of an upstream GET stream).
	maxListensPerAgent = 16
	// maxListenURIs bounds the resources one listen names; maxListenURI one URI's length.
	maxListenURIs = 64
	maxListenURI  = 2048
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

// listenFilter is a subscriptions/listen notification filter: the list changes and the
// resources it asks for.
type listenFilter struct {
	tools, prompts, resources bool
	uris                      []string
}

func (f listenFilter) empty() bool {
	return !f.tools && !f.prompts && !f.resources && len(f.uris) == 0
}

// accepts reports whether the filter takes a change notification of method (uri: the
// resources/updated notification's params.uri).
func (f listenFilter) accepts(method, uri string) bool {
	switch method {
	case wire.NotifyToolsChanged:
		return f.tools
	case wire.NotifyPromptsChanged:
		return f.prompts
	case wire.NotifyResourcesChanged:
		return f.resources
	case wire.NotifyResourceUpdated:
		for _, u := range f.uris {
			if u == uri {
				return true
			}
		}
	}
	return false
}

// MarshalJSON writes the filter as the revision does: only the members it asks for.
func (f listenFilter) MarshalJSON() ([]byte, error) {
	m := map[string]any{}
	if f.tools {
		m["toolsListChanged"] = true
	}
	if f.prompts {
		m["promptsListChanged"] = true
	}
	if f.resources {
		m["resourcesListChanged"] = true
	}
	if len(f.uris) > 0 {
		m["resourceSubscriptions"] = f.uris
	}
	return wire.MarshalNoEscape(m)
}

// isChangeNotification reports whether method is one of the notifications 2026-07-28 delivers
// only on a listen stream.
func isChangeNotification(method string) bool {
	switch method {
	case wire.NotifyToolsChanged, wire.NotifyPromptsChanged, wire.NotifyResourcesChanged, wire.NotifyResourceUpdated:
		return true
	}
	return false
}

// listenRefusal is a JSON-RPC error of a listen that is not opened, with its EF code in data.
func listenRefusal(code int64, efc ef.EFCode, msg string) *jsonrpc.Error {
	data, _ := json.Marshal(map[string]string{MetaEFCode: string(efc)})
	return &jsonrpc.Error{Code: code, Message: "actgate: " + msg, Data: data}
}

// listenLimitErr refuses a listen beyond maxListensPerAgent (-32603, as the TypeScript SDK's
// server answers its own subscription limit).
func listenLimitErr() *jsonrpc.Error {
	return listenRefusal(wire.CodeInternalError, ef.EFListenLimit,
		fmt.Sprintf("subscription limit reached: %d listens of this agent are open", maxListensPerAgent))
}

// parseListen reads a subscriptions/listen's params (the members of a well-formed 2026-07-28
// request, stateless.Parse): notifications is required and an object; its toolsListChanged,
// promptsListChanged and resourcesListChanged are booleans where present; its
// resourceSubscriptions an array of at most maxListenURIs non-empty strings of at most
// maxListenURI bytes (a repeated one counted once). Other members are ignored, as the
// revision's schema ignores them. A malformed filter is refused with -32602 and
// EF_LISTEN_INVALID, one beyond the bounds with -32602 and EF_LISTEN_LIMIT.
func parseListen(params map[string]json.RawMessage) (listenFilter, *jsonrpc.Error) {
	var f listenFilter
	invalid := func(msg string) (listenFilter, *jsonrpc.Error) {
		return listenFilter{}, listenRefusal(wire.CodeInvalidParams, ef.EFListenInvalid, "subscriptions/listen: "+msg)
	}
	raw, ok := params["notifications"]
	if !ok || !stateless.IsJSONObject(raw) {
		return invalid("params.notifications is required and must be an object")
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return invalid("params.notifications must be an object")
	}
	for name, dst := range map[string]*bool{"toolsListChanged": &f.tools, "promptsListChanged": &f.prompts, "resourcesListChanged": &f.resources} {
		v, ok := members[name]
		if !ok {
			continue
		}
		switch string(bytes.TrimSpace(v)) {
		case "true":
			*dst = true
		case "false":
		default:
			return invalid("params.notifications." + name + " must be a boolean")
		}
	}
	v, ok := members["resourceSubscriptions"]
	if !ok {
		return f, nil
	}
	v = bytes.TrimSpace(v)
	if len(v) == 0 || v[0] != '[' {
		return invalid("params.notifications.resourceSubscriptions must be an array of strings")
	}
	var items []json.RawMessage
	if err := json.Unmarshal(v, &items); err != nil {
		return invalid("params.notifications.resourceSubscriptions must be an array of strings")
	}
	if len(items) > maxListenURIs {
		return listenFilter{}, listenRefusal(wire.CodeInvalidParams, ef.EFListenLimit,
			fmt.Sprintf("subscriptions/listen: at most %d resources per listen", maxListenURIs))
	}
	seen := map[string]bool{}
	for _, it := range items {
		it = bytes.TrimSpace(it)
		var uri string
		if len(it) == 0 || it[0] != '"' || json.Unmarshal(it, &uri) != nil || uri == "" {
			return invalid("params.notifications.resourceSubscriptions must hold non-empty strings")
		}
		if len(uri) > maxListenURI {
			return listenFilter{}, listenRefusal(wire.CodeInvalidParams, ef.EFListenLimit,
				fmt.Sprintf("subscriptions/listen: a resource URI is longer than %d bytes", maxListenURI))
		}
		if !seen[uri] {
			seen[uri] = true
			f.uris = append(f.uris, uri)
		}
	}
	return f, nil
}

// honoredFilter is the part of want the upstream can deliver, by the capabilities of its
// initialize result: a list change where it declares listChanged, resources where it declares
// resources.subscribe.
func honoredFilter(want listenFilter, init json.RawMessage) listenFilter {
	var r struct {
		Capabilities struct {
			Tools *struct {
				ListChanged bool `json:"listChanged"`
			} `json:"tools"`
			Prompts *struct {
				ListChanged bool `json:"listChanged"`
			} `json:"prompts"`
			Resources *struct {
				ListChanged bool `json:"listChanged"`
				Subscribe   bool `json:"subscribe"`
			} `json:"resources"`
		} `json:"capabilities"`
	}
	_ = json.Unmarshal(init, &r)
	c := r.Capabilities
	out := listenFilter{
		tools:     want.tools && c.Tools != nil && c.Tools.ListChanged,
		prompts:   want.prompts && c.Prompts != nil && c.Prompts.ListChanged,
		resources: want.resources && c.Resources != nil && c.Resources.ListChanged,
	}
	if c.Resources != nil && c.Resources.Subscribe {
		out.uris = append([]string(nil), want.uris...)
	}
	return out
}

// stampSubscription returns a notification's params with the listen's id in
// _meta["io.modelcontextprotocol/subscriptionId"], every other member as written (absent
// params become an object holding only _meta); false for params or a _meta that are not
// objects.
func stampSubscription(params json.RawMessage, id json.RawMessage) (json.RawMessage, bool) {
	m := map[string]json.RawMessage{}
	if p := bytes.TrimSpace(params); len(p) > 0 && !bytes.Equal(p, []byte("null")) {
		if p[0] != '{' || json.Unmarshal(p, &m) != nil {
			return nil, false
		}
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := m["_meta"]; ok && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		if !stateless.IsJSONObject(raw) || json.Unmarshal(raw, &meta) != nil {
			return nil, false
		}
	}
	meta[wire.MetaSubscriptionID] = id
	mraw, err := wire.MarshalNoEscape(meta)
	if err != nil {
		return nil, false
	}
	m["_meta"] = bytes.TrimSpace(mraw)
	out, err := wire.MarshalNoEscape(m)
	if err != nil {
		return nil, false
	}
	return bytes.TrimSpace(out), true
}

// listener is one open listen on an upstream session.
type listener struct {
	id     json.RawMessage // the listen request's id, as JSON
	filter listenFilter    // what it was acknowledged
	ch     chan []byte     // encoded, tagged notifications
	stop   chan struct{}   // closed when the listen is to end
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
	if h == nil || !isChangeNotification(m.Method) {
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
		if !l.filter.accepts(m.Method, uri) {
			continue
		}
		params, ok := stampSubscription(m.Params, l.id)
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

// takeListen counts one more open listen of agent; false at maxListensPerAgent.
func (st *statelessState) takeListen(agent string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.listens[agent] >= maxListensPerAgent {
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
func (p *Proxy) serveListen(ctx context.Context, w http.ResponseWriter, agent string, sr *stateless.Request) {
	id := sr.Req.ID
	want, perr := parseListen(sr.Params)
	if perr != nil {
		p.log.Info("MCP 2026-07-28 listen refused", "code", perr.Code, "reason", perr.Message)
		wire.WriteRPCError(w, http.StatusOK, id, perr)
		return
	}
	if !p.sl.takeListen(agent) {
		p.log.Info("MCP 2026-07-28 listen refused: the agent has too many open", "code", ef.EFListenLimit, "limit", maxListensPerAgent)
		wire.WriteRPCError(w, http.StatusOK, id, listenLimitErr())
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
	var honored listenFilter
	for try := 0; ; try++ {
		if s, err = p.upstreamSession(ctx, agent, sessionCaps(sr)); err != nil {
			p.log.Info("Upstream session not opened for a listen", "error", err.Error())
			wire.WriteRPCError(w, http.StatusOK, id, p.unavailableErr())
			return
		}
		honored = honoredFilter(want, s.init)
		if honored.empty() {
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
	ackParams, ok := stampSubscription(jsonOrEmpty(map[string]any{"notifications": honored}), idRaw)
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
func (p *Proxy) endListen(write func([]byte) bool, s *upstreamSession, id jsonrpc.ID, idRaw json.RawMessage) {
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

func jsonOrEmpty(v any) json.RawMessage {
	raw, err := wire.MarshalNoEscape(v)
	if err != nil {
		return json.RawMessage("{}")
	}
	return bytes.TrimSpace(raw)
}

// joinListen adds a listen with the filter f to s's hub: the session is subscribed to f's
// resources not subscribed yet (a resource the upstream refuses is taken out of f: the
// acknowledgement names what is honoured), and the session's GET stream is opened if it is not.
// It returns nil without an error when nothing of f is left to listen for.
func (p *Proxy) joinListen(ctx context.Context, s *upstreamSession, id json.RawMessage, f *listenFilter) (*listener, error) {
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
	for _, uri := range f.uris {
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
	f.uris = uris
	if f.empty() {
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
func (p *Proxy) leaveListen(s *upstreamSession, l *listener) {
	h := s.hub
	h.setup.Lock()
	defer h.setup.Unlock()
	h.mu.Lock()
	delete(h.subs, l)
	h.mu.Unlock()
	p.releaseURIs(s, l.filter.uris)
}

// releaseURIs drops one listen's count of each of uris, unsubscribing the session from those no
// listen names any more (unless the session ended). h.setup is held.
func (p *Proxy) releaseURIs(s *upstreamSession, uris []string) {
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
func (p *Proxy) sessionRequest(ctx context.Context, s *upstreamSession, method, uri string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.ConnectTimeout)
	defer cancel()
	upID, _ := jsonrpc.MakeID("actgate-" + strconv.FormatUint(callSeq.Add(1), 10))
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
func (p *Proxy) openListenGET(s *upstreamSession) error {
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
func (p *Proxy) readListenGET(s *upstreamSession, resp *http.Response) {
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
			if msg, err := jsonrpc.DecodeMessage(ev.Data); err == nil {
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
func (p *Proxy) listenGETEnded(ctx context.Context, s *upstreamSession, gen int, err error) {
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
func (p *Proxy) reopenListenGET(s *upstreamSession) {
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
func (p *Proxy) failListens(s *upstreamSession, err error) {
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
func (p *Proxy) refuseSessionRequest(s *upstreamSession, m *jsonrpc.Request) {
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
