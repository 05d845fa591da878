package agent2025

import (
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// serveDELETE relays the agent's DELETE of its session (MCP streamable HTTP, session
// management) to the upstream session and answers with the upstream's status: a 2xx ends the
// gate's session too (the SDK's handler closes it; its own answer is discarded), any other
// status (405: the server does not let clients end sessions) leaves both sessions open, as it
// does direct. It returns false, having written nothing, when the session has no upstream
// session to relay to, or the upstream cannot be reached: the SDK's handler then ends the
// gate's session on its own.
func (p *Handler) serveDELETE(w http.ResponseWriter, r *http.Request) bool {
	b := p.bridgeByID(r.Header.Get(wire.HeaderSessionID))
	if b == nil || b.agent != p.requestAgent(r.Context()) {
		return false // the SDK's handler answers (sdkAuth refuses another agent)
	}
	b.mu.Lock()
	cs := b.cs
	b.mu.Unlock()
	if cs == nil {
		return false
	}
	version, ok := directVersion(cs)
	if !ok || cs.ID() == "" {
		return false // no upstream session to end
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodDelete, p.cfg.URL, nil)
	if err != nil {
		return false
	}
	req.Header.Set(wire.HeaderSessionID, cs.ID())
	req.Header.Set(wire.HeaderProtocolVersion, version)
	resp, err := p.direct.Do(req)
	if err != nil {
		p.log.Info("Session DELETE not delivered upstream; the gate's session ends", "session", b.ss.ID(), "error", err.Error())
		return false
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		p.sdk.ServeHTTP(httptest.NewRecorder(), r) // ends the gate's session
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
	return true
}
