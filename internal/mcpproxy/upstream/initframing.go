package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// InitFraming records how the upstream answered the initialize of a bridge's upstream session:
// as an event stream or not, and whether its events carried ids. The gate's own answer to the
// agent's initialize (the SDK session's, application/json) then follows it (serveInitialize).
type InitFraming struct {
	mu     sync.Mutex
	stream bool
	ids    bool
	// answer is the upstream's answer to that initialize as read, at most wire.MaxEventSize bytes:
	// where the gate's answer to the agent takes the upstream's capabilities from, as written
	// (upstreamCapabilities).
	answer bytes.Buffer
}

type initFramingKey struct{}

// Bind returns ctx carrying f: the upstream session opened with ctx records its initialize
// answer's framing in f (observeInit).
func (f *InitFraming) Bind(ctx context.Context) context.Context {
	return context.WithValue(ctx, initFramingKey{}, f)
}

// Framing reports whether the upstream answered the initialize as an event stream, and whether
// its events carried ids.
func (f *InitFraming) Framing() (stream, ids bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stream, f.ids
}

// observeInit is Transport's part: on the POST that opens an upstream session (no
// Mcp-Session-Id yet) of a context carrying an InitFraming, it records the answer's framing.
func observeInit(r *http.Request, resp *http.Response) {
	f, ok := r.Context().Value(initFramingKey{}).(*InitFraming)
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

// answerCopy keeps what is read of the upstream's initialize answer (InitFraming.answer).
type answerCopy struct {
	io.ReadCloser
	f *InitFraming
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

// UpstreamCapabilities returns the capabilities member of the upstream's initialize result as
// the upstream wrote it, from its answer (a JSON body, or the response event of an event
// stream); nil when it is not there.
func (f *InitFraming) UpstreamCapabilities() json.RawMessage {
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
		msg, err := wire.DecodeMessage(m)
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

// WithCapabilities returns the gate's initialize answer (one JSON-RPC response) with the
// upstream's capabilities as written (members the SDK's types do not model, such as tasks,
// included), plus tools, always (the virtual tool); body unchanged when it cannot.
func WithCapabilities(body []byte, caps json.RawMessage) []byte {
	msg, err := wire.DecodeMessage(body)
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
	f   *InitFraming
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
