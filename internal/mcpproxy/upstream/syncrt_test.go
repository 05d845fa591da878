package upstream

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingServer is an HTTP server that counts the connections it accepted and the requests it
// served; handler answers each request.
type countingServer struct {
	*httptest.Server
	conns, reqs atomic.Int32
}

func newCountingServer(t *testing.T, handler http.HandlerFunc, configure ...func(*http.Server)) *countingServer {
	t.Helper()
	s := &countingServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.reqs.Add(1)
		handler(w, r)
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	for _, f := range configure {
		f(s.Config)
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func echo(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// post sends body through rt and returns the whole answer.
func syncPost(t *testing.T, ctx context.Context, rt http.RoundTripper, u, body string) (*http.Response, string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, "", err
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	return resp, string(b), err
}

func newTestSyncTransport(t *testing.T) *SyncTransport {
	t.Helper()
	if !SyncSupported {
		t.Skip("SyncTransport is not used on this platform (syncrt_peek_other.go)")
	}
	return NewSyncTransport(http.DefaultTransport.(*http.Transport).Clone())
}

// One connection carries every exchange whose answer was read to its end, and each answer is
// the one to its own request.
func TestSyncTransportReusesConnection(t *testing.T) {
	s := newCountingServer(t, echo)
	rt := newTestSyncTransport(t)
	defer rt.CloseIdleConnections()
	for i := range 20 {
		body := strings.Repeat("x", i*300) // some bodies larger than the connection's buffer
		resp, got, err := syncPost(t, context.Background(), rt, s.URL, body)
		if err != nil || resp.StatusCode != http.StatusOK || got != body {
			t.Fatalf("exchange %d: %v %v %q", i, err, resp, got)
		}
	}
	if n := s.conns.Load(); n != 1 {
		t.Fatalf("connections = %d, want 1", n)
	}
}

// A chunked answer (an event stream) read to its end also leaves the connection reusable.
func TestSyncTransportChunkedAnswer(t *testing.T) {
	s := newCountingServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			_, _ = io.WriteString(w, "data: "+strings.Repeat("y", i)+"\n\n")
			w.(http.Flusher).Flush()
		}
	})
	rt := newTestSyncTransport(t)
	defer rt.CloseIdleConnections()
	for range 3 {
		req, _ := http.NewRequest(http.MethodPost, s.URL, strings.NewReader("{}"))
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		if err != nil || len(resp.TransferEncoding) == 0 || string(got) != "data: \n\ndata: y\n\ndata: yy\n\n" {
			t.Fatalf("%v %v %q", err, resp, got)
		}
		if !resp.Body.(*syncBody).finished() {
			t.Fatal("a body read to its end does not report itself finished")
		}
		_ = resp.Body.Close()
	}
	if n := s.conns.Load(); n != 1 {
		t.Fatalf("connections = %d, want 1", n)
	}
}

// An idle connection the upstream closed is not used: the next request goes out on a new one
// and succeeds, instead of failing as sent-and-unanswered.
func TestSyncTransportSkipsClosedIdleConnection(t *testing.T) {
	s := newCountingServer(t, echo, func(hs *http.Server) { hs.IdleTimeout = 20 * time.Millisecond })
	rt := newTestSyncTransport(t)
	defer rt.CloseIdleConnections()
	if _, got, err := syncPost(t, context.Background(), rt, s.URL, "one"); err != nil || got != "one" {
		t.Fatal(err, got)
	}
	time.Sleep(200 * time.Millisecond) // the server closes the idle connection
	if _, got, err := syncPost(t, context.Background(), rt, s.URL, "two"); err != nil || got != "two" {
		t.Fatalf("after the upstream closed the idle connection: %v %q", err, got)
	}
	if n := s.conns.Load(); n != 2 {
		t.Fatalf("connections = %d, want 2", n)
	}
}

// A body closed before its end, or an answer that asks to close, takes its connection with it:
// the next exchange never reads the rest of an earlier answer as its own.
func TestSyncTransportDiscardsUnfinishedConnection(t *testing.T) {
	s := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("close") != "" {
			w.Header().Set("Connection", "close")
		}
		if r.URL.Query().Get("slow") != "" {
			_, _ = io.WriteString(w, "first part;")
			w.(http.Flusher).Flush()
			time.Sleep(50 * time.Millisecond)
			_, _ = io.WriteString(w, "second part")
			return
		}
		echo(w, r)
	})
	rt := newTestSyncTransport(t)
	defer rt.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodPost, s.URL+"?slow=1", strings.NewReader("{}"))
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, len("first part;"))); err != nil {
		t.Fatal(err)
	}
	if resp.Body.(*syncBody).finished() {
		t.Fatal("a body read in part reports itself finished")
	}
	_ = resp.Body.Close() // "second part" not read
	if _, got, err := syncPost(t, context.Background(), rt, s.URL+"?close=1", "one"); err != nil || got != "one" {
		t.Fatalf("after an early close: %v %q", err, got)
	}
	if _, got, err := syncPost(t, context.Background(), rt, s.URL, "two"); err != nil || got != "two" {
		t.Fatalf("after Connection: close: %v %q", err, got)
	}
	if n := s.conns.Load(); n != 3 {
		t.Fatalf("connections = %d, want 3 (none reused after an early close or Connection: close)", n)
	}
}

