package upstream

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"syscall"
	"time"
)

// SyncTransport is the RoundTripper of the direct tools/call path's POSTs (bridge.post) to a
// plain-HTTP upstream: one HTTP/1.1 exchange on the calling goroutine, over a small pool of
// keep-alive connections. net/http's Transport writes a request on one goroutine of the
// connection, reads the response on another and hands it to the caller on a third, and each
// hand-off can wake another thread, which costs more than the work it hands over
// (docs/performance.md "The MCP proxy's direct paths"). Here the handler's goroutine writes the
// request, reads the answer and writes the agent's response, on one thread.
//
// It is used where the idle check can be made (SyncSupported: the BSDs, Linux and macOS), and
// serves only what it can serve as net/http would: an http:// URL, no proxy for it (the
// fallback's Proxy function says none), and a fallback that is an *http.Transport, whose
// DialContext it uses. Everything else — https (TLS, HTTP/2), a proxy, another RoundTripper
// (tests' fault injectors) — goes to the fallback unchanged. The request is written by
// http.Request.Write and the response read by http.ReadResponse, so the wire format is the
// standard library's.
//
// The httptrace hooks the attempt relies on (attempt.bind) are called as under the Transport:
// GetConn before a connection is taken, GotConn, and then http.Request.Write's own WroteHeaders
// (the headers are in the connection's buffer, which may spill to the wire before the flush: it
// errs towards "sent") and WroteRequest (the body too, before the flush).
type SyncTransport struct {
	fallback *http.Transport
	dial     func(ctx context.Context, network, addr string) (net.Conn, error)

	mu   sync.Mutex
	idle map[string][]*syncConn // by host:port, most recently used last
}

// Limits of the idle pool. An idle connection older than syncIdleTimeout is closed rather
// than reused (the Transport's IdleConnTimeout default); one the upstream closed is noticed
// when it would be reused (syncConn.reusable).
const (
	syncMaxIdlePerHost = 16
	syncIdleTimeout    = 90 * time.Second
)

// NewSyncTransport returns a SyncTransport that leaves to fallback what it does not serve.
func NewSyncTransport(fallback *http.Transport) *SyncTransport {
	dial := fallback.DialContext
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	return &SyncTransport{fallback: fallback, dial: dial, idle: map[string][]*syncConn{}}
}

type syncConn struct {
	net.Conn
	br       *bufio.Reader
	bw       *bufio.Writer
	key      string
	idleFrom time.Time
}

// RoundTrip serves req on the calling goroutine, or through the fallback.
func (t *SyncTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "http" || req.URL.Host == "" || t.proxied(req) {
		return t.fallback.RoundTrip(req)
	}
	ctx := req.Context()
	trace := httptrace.ContextClientTrace(ctx)
	key := canonicalAddr(req.URL.Host)
	if trace != nil && trace.GetConn != nil {
		trace.GetConn(key)
	}
	c, reused, err := t.conn(ctx, key)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	if trace != nil && trace.GotConn != nil {
		trace.GotConn(httptrace.GotConnInfo{Conn: c.Conn, Reused: reused})
	}
	// The connection is bound to the request's context until the response body is finished:
	// the context's end (deadline or cancellation) interrupts a blocked read or write, and the
	// exchange then fails with the context's error.
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (*http.Response, error) {
		stop()
		_ = c.Close()
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		return nil, err
	}
	// Request.Write calls the trace's WroteHeaders and WroteRequest hooks itself, as the
	// Transport's writer does: once the headers, and then the body, are in the buffer.
	err = req.Write(c.bw)
	if err == nil {
		err = c.bw.Flush()
	}
	if err != nil {
		return fail(err)
	}
	var resp *http.Response
	for {
		resp, err = http.ReadResponse(c.br, req)
		if err != nil {
			return fail(err)
		}
		// 1xx informational responses precede the final one (as the Transport skips them);
		// 101 is final and not something this path asked for.
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
		_ = resp.Body.Close()
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		_ = resp.Body.Close()
		return fail(errors.New("mcpproxy: upstream switched protocols"))
	}
	resp.Body = &syncBody{t: t, c: c, body: resp.Body, stop: stop, keep: !resp.Close && !req.Close, eof: resp.Body == http.NoBody}
	return resp, nil
}

