package mcpproxy

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"sync"

	"github.com/actgate/actgate/internal/mcpproxy/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// initFraming records how the upstream answered the initialize of a bridge's upstream session:
// as an event stream or not, and whether its events carried ids. The gate's own answer to the
// agent's initialize (the SDK session's, application/json) then follows it (serveInitialize).
type initFraming struct {
	mu     sync.Mutex
	stream bool
	ids    bool
	// answer is the upstream's answer to that initialize as read, at most wire.MaxEventSize bytes:
	// where the gate's answer to the agent takes the upstream's capabilities from, as written
	// (upstreamCapabilities).
	answer bytes.Buffer
}

type initFramingKey struct{}

// observeInit is upstreamTransport's part: on the POST that opens an upstream session (no
// Mcp-Session-Id yet) of a context carrying an initFraming, it records the answer's framing.
func observeInit(r *http.Request, resp *http.Response) {
	f, ok := r.Context().Value(initFramingKey{}).(*initFraming)
	if !ok || r.Method != http.MethodPost || r.Header.Get(wire.HeaderSessionID) != "" || resp == nil {
		return
	}
	f.mu.Lock()
	f.answer.Reset()
	f.mu.Unlock()
	resp.Body = &answerCopy{ReadCloser: resp.Body, f: f}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt != wire.MediaSSE {
		return
	}
	f.mu.Lock()
	f.stream = true
	f.mu.Unlock()
	resp.Body = &idSpotter{ReadCloser: resp.Body, f: f, bol: true}
}

// answerCopy keeps what is read of the upstream's initialize answer (initFraming.answer).
type answerCopy struct {
	io.ReadCloser
	f *initFraming
}

func (c *answerCopy) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.f.mu.Lock()
	if room := wire.MaxEventSize - c.f.answer.Len(); room > 0 {
		c.f.answer.Write(p[:min(n, room)])
	}
	c.f.mu.Unlock()
	return n, err
}

// upstreamCapabilities returns the capabilities member of the upstream's initialize result as
// the upstream wrote it, from its answer (a JSON body, or the response event of an event
// stream); nil when it is not there.
func (f *initFraming) upstreamCapabilities() json.RawMessage {
	f.mu.Lock()
	raw := bytes.Clone(f.answer.Bytes())
	stream := f.stream
	f.mu.Unlock()
	msgs := [][]byte{raw}
	if stream {
		msgs = msgs[:0]
		for event := range bytes.SplitSeq(bytes.ReplaceAll(raw, []byte("\r\n"), []byte("\n")), []byte("\n\n")) {
			var data []byte
			for line := range bytes.SplitSeq(event, []byte("\n")) {
				if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
					if len(data) > 0 {
						data = append(data, '\n')
					}
					data = append(data, bytes.TrimPrefix(v, []byte(" "))...)
				}
			}
			msgs = append(msgs, data)
		}
	}
	for _, m := range msgs {
		msg, err := jsonrpc.DecodeMessage(m)
		if err != nil {
			continue
		}
		if resp, ok := msg.(*jsonrpc.Response); ok && resp.Error == nil {
			var r struct {
				Capabilities json.RawMessage `json:"capabilities"`
			}
			if json.Unmarshal(resp.Result, &r) == nil && wire.IsObject(r.Capabilities) {
				return r.Capabilities
			}
		}
	}
	return nil
}

// withCapabilities returns the gate's initialize answer (one JSON-RPC response) with the
// upstream's capabilities as written (members the SDK's types do not model, such as tasks,
// included), plus tools, always (the virtual tool); body unchanged when it cannot.
func withCapabilities(body []byte, caps json.RawMessage) []byte {
	msg, err := jsonrpc.DecodeMessage(body)
	resp, ok := msg.(*jsonrpc.Response)
	if err != nil || !ok || resp.Error != nil {
		return body
	}
	var result, c map[string]json.RawMessage
	if json.Unmarshal(resp.Result, &result) != nil || json.Unmarshal(caps, &c) != nil || result == nil {
		return body
	}
	if _, ok := c["tools"]; !ok {
		c["tools"] = json.RawMessage("{}")
	}
	if result["capabilities"], err = wire.MarshalNoEscape(c); err != nil {
		return body
	}
	if resp.Result, err = wire.MarshalNoEscape(result); err != nil {
		return body
	}
	out, err := jsonrpc.EncodeMessage(resp)
	if err != nil {
		return body
	}
	return out
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

// serveInitialize answers the agent's initialize through the SDK's handler, with the upstream's
// capabilities as written (withCapabilities), and, when the upstream answered its own
// initialize on an event stream and the agent accepts one, gives the same answer on one: the
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
	if status == http.StatusOK && mt == wire.MediaJSON {
		b = p.bridgeByID(buf.h.Get(wire.HeaderSessionID))
	}
	var stream, ids bool
	body := buf.body.Bytes()
	if b != nil {
		b.init.mu.Lock()
		stream, ids = b.init.stream, b.init.ids
		b.init.mu.Unlock()
		if caps := b.init.upstreamCapabilities(); caps != nil {
			body = withCapabilities(body, caps)
		}
	}
	_, streamOK := wire.Accepts(r.Header.Values("Accept"))
	if _, err := jsonrpc.DecodeMessage(body); !stream || !streamOK || err != nil {
		w.Header().Del("Content-Length")
		w.WriteHeader(status)
		_, _ = w.Write(body)
		return
	}
	w.Header().Del("Content-Length")
	s := &agentStream{w: w, b: b}
	s.start()
	if ids {
		s.upstreamEvent("", true, true) // the gate's own answer: an id of the gate's
	}
	s.answer(body)
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
