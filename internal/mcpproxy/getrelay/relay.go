// Package getrelay is the agent's relayed GET stream of a 2025 session (MCP streamable HTTP,
// "Listening for messages from the server"; docs/architecture.md "Sessions"): the upstream's
// events written as the upstream wrote them, with their ids, retry fields and priming events,
// an upstream id in the gate's namespace rewritten "actgate:u:{id}", a response the upstream
// replays given back under the agent's id (or dropped), a request the upstream puts to the
// agent handed to the session (Session.AskOnGET), and the gate session's own stream merged in
// with ids of the gate's own (Relay.Own). internal/mcpproxy/agent2025 opens the streams (getstream.go);
// this package imports wire and eventlog only.
package getrelay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/actgate/actgate/internal/mcpproxy/eventlog"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
	"github.com/go-logr/logr"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Session is what a relayed GET stream needs of its agent session.
type Session interface {
	// ID is the agent session's id, for logs; Log the proxy's logger.
	ID() string
	Log() logr.Logger
	// LegAgent returns the agent's id of the request the gate sent upstream as up (false:
	// none in flight).
	LegAgent(up jsonrpc.ID) (jsonrpc.ID, bool)
	// AskOnGET puts an upstream's request to the agent and returns the request to write; false
	// when the gate answered it itself.
	AskOnGET(ctx context.Context, sid, version string, req *jsonrpc.Request) ([]byte, bool)
	// TaskStatusNotified is told of a notifications/tasks/status the upstream sent.
	TaskStatusNotified(params json.RawMessage)
	// OwnSent records the index of an event of the gate session's own stream written to the
	// agent.
	OwnSent(n int)
}

// New returns the relay of one agent GET stream answered on w, the upstream's stream resumed
// after upstream id lastUp ("" for none).
func New(w http.ResponseWriter, s Session, lastUp string) *Relay {
	return &Relay{w: w, rc: http.NewResponseController(w), b: s, lastUp: lastUp}
}

// Flush flushes what was written to the agent (its headers).
func (g *Relay) Flush() { _ = g.rc.Flush() }

// Own returns the writer the gate session's own GET stream (the SDK's handler) writes to: each
// of its events is written to the relayed stream with an id of the gate's own.
func (g *Relay) Own() *OwnWriter { return &OwnWriter{g: g, h: http.Header{}} }

// Relay is one agent GET stream: the writer both sources share.
type Relay struct {
	mu     sync.Mutex
	w      http.ResponseWriter
	rc     *http.ResponseController
	b      Session
	lastUp string // the upstream id of the last upstream event written with one
	broken bool
}

// writeLocked writes one event and flushes it; false once the agent is gone. g.mu is held.
func (g *Relay) writeLocked(ev []byte) bool {
	if g.broken {
		return false
	}
	if _, err := g.w.Write(ev); err != nil {
		g.broken = true
		return false
	}
	if err := g.rc.Flush(); err != nil {
		g.broken = true
	}
	return !g.broken
}

// Relay reads the upstream's GET stream to its end and writes each event to the agent.
func (g *Relay) Relay(ctx context.Context, sid, version string, body io.Reader) {
	r := bufio.NewReaderSize(body, 4096)
	var ev []byte // the event's lines as written, each with "\n"
	var parsed wire.EventLines
	var id string
	hasID := false
	for {
		line, err := wire.ReadLine(r)
		if err != nil {
			if err != io.EOF && ctx.Err() == nil {
				g.b.Log().Info("Upstream GET stream ended", "session", g.b.ID(), "error", err.Error())
			}
			return
		}
		if len(line) > 0 {
			if field, value := parsed.Field(line); string(field) == "id" {
				if bytes.HasPrefix(value, []byte(eventlog.Prefix)) {
					line = []byte("id: " + eventlog.Prefix + "u:" + string(value))
				}
				if bytes.IndexByte(value, 0) < 0 { // an id with NUL is ignored (WHATWG SSE)
					id, hasID = string(value), true
				}
			}
			if len(ev)+len(line) > wire.MaxEventSize {
				g.b.Log().Info("Upstream GET stream event too large; stream ended", "session", g.b.ID(), "limit", wire.MaxEventSize)
				return
			}
			ev = append(append(ev, line...), '\n')
			continue
		}
		if len(ev) > 0 && !g.event(ctx, sid, version, ev, parsed.Data, parsed.HasData, id, hasID) {
			return
		}
		parsed.Reset()
		ev, id, hasID = ev[:0], "", false
	}
}

