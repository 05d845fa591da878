package agent2026

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/actgate/actgate/internal/jcs"
	"github.com/actgate/actgate/internal/mcpproxy/stateless"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

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
	if sr == nil {
		return "{}"
	}
	raw := sr.Meta()[wire.MetaClientCapabilities]
	if !stateless.IsJSONObject(raw) {
		return "{}"
	}
	return canonicalCaps.of(raw)
}

// maxCanonicalCaps bounds the capability texts whose canonical form is kept, and
// maxCachedCapsText the length of one: an agent sends the same capabilities on every request,
// and the canonical form is computed once for each text. The cache holds at most
// maxCanonicalCaps × 2 × maxCachedCapsText bytes of text; a longer text is canonicalized each
// time.
const (
	maxCanonicalCaps  = 256
	maxCachedCapsText = 4 << 10
)

// capsCache maps a capabilities object as written to its canonical form ("{}" when it has
// none), bounded by maxCanonicalCaps: when full it is emptied, so agents that vary their
// capabilities cost a canonicalization per request and no memory beyond the bound.
type capsCache struct {
	mu sync.Mutex
	m  map[string]string
}

var canonicalCaps = &capsCache{m: map[string]string{}}

func (c *capsCache) of(raw json.RawMessage) string {
	c.mu.Lock()
	canon, ok := c.m[string(raw)]
	c.mu.Unlock()
	if ok {
		return canon
	}
	canon = "{}"
	if b, err := jcs.Canonicalize(raw, jcs.Full); err == nil {
		canon = string(b)
	}
	if len(raw) > maxCachedCapsText || len(canon) > maxCachedCapsText {
		return canon
	}
	c.mu.Lock()
	if len(c.m) >= maxCanonicalCaps {
		clear(c.m)
	}
	c.m[string(raw)] = canon
	c.mu.Unlock()
	return canon
}

// sessionKey names an agent's upstream session for the capabilities caps.
func sessionKey(agent, caps string) string {
	return agent + "\x00" + caps
}

// upstreamMode returns the upstream's mode, probing it the first time (and after a probe that
// could not reach it).
func (p *Handler) upstreamMode(ctx context.Context) (upstreamMode, error) {
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
func (p *Handler) probeUpstream(ctx context.Context) (upstreamMode, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.ConnectTimeout)
	defer cancel()
	id, _ := jsonrpc.MakeID("actgate-discover-" + strconv.FormatUint(wire.CallSeq.Add(1), 10))
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

// upstreamSession returns the agent's upstream session of a stateful upstream for the client
// capabilities caps (canonical JSON), opening it (initialize at statelessUpstreamVersion
// declaring caps, then notifications/initialized) if there is none. Opening one beyond
// maxSessionsPerAgent closes the agent's oldest.
func (p *Handler) upstreamSession(ctx context.Context, agent, caps string) (*upstreamSession, error) {
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
	id, _ := jsonrpc.MakeID("actgate-init-" + strconv.FormatUint(wire.CallSeq.Add(1), 10))
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
	if json.Unmarshal(answer.Result, &init) != nil || !wire.StatefulVersions[init.ProtocolVersion] {
		return nil, fmt.Errorf("%w: initialize negotiated no stateful version", errNoUpstream)
	}
	s = &upstreamSession{id: resp.Header.Get(wire.HeaderSessionID), version: init.ProtocolVersion, init: answer.Result,
		agent: agent, key: key, opened: wire.CallSeq.Add(1), hub: &listenHub{}}
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
func (p *Handler) dropUpstreamSession(s *upstreamSession) {
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

// Close ends the upstream sessions held for 2026-07-28 agents (a DELETE each, in the
// background: no one waits for the upstream's answer).
func (p *Handler) Close() {
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
func (p *Handler) deleteUpstreamSessions(ss []*upstreamSession) {
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
