package notify

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
)

// TestDeliver drives one announcement to a receiver answering a script and checks how many
// requests reached it, what was waited between them and what the Notifier counted.
func TestDeliver(t *testing.T) {
	cases := []struct {
		name      string
		script    []response
		attempts  int             // requests the receiver saw
		waits     []time.Duration // sleeps between them
		delivered bool
		errIs     error
	}{
		{name: "delivered once", script: []response{{status: 200}}, attempts: 1, delivered: true},
		{name: "204 is delivered", script: []response{{status: 204}}, attempts: 1, delivered: true},
		{name: "500,500,200 retries with backoff", script: []response{{status: 500}, {status: 500}, {status: 200}},
			attempts: 3, waits: []time.Duration{time.Second, 2 * time.Second}, delivered: true},
		{name: "400 is not retried", script: []response{{status: 400}}, attempts: 1, errIs: ErrRejected},
		{name: "404 is not retried", script: []response{{status: 404}}, attempts: 1, errIs: ErrRejected},
		{name: "3xx is not followed", script: []response{{status: 302}}, attempts: 1, errIs: ErrRejected},
		{name: "429 honours Retry-After seconds", script: []response{{status: 429, retryAfter: "7"}, {status: 200}},
			attempts: 2, waits: []time.Duration{7 * time.Second}, delivered: true},
		{name: "429 Retry-After is capped", script: []response{{status: 429, retryAfter: "86400"}, {status: 200}},
			attempts: 2, waits: []time.Duration{30 * time.Second}, delivered: true},
		{name: "503 Retry-After as an HTTP date", script: []response{{status: 503, retryAfter: t0.Add(12 * time.Second).Format(http.TimeFormat)}, {status: 200}},
			attempts: 2, waits: []time.Duration{12 * time.Second}, delivered: true},
		{name: "429 with an unparsable Retry-After backs off", script: []response{{status: 429, retryAfter: "soon"}, {status: 200}},
			attempts: 2, waits: []time.Duration{time.Second}, delivered: true},
		{name: "always 500 gives up after MaxAttempts", script: []response{{status: 500}},
			attempts: 4, waits: []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}, errIs: ErrGaveUp},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newReceiver(t, c.script...)
			var s sleeps
			n := newNotifier(t, testOptions(&s, r.srv.URL))
			err := n.Deliver(context.Background(), testMoment())
			if got := len(r.requests()); got != c.attempts {
				t.Errorf("receiver saw %d requests, want %d", got, c.attempts)
			}
			if got := s.all(); !slices.Equal(got, c.waits) {
				t.Errorf("waits %v, want %v", got, c.waits)
			}
			st := n.Stats()
			if c.delivered {
				if err != nil || st.Delivered != 1 || st.Failed != 0 {
					t.Errorf("err %v, stats %+v: want one delivery", err, st)
				}
			} else if !errors.Is(err, c.errIs) || st.Delivered != 0 || st.Failed != 1 {
				t.Errorf("err %v (want %v), stats %+v: want one failure", err, c.errIs, st)
			}
			if st.Attempts != uint64(c.attempts) {
				t.Errorf("Attempts %d, want %d", st.Attempts, c.attempts)
			}
		})
	}
}

// TestReceiverDown: nothing listens; every attempt fails on the network and the notifier
// gives up after MaxAttempts with the backoff growing and capped.
func TestReceiverDown(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	var s sleeps
	o := testOptions(&s, url)
	o.MaxAttempts = 6
	n := newNotifier(t, o)
	err := n.Deliver(context.Background(), testMoment())
	if !errors.Is(err, ErrGaveUp) {
		t.Fatalf("err %v, want ErrGaveUp", err)
	}
	if want := []time.Duration{1, 2, 4, 8, 8}; !slices.Equal(s.all(), scale(want, time.Second)) {
		t.Errorf("waits %v, want %v s", s.all(), want)
	}
	if st := n.Stats(); st.Attempts != 6 || st.Failed != 1 || st.Delivered != 0 {
		t.Errorf("stats %+v", st)
	}
	if strings.Contains(err.Error(), url) {
		t.Errorf("error carries the webhook URL (it may hold a secret path): %v", err)
	}
}

func scale(ds []time.Duration, unit time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d * unit
	}
	return out
}