// The request's context bounds the exchange: a deadline or a cancellation interrupts a read
// that waits for the answer, and the connection is not reused.
func TestSyncTransportContextEndsExchange(t *testing.T) {
	release := make(chan struct{})
	s := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("hang") != "" {
			<-release
		}
		echo(w, r)
	})
	defer close(release)
	rt := newTestSyncTransport(t)
	defer rt.CloseIdleConnections()
	if _, _, err := syncPost(t, context.Background(), rt, s.URL, "warm"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 100*time.Millisecond)
		}, context.DeadlineExceeded},
		{"cancel", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(100*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := c.ctx()
			defer cancel()
			start := time.Now()
			_, _, err := syncPost(t, ctx, rt, s.URL+"?hang=1", "{}")
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("the exchange outlived its context by %v", d)
			}
		})
	}
	if _, got, err := syncPost(t, context.Background(), rt, s.URL, "after"); err != nil || got != "after" {
		t.Fatal(err, got)
	}
	// warm's connection carried the deadline's exchange; cancel and after each needed a new one.
	if n := s.conns.Load(); n != 3 {
		t.Fatalf("connections = %d, want 3 (an interrupted connection is not reused)", n)
	}
}

// The attempt's trace sees a request that could not be sent as not written (so the call is
// NOT_SENT, never INDETERMINATE), and one that was sent as written; 1xx answers are skipped.
func TestSyncTransportTrace(t *testing.T) {
	s := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</x>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		echo(w, r)
	})
	rt := newTestSyncTransport(t)
	defer rt.CloseIdleConnections()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	_ = ln.Close()

	var a Attempt
	var events []string
	var mu sync.Mutex
	note := func(e string) { mu.Lock(); events = append(events, e); mu.Unlock() }
	ctx := httptrace.WithClientTrace(a.Bind(context.Background()), &httptrace.ClientTrace{
		GetConn:      func(string) { note("get") },
		WroteHeaders: func() { note("headers") },
		WroteRequest: func(httptrace.WroteRequestInfo) { note("request") },
	})
	if _, _, err := syncPost(t, ctx, rt, closed, "{}"); err == nil {
		t.Fatal("a refused connection answered")
	}
	if a.wrote.Load() || strings.Join(events, ",") != "get" {
		t.Fatalf("refused dial: wrote=%v events=%v", a.wrote.Load(), events)
	}
	events = nil
	resp, got, err := syncPost(t, ctx, rt, s.URL, "hello")
	if err != nil || resp.StatusCode != http.StatusOK || got != "hello" {
		t.Fatalf("%v %v %q", err, resp, got)
	}
	if !a.wrote.Load() || strings.Join(events, ",") != "get,headers,request" {
		t.Fatalf("sent: wrote=%v events=%v", a.wrote.Load(), events)
	}
}

// What this path cannot serve as net/http would goes to the fallback Transport unchanged: TLS,
// and a URL the Transport's Proxy function sends through a proxy.
func TestSyncTransportFallback(t *testing.T) {
	newTestSyncTransport(t) // skips where SyncTransport is not used
	tlsUp := httptest.NewTLSServer(http.HandlerFunc(echo))
	defer tlsUp.Close()
	fb := tlsUp.Client().Transport.(*http.Transport).Clone()
	rt := NewSyncTransport(fb)
	defer rt.CloseIdleConnections()
	if _, got, err := syncPost(t, context.Background(), rt, tlsUp.URL, "tls"); err != nil || got != "tls" {
		t.Fatalf("https through the fallback: %v %q", err, got)
	}

	var proxied atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Add(1)
		echo(w, r)
	}))
	defer proxy.Close()
	pu, _ := url.Parse(proxy.URL)
	fb2 := http.DefaultTransport.(*http.Transport).Clone()
	fb2.Proxy = http.ProxyURL(pu)
	rt2 := NewSyncTransport(fb2)
	defer rt2.CloseIdleConnections()
	if _, got, err := syncPost(t, context.Background(), rt2, "http://upstream.invalid/mcp", "via proxy"); err != nil || got != "via proxy" {
		t.Fatalf("proxied request: %v %q", err, got)
	}
	if proxied.Load() != 1 {
		t.Fatalf("the proxy saw %d requests, want 1", proxied.Load())
	}
}

func TestCanonicalAddr(t *testing.T) {
	for in, want := range map[string]string{
		"upstream.example":      "upstream.example:80",
		"upstream.example:8080": "upstream.example:8080",
		"127.0.0.1":             "127.0.0.1:80",
		"[::1]":                 "[::1]:80",
		"[::1]:9000":            "[::1]:9000",
	} {
		if got := canonicalAddr(in); got != want {
			t.Errorf("canonicalAddr(%q) = %q, want %q", in, got, want)
		}
	}
}
