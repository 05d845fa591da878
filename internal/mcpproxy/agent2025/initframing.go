package agent2025

import (
	"bytes"
	"io"
	"mime"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/actgate/actgate/internal/mcpproxy/answerstream"
	"github.com/actgate/actgate/internal/mcpproxy/upstream"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// bufferedWriter holds a handler's answer for serveInitialize to rewrite.
type bufferedWriter struct {
	h      http.Header
	status int
	body   bytes.Buffer
}

func (w *bufferedWriter) Header() http.Header         { return w.h }
func (w *bufferedWriter) Write(b []byte) (int, error) { return w.body.Write(b) }
func (w *bufferedWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

// serveInitialize answers the agent's initialize through the SDK's handler, with the upstream's
// capabilities as written (upstream.WithCapabilities), and, when the upstream answered its own
// initialize on an event stream and the agent accepts one, gives the same answer on one: the
// response as one event, after a priming event and with ids of the gate's own (a resumable
// stream, resume.go) when the upstream's events had ids. Anything else is the SDK's answer as
// it wrote it.
func (p *Handler) serveInitialize(w http.ResponseWriter, r *http.Request) {
	buf := &bufferedWriter{h: w.Header()}
	p.sdk.ServeHTTP(buf, r)
	status := buf.status
	if status == 0 {
		status = http.StatusOK
	}
	mt, _, _ := mime.ParseMediaType(buf.h.Get("Content-Type"))
	var b *bridge
	if status == http.StatusOK && mt == wire.MediaJSON {
		b = p.bridgeByID(buf.h.Get(wire.HeaderSessionID))
	}
	var stream, ids bool
	body := buf.body.Bytes()
	if b != nil {
		stream, ids = b.init.Framing()
		if caps := b.init.UpstreamCapabilities(); caps != nil {
			body = upstream.WithCapabilities(body, caps)
		}
	}
	_, streamOK := wire.Accepts(r.Header.Values("Accept"))
	if _, err := wire.DecodeMessage(body); !stream || !streamOK || err != nil {
		w.Header().Del("Content-Length")
		w.WriteHeader(status)
		_, _ = w.Write(body)
		return
	}
	w.Header().Del("Content-Length")
	s := answerstream.New(w, answerstream.Options{Session: &b.streams})
	s.Start()
	if ids {
		s.UpstreamEvent("", true, true) // the gate's own answer: an id of the gate's
	}
	s.Answer(body)
}

// isInitialize reports whether body is an initialize request (as far as a cheap look tells;
// the SDK decodes it).
func isInitialize(body []byte) bool {
	if !bytes.Contains(body, []byte(`"initialize"`)) {
		return false
	}
	msg, err := wire.DecodeMessage(body)
	if err != nil {
		return false
	}
	req, ok := msg.(*jsonrpc.Request)
	return ok && req.Method == wire.MethodInitialize
}

// initializeToFollow reports whether r is an agent's initialize (for serveInitialize), leaving
// its body readable.
func initializeToFollow(r *http.Request) bool {
	if r.Body == nil {
		return false
	}
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	return err == nil && isInitialize(body)
}