// proxied reports whether the fallback would send req through a proxy.
func (t *SyncTransport) proxied(req *http.Request) bool {
	if t.fallback.Proxy == nil {
		return false
	}
	u, err := t.fallback.Proxy(req)
	return err != nil || u != nil
}

// conn returns an idle connection to key that is still usable, or dials one.
func (t *SyncTransport) conn(ctx context.Context, key string) (*syncConn, bool, error) {
	for {
		t.mu.Lock()
		list := t.idle[key]
		if len(list) == 0 {
			t.mu.Unlock()
			break
		}
		c := list[len(list)-1]
		list[len(list)-1] = nil
		t.idle[key] = list[:len(list)-1]
		t.mu.Unlock()
		if time.Since(c.idleFrom) < syncIdleTimeout && c.reusable() {
			return c, true, nil
		}
		_ = c.Close()
	}
	nc, err := t.dial(ctx, "tcp", key)
	if err != nil {
		return nil, false, err
	}
	return &syncConn{Conn: nc, br: bufio.NewReaderSize(nc, 4096), bw: bufio.NewWriterSize(nc, 4096), key: key}, false, nil
}

// put returns c to the idle pool, or closes it if the pool is full.
func (t *SyncTransport) put(c *syncConn) {
	if c.br.Buffered() > 0 || c.SetDeadline(time.Time{}) != nil {
		_ = c.Close() // bytes after the response: the stream is out of step
		return
	}
	c.idleFrom = time.Now()
	t.mu.Lock()
	if len(t.idle[c.key]) < syncMaxIdlePerHost {
		t.idle[c.key] = append(t.idle[c.key], c)
		c = nil
	}
	t.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

// CloseIdleConnections closes the pool's idle connections and the fallback's.
func (t *SyncTransport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = map[string][]*syncConn{}
	t.mu.Unlock()
	for _, list := range idle {
		for _, c := range list {
			_ = c.Close()
		}
	}
	t.fallback.CloseIdleConnections()
}

// reusable reports whether an idle connection can carry a request: the upstream has neither
// closed it nor sent anything unasked (a peek that would block). A connection the upstream
// closes after this check fails the next exchange as it would under the Transport (a POST is
// not retried: its outcome is unknown).
func (c *syncConn) reusable() bool {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	alive := false
	err = rc.Read(func(fd uintptr) bool {
		alive = peekWouldBlock(fd)
		return true // never wait: the answer is now
	})
	return err == nil && alive
}

// syncBody is a response body on a pooled connection: read to its end and closed, the
// connection goes back to the pool; closed early, it is closed.
type syncBody struct {
	t    *SyncTransport
	c    *syncConn
	body io.ReadCloser
	stop func() bool
	keep bool // neither side asked to close the connection

	mu   sync.Mutex
	eof  bool
	done bool
}

func (b *syncBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if err == io.EOF {
		b.mu.Lock()
		b.eof = true
		b.mu.Unlock()
	}
	return n, err
}

// finished reports whether the body was read to its end.
func (b *syncBody) finished() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.eof
}

func (b *syncBody) Close() error {
	b.mu.Lock()
	if b.done {
		b.mu.Unlock()
		return nil
	}
	b.done = true
	eof := b.eof
	b.mu.Unlock()
	// stop reports false when the context's cancellation already ran (or is running): the
	// connection's deadline was cut, so it is not reused.
	if b.stop() && eof && b.keep {
		b.t.put(b.c)
		return nil
	}
	return b.c.Close()
}

// canonicalAddr is host:port with the scheme's default port (80) when none is given.
func canonicalAddr(host string) string {
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	return net.JoinHostPort(trimBrackets(host), "80")
}

func trimBrackets(h string) string {
	if len(h) > 1 && h[0] == '[' && h[len(h)-1] == ']' {
		return h[1 : len(h)-1]
	}
	return h
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}