// TestAttemptTimeout: a receiver that never answers costs one AttemptTimeout per attempt.
func TestAttemptTimeout(t *testing.T) {
	r := newReceiver(t)
	r.hold = make(chan struct{}) // never released
	var s sleeps
	o := testOptions(&s, r.srv.URL)
	o.MaxAttempts = 2
	o.AttemptTimeout = 50 * time.Millisecond
	n := newNotifier(t, o)
	err := n.Deliver(context.Background(), testMoment())
	if !errors.Is(err, ErrGaveUp) || len(r.requests()) != 2 {
		t.Fatalf("err %v after %d requests; want ErrGaveUp after 2", err, len(r.requests()))
	}
}

// TestMultipleWebhooks: each webhook gets the announcement; one rejecting does not stop the
// other, and each is counted.
func TestMultipleWebhooks(t *testing.T) {
	ok := newReceiver(t)
	bad := newReceiver(t, response{status: 403})
	var s sleeps
	n := newNotifier(t, testOptions(&s, bad.srv.URL, ok.srv.URL))
	err := n.Deliver(context.Background(), testMoment())
	if !errors.Is(err, ErrRejected) {
		t.Fatalf("err %v, want ErrRejected for the first webhook", err)
	}
	if len(ok.requests()) != 1 || len(bad.requests()) != 1 {
		t.Fatalf("requests: ok %d, bad %d", len(ok.requests()), len(bad.requests()))
	}
	if st := n.Stats(); st.Delivered != 1 || st.Failed != 1 {
		t.Errorf("stats %+v", st)
	}
}

// TestQueue: MomentEmitted queues and returns at once; workers deliver; Stop drains what was
// queued; a full queue drops (counted and logged with id and digest only); after Stop
// announcements are refused.
func TestQueue(t *testing.T) {
	t.Run("Stop drains the queue", func(t *testing.T) {
		r := newReceiver(t)
		r.hold = make(chan struct{})
		var s sleeps
		o := testOptions(&s, r.srv.URL)
		o.QueueSize = 8
		n := newNotifier(t, o)
		n.Start(context.Background())
		for i := range 5 {
			m := testMoment()
			m.ID = "m-" + string(rune('a'+i))
			if err := n.Enqueue(m); err != nil {
				t.Fatal(err)
			}
		}
		stopped := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			stopped <- n.Stop(ctx)
		}()
		// Nothing can be delivered until the receiver answers; Stop must wait for it.
		select {
		case err := <-stopped:
			t.Fatalf("Stop returned %v before the queue was delivered", err)
		case <-time.After(50 * time.Millisecond):
		}
		close(r.hold)
		if err := <-stopped; err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if got := len(r.requests()); got != 5 {
			t.Fatalf("receiver saw %d announcements, want 5", got)
		}
		if st := n.Stats(); st.Delivered != 5 {
			t.Errorf("stats %+v", st)
		}
		if err := n.Enqueue(testMoment()); !errors.Is(err, ErrStopped) {
			t.Errorf("Enqueue after Stop: %v, want ErrStopped", err)
		}
	})
	t.Run("Stop gives up at its deadline", func(t *testing.T) {
		r := newReceiver(t)
		r.hold = make(chan struct{}) // never released
		var s sleeps
		o := testOptions(&s, r.srv.URL)
		o.MaxAttempts = 1
		o.AttemptTimeout = time.Minute
		n := newNotifier(t, o)
		n.Start(context.Background())
		_ = n.Enqueue(testMoment())
		_ = n.Enqueue(testMoment())
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := n.Stop(ctx)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Stop: %v, want the deadline", err)
		}
		if el := time.Since(start); el > 5*time.Second {
			t.Errorf("Stop took %v: in-flight attempts were not cancelled", el)
		}
		if st := n.Stats(); st.Delivered != 0 || st.Failed != 2 {
			t.Errorf("stats %+v: want both abandoned as failed", st)
		}
	})
	t.Run("full queue drops and counts", func(t *testing.T) {
		r := newReceiver(t)
		var s sleeps
		var logs bytes.Buffer
		var mu sync.Mutex
		o := testOptions(&s, r.srv.URL)
		o.QueueSize = 2
		o.Log = funcr.New(func(prefix, args string) { mu.Lock(); logs.WriteString(args + "\n"); mu.Unlock() }, funcr.Options{})
		reg := prometheus.NewPedanticRegistry()
		o.Registerer = reg
		n := newNotifier(t, o) // not started: nothing drains
		var errs []error
		for range 4 {
			errs = append(errs, n.Enqueue(testMoment()))
		}
		if errs[0] != nil || errs[1] != nil || !errors.Is(errs[2], ErrQueueFull) || !errors.Is(errs[3], ErrQueueFull) {
			t.Fatalf("Enqueue errors %v", errs)
		}
		if st := n.Stats(); st.Dropped != 2 {
			t.Errorf("stats %+v", st)
		}
		if got := gathered(t, reg); got["dropped"] != 2 || got["delivered"] != 0 || got["failed"] != 0 || len(got) != 3 {
			t.Errorf("actgate_notifications_total = %v, want dropped 2 and the other series at 0", got)
		}
		mu.Lock()
		l := logs.String()
		mu.Unlock()
		m := testMoment()
		if !strings.Contains(l, "queue full") || !strings.Contains(l, m.ID) || !strings.Contains(l, m.EnvelopeDigest) {
			t.Errorf("drop log %q lacks the reason, id or digest", l)
		}
		if strings.Contains(l, m.Synopsis) {
			t.Errorf("drop log carries the synopsis: %q", l)
		}
		_ = n.Stop(context.Background())
	})
}

