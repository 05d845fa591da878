package agent2025

import (
	"context"
	"net/http"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/mcpproxy/admission"
	"github.com/actgate/actgate/internal/mcpproxy/answerstream"
	"github.com/actgate/actgate/internal/mcpproxy/eventlog"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// Resumption of the gate's answer streams: the streams and their logs are
// internal/mcpproxy/answerstream's (its resume.go says what is resumable and how an id is
// written); the agent's GET with Last-Event-ID on its session is answered here (serveResume).

// runDetachable runs work for the handler of the agent's request (answerstream.RunDetachable),
// bounded by CallTimeout once the agent's stream is detached.
func (p *Handler) runDetachable(r *http.Request, stream *answerstream.Stream, work func(ctx context.Context)) {
	answerstream.RunDetachable(r, stream, p.cfg.CallTimeout, work)
}

// serveResume answers the agent's GET with Last-Event-ID that names an event of one of its
// session's resumable answer streams the gate answers from its log: an id of the gate's own,
// or an upstream id of a stream the gate is still reading. It returns false, having written
// nothing, for any other id (serveGET relays it to the upstream, which answers it) and for a
// request the SDK's handler answers. An id that is not one an event stream can carry, or longer
// than wire.MaxEventID, is refused (HTTP 400, EF_EVENT_ID_INVALID).
func (p *Handler) serveResume(w http.ResponseWriter, r *http.Request) bool {
	if admission.Rebinding(r) {
		return false // refused by the SDK's handler (DNS rebinding: 403)
	}
	b := p.bridgeByID(r.Header.Get(wire.HeaderSessionID))
	if b == nil {
		return false // the SDK's handler answers an unknown session
	}
	last := r.Header.Get(wire.HeaderLastEventID)
	if err := eventlog.CheckLastEventID(last); err != nil {
		http.Error(w, string(ef.EFEventIDInvalid)+": "+err.Error(), http.StatusBadRequest)
		return true
	}
	if b.agent != p.requestAgent(r.Context()) {
		http.Error(w, "actgate: the session belongs to another agent", http.StatusForbidden)
		return true
	}
	l, n := b.streams.Logs.For(last)
	if l == nil {
		if _, _, own := eventlog.ParseID(last); own {
			http.Error(w, "actgate: no stream to resume for that Last-Event-ID", http.StatusNotFound)
			return true
		}
		return false // an upstream id: the upstream's to answer (serveGET)
	}
	evs, done, wake, ok := l.After(n)
	if !ok {
		http.Error(w, string(ef.EFStreamLogLimit)+": actgate: the stream can no longer be resumed: its log passed the gate's bounds", http.StatusNotFound)
		return true
	}
	select {
	case l.Resumed() <- struct{}{}:
	default:
	}
	h := w.Header()
	h.Set("Content-Type", wire.MediaSSE)
	h.Set("Cache-Control", "no-cache, no-transform")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	for {
		for _, ev := range evs {
			if _, err := w.Write(ev); err != nil {
				return true
			}
			n++
		}
		_ = rc.Flush()
		if done {
			return true
		}
		select {
		case <-wake:
		case <-r.Context().Done():
			return true
		}
		if evs, done, wake, ok = l.After(n); !ok {
			return true
		}
	}
}