// event handles one upstream event (its lines ev, its data, its id): false once the agent is
// gone.
func (g *Relay) event(ctx context.Context, sid, version string, ev, data []byte, hasData bool, id string, hasID bool) bool {
	out := append(ev, '\n')
	if hasData && len(bytes.TrimSpace(data)) > 0 {
		// Bytes that are not a JSON-RPC message are relayed as written: the agent's to judge.
		msg, _ := wire.DecodeMessage(data)
		switch m := msg.(type) {
		case *jsonrpc.Response:
			// A response the upstream replays on a resumption of an answer stream goes to the
			// agent under the agent's id, settling nothing (legs); any other is dropped.
			agentID, ok := g.b.LegAgent(m.ID)
			if !ok {
				g.b.Log().V(1).Info("Upstream response on the GET stream dropped", "session", g.b.ID())
				return true
			}
			rewritten, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: agentID, Result: m.Result, Error: m.Error})
			if err != nil {
				return true
			}
			out = replaceData(ev, rewritten)
		case *jsonrpc.Request:
			if m.IsCall() {
				rewritten, ok := g.b.AskOnGET(ctx, sid, version, m)
				if !ok {
					return true // answered by the gate, not the agent's to see
				}
				out = replaceData(ev, rewritten)
			} else if m.Method == wire.NotifyTaskStatus {
				g.b.TaskStatusNotified(m.Params)
			}
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if hasID {
		g.lastUp = id
	}
	return g.writeLocked(out)
}

// replaceData returns the event ev with its data lines replaced by one holding data.
func replaceData(ev, data []byte) []byte {
	var out []byte
	wrote := false
	for line := range bytes.SplitSeq(bytes.TrimSuffix(ev, []byte("\n")), []byte("\n")) {
		if field, _, _ := bytes.Cut(line, []byte(":")); string(field) == "data" {
			if !wrote {
				out = append(append(append(out, "data: "...), data...), '\n')
				wrote = true
			}
			continue
		}
		out = append(append(out, line...), '\n')
	}
	return append(out, '\n')
}

// OwnWriter is the http.ResponseWriter the gate session's own GET stream (the SDK's handler)
// writes to: each of its events is written to the relayed stream with an id of the gate's own.
type OwnWriter struct {
	g      *Relay
	h      http.Header
	status int
	buf    []byte
}

// Header implements http.ResponseWriter.
func (o *OwnWriter) Header() http.Header { return o.h }

// Status is the status the SDK's handler answered with (0: none yet).
func (o *OwnWriter) Status() int { return o.status }

// WriteHeader implements http.ResponseWriter.
func (o *OwnWriter) WriteHeader(status int) {
	if o.status == 0 {
		o.status = status
	}
}

// Flush implements http.Flusher: every event is flushed as it is written.
func (o *OwnWriter) Flush() {}

// Write implements http.ResponseWriter: it splits what the SDK writes into events.
func (o *OwnWriter) Write(p []byte) (int, error) {
	if o.status == 0 {
		o.status = http.StatusOK
	}
	if o.status == http.StatusConflict {
		// Another of the agent's GETs carries the gate's own stream (this one resumes an
		// answer stream of the upstream's, or is a second GET).
		o.g.b.Log().V(1).Info("The gate's own GET stream is on another of the agent's GETs", "session", o.g.b.ID())
		return 0, io.ErrClosedPipe
	}
	if o.status != http.StatusOK {
		o.g.b.Log().Info("The gate's own GET stream not opened", "session", o.g.b.ID(), "status", o.status)
		return 0, io.ErrClosedPipe
	}
	if len(o.buf)+len(p) > wire.MaxEventSize {
		return 0, io.ErrShortWrite
	}
	o.buf = append(o.buf, p...)
	for {
		i := bytes.Index(o.buf, []byte("\n\n"))
		if i < 0 {
			return len(p), nil
		}
		ev := o.buf[:i]
		if !o.event(ev) {
			return 0, io.ErrClosedPipe
		}
		o.buf = append(o.buf[:0], o.buf[i+2:]...)
	}
}

// event writes one event of the gate's own stream (the SDK's "id: _N" and data lines).
func (o *OwnWriter) event(ev []byte) bool {
	var parsed wire.EventLines
	n := -1
	for line := range bytes.SplitSeq(ev, []byte("\n")) {
		if field, value := parsed.Field(line); string(field) == "id" {
			if idx, err := strconv.Atoi(strings.TrimPrefix(string(value), "_")); err == nil {
				n = idx
			}
		}
	}
	data := parsed.Data
	if len(data) == 0 {
		return true // the SDK's ": ok" comment
	}
	g := o.g
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]byte, 0, len(data)+64)
	out = append(out, "event: message\n"...)
	if n >= 0 {
		out = append(out, "id: "+eventlog.Prefix+strconv.Itoa(n)+":"+g.lastUp+"\n"...)
	}
	out = append(append(append(out, "data: "...), data...), "\n\n"...)
	if !g.writeLocked(out) {
		return false
	}
	if n >= 0 {
		g.b.OwnSent(n)
	}
	return true
}