// TestHeadersFrom: the headers file is read for every delivery and sent; its values never
// appear in logs or errors; a missing file sends nothing.
func TestHeadersFrom(t *testing.T) {
	const token = "Bearer hook-token-5ec12e7"
	dir := t.TempDir()
	path := filepath.Join(dir, "headers")
	if err := os.WriteFile(path, []byte("# the receiver's token\nAuthorization: "+token+"\nX-Team: payments\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := newReceiver(t, response{status: 401})
	var s sleeps
	var logs bytes.Buffer
	o := testOptions(&s, r.srv.URL)
	o.Webhooks[0].HeadersFrom = path
	o.Log = funcr.New(func(_, args string) { logs.WriteString(args + "\n") }, funcr.Options{Verbosity: 2})
	n := newNotifier(t, o)
	err := n.Deliver(context.Background(), testMoment())
	reqs := r.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	if got := reqs[0].header.Get("Authorization"); got != token {
		t.Errorf("Authorization %q", got)
	}
	if got := reqs[0].header.Get("X-Team"); got != "payments" {
		t.Errorf("X-Team %q", got)
	}
	if got := reqs[0].header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type %q", got)
	}
	if strings.Contains(logs.String(), "hook-token") || strings.Contains(err.Error(), "hook-token") {
		t.Errorf("the header value leaked: log %q, err %v", logs.String(), err)
	}

	// Rotated in place: the next delivery sends the new value.
	if err := os.WriteFile(path, []byte("Authorization: Bearer rotated\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = n.Deliver(context.Background(), testMoment())
	if got := r.requests()[1].header.Get("Authorization"); got != "Bearer rotated" {
		t.Errorf("after rotation Authorization %q", got)
	}

	// Missing: nothing is sent without the credential.
	o.Webhooks[0].HeadersFrom = filepath.Join(dir, "missing")
	n2 := newNotifier(t, o)
	if err := n2.Deliver(context.Background(), testMoment()); !errors.Is(err, ErrHeaders) {
		t.Errorf("missing headers file: %v, want ErrHeaders", err)
	}
	if got := len(r.requests()); got != 2 {
		t.Errorf("a request was sent without its headers file (%d requests)", got)
	}
}

func TestNewRefuses(t *testing.T) {
	cases := []struct {
		name string
		opts Options
	}{
		{"no webhooks", Options{}},
		{"ftp", Options{Webhooks: []Webhook{{URL: "ftp://hooks.example/x"}}}},
		{"http to a remote host", Options{Webhooks: []Webhook{{URL: "http://hooks.example/x"}}}},
		{"user info", Options{Webhooks: []Webhook{{URL: "https://u:p@hooks.example/x"}}}},
		{"relative", Options{Webhooks: []Webhook{{URL: "/hooks"}}}},
		{"console not absolute", Options{Webhooks: []Webhook{{URL: "https://hooks.example/x"}}, ConsoleURL: "console/{id}"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := New(c.opts); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

// gathered reads actgate_notifications_total by result from reg.
func gathered(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "actgate_notifications_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" {
					out[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}
