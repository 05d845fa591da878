package notify

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// receiver is a local webhook receiver answering a script of statuses (the last one repeats).
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	script []response
	reqs   []request
	hold   chan struct{} // when non-nil, each request waits for a value (or the request's end)
}

type response struct {
	status     int
	retryAfter string
}

type request struct {
	header http.Header
	body   []byte
}

func newReceiver(t *testing.T, script ...response) *receiver {
	t.Helper()
	r := &receiver{t: t, script: script}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.reqs = append(r.reqs, request{header: req.Header.Clone(), body: body})
	n := len(r.reqs)
	hold := r.hold
	resp := response{status: http.StatusOK}
	if len(r.script) > 0 {
		resp = r.script[min(n-1, len(r.script)-1)]
	}
	r.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-req.Context().Done():
			return
		}
	}
	if resp.retryAfter != "" {
		w.Header().Set("Retry-After", resp.retryAfter)
	}
	w.WriteHeader(resp.status)
}

func (r *receiver) requests() []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]request(nil), r.reqs...)
}

// sleeps records the waits a Notifier asked for, without waiting.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeps) all() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

var t0 = time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)

// testOptions are fast, deterministic options for a receiver at url: no jitter, recorded
// sleeps, a fixed clock.
func testOptions(s *sleeps, urls ...string) Options {
	o := Options{
		ConsoleURL:     "http://127.0.0.1:8787/console",
		MaxAttempts:    4,
		AttemptTimeout: 2 * time.Second,
		BaseBackoff:    time.Second,
		MaxBackoff:     8 * time.Second,
		MaxRetryAfter:  30 * time.Second,
		Now:            func() time.Time { return t0 },
		Sleep:          s.sleep,
		Jitter:         func(d time.Duration) time.Duration { return d },
	}
	for _, u := range urls {
		o.Webhooks = append(o.Webhooks, Webhook{URL: u})
	}
	return o
}

func testMoment() Moment {
	return Moment{
		ID: "m-7f3a", EnvelopeDigest: "sha256:" + "ab12" + "00000000000000000000000000000000000000000000000000000000000",
		Synopsis:   "Pay invoice 4471 from the operating account?",
		Principals: []string{"alice", "bob"}, Agent: "agent-1",
		Server: "bank", Tool: "send_payment", Class: "FINANCIAL",
		Policy: "local/actgate", Rule: "payments", GateAuthored: true,
		Expires: t0.Add(15 * time.Minute),
	}
}

func newNotifier(t *testing.T, o Options) *Notifier {
	t.Helper()
	n, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// decode parses a body as the Slack-compatible message.
func decode(t *testing.T, b []byte) message {
	t.Helper()
	var m message
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("body is not the message JSON: %v: %s", err, b)
	}
	return m
}
