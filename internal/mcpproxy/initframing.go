package mcpproxy

import (
	"bytes"
	"io"
	"mime"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// initFraming records how the upstream answered the initialize of a bridge's upstream session:
// as an event stream or not, and whether its events carried ids. The gate's own answer to the
// agent's initialize (the SDK session's, application/json) then follows it (serveInitialize).
type initFraming struct {
	mu     sync.Mutex
	stream bool
	ids    bool
}

type initFramingKey struct{}

// observeInit is upstreamTransport's part: on the POST that opens an upstream session (no
// Mcp-Session-Id yet) of a context carrying an initFraming, it records the answer's framing.
func observeInit(r *http.Request, resp *http.Response) {
	f, ok := r.Context().Value(initFramingKey{}).(*initFraming)
	if !ok || r.Method != http.MethodPost || r.Header.Get(headerSessionID) != "" || resp == nil {
		return
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt != mediaSSE {
		return
	}
	f.mu.Lock()
	f.stream = true
	f.mu.Unlock()
	resp.Body = &idSpotter{ReadCloser: resp.Body, f: f, bol: true}
}

// idSpotter notes an "id:" field at the start of a line of the stream it reads.
type idSpotter struct {
	io.ReadCloser
	f   *initFraming
	bol bool // the next byte starts a line
	got int  // bytes of "id:" matched at the line's start
}

func (s *idSpotter) Read(p []byte) (int, error) {
	n, err := s.ReadCloser.Read(p)
	for _, c := range p[:n] {
		switch {
		case c == '\n' || c == '\r':
			s.bol, s.got = true, 0
		case s.bol && s.got < 3 && c == "id:"[s.got]:
			s.got++
			if s.got == 3 {
				s.f.mu.Lock()
				s.f.ids = true
				s.f.mu.Unlock()
				s.bol = false
			}
		default:
			s.bol, s.got = false, 0
		}
	}
	return n, err
}

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

// serveInitialize answers the agent's initialize through the SDK's handler and, when the
// upstream answered its own initialize on an event stream, gives the same answer on one: the
// response as one event, after a priming event and with ids of the gate's own (a resumable
// stream, resume.go) when the upstream's events had ids. Anything else is the SDK's answer as
// it wrote it.
func (p *Proxy) serveInitialize(w http.ResponseWriter, r *http.Request) {
	buf := &bufferedWriter{h: w.Header()}
	p.sdk.ServeHTTP(buf, r)
	status := buf.status
	if status == 0 {
		status = http.StatusOK
	}
	mt, _, _ := mime.ParseMediaType(buf.h.Get("Content-Type"))
	var b *bridge
	if status == http.StatusOK && mt == mediaJSON {
		b = p.bridgeByID(buf.h.Get(headerSessionID))
	}
	var f initFraming
	if b != nil {
		b.init.mu.Lock()
		f.stream, f.ids = b.init.stream, b.init.ids
		b.init.mu.Unlock()
	}
	if _, err := jsonrpc.DecodeMessage(buf.body.Bytes()); !f.stream || err != nil {
		w.WriteHeader(status)
		_, _ = w.Write(buf.body.Bytes())
		return
	}
	w.Header().Del("Content-Length")
	s := &agentStream{w: w, b: b}
	s.start()
	if f.ids {
		s.upstreamEvent(true, true)
	}
	s.answer(buf.body.Bytes())
}

// isInitialize reports whether body is an initialize request (as far as a cheap look tells;
// the SDK decodes it).
func isInitialize(body []byte) bool {
	if !bytes.Contains(body, []byte(`"initialize"`)) {
		return false
	}
	msg, err := jsonrpc.DecodeMessage(body)
	if err != nil {
		return false
	}
	req, ok := msg.(*jsonrpc.Request)
	return ok && req.Method == methodInitialize
}

// initializeToFollow reports whether r is an agent's initialize that accepts an event stream
// (so that serveInitialize may answer on one), leaving its body readable.
func initializeToFollow(r *http.Request) bool {
	if _, streamOK := accepts(r.Header.Values("Accept")); !streamOK || r.Body == nil {
		return false
	}
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	return err == nil && isInitialize(body)
}
