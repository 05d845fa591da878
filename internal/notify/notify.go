package notify

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/actgate/actgate/internal/sink"
)

// Defaults of Options.
const (
	DefaultQueueSize      = 256
	DefaultWorkers        = 1
	DefaultMaxAttempts    = 5
	DefaultAttemptTimeout = 10 * time.Second
	DefaultBaseBackoff    = 500 * time.Millisecond
	DefaultMaxBackoff     = 30 * time.Second
	DefaultMaxRetryAfter  = 60 * time.Second
)

// Result is the label of actgate_notifications_total: what became of one announcement to one
// webhook (dropped counts an announcement refused by a full queue, once).
type Result string

// Results.
const (
	ResultDelivered Result = "delivered"
	ResultFailed    Result = "failed"
	ResultDropped   Result = "dropped"
)

// ErrStopped is returned by Enqueue after Stop.
var ErrStopped = errors.New("notify: notifier stopped")

// ErrQueueFull is returned by Enqueue when the queue is full; the announcement was dropped.
var ErrQueueFull = errors.New("notify: queue full")

// Options configures a Notifier.
type Options struct {
	// Webhooks receive every announcement. At least one webhook or Email is required.
	Webhooks []Webhook
	// Email, if set, mails every announcement to the principals it names (Email).
	Email *Email
	// ConsoleURL is where a principal resolves the moment: a URL template in which "{id}" is
	// replaced by the moment id (path-escaped); without "{id}", "#moment-{id}" is appended.
	// Empty: the body carries no link.
	ConsoleURL string
	// Client sends the requests; default a client without redirects (a webhook answering 3xx
	// is a failure, the body is not re-sent elsewhere).
	Client *http.Client
	// QueueSize bounds the announcements waiting for a worker. Default DefaultQueueSize.
	QueueSize int
	// Workers is the number of delivery goroutines. Default DefaultWorkers.
	Workers int
	// MaxAttempts bounds the attempts per webhook per announcement. Default DefaultMaxAttempts.
	MaxAttempts int
	// AttemptTimeout bounds one HTTP attempt. Default DefaultAttemptTimeout.
	AttemptTimeout time.Duration
	// BaseBackoff and MaxBackoff shape the exponential backoff between attempts:
	// min(MaxBackoff, BaseBackoff·2^(n-1)), then jittered to [d/2, d).
	BaseBackoff, MaxBackoff time.Duration
	// MaxRetryAfter caps a 429/503 Retry-After. Default DefaultMaxRetryAfter.
	MaxRetryAfter time.Duration
	// Now is the clock (Retry-After dates, Stats). Default time.Now.
	Now func() time.Time
	// Sleep waits d or until ctx ends. Default a timer; tests inject a recorder.
	Sleep func(ctx context.Context, d time.Duration) error
	// Jitter maps a backoff to the delay actually waited. Default: uniform in [d/2, d).
	Jitter func(d time.Duration) time.Duration
	// Log receives one line per dropped, failed or delivered announcement (ids and digests).
	Log logr.Logger
	// Registerer, if set, gets actgate_notifications_total{result}.
	Registerer prometheus.Registerer
}

// Stats counts announcements by result (one per webhook, and one per principal's e-mail, for
// delivered and failed).
type Stats struct {
	Delivered, Failed, Dropped uint64
	// Attempts is the number of HTTP requests sent (or tried).
	Attempts uint64
}

// Notifier queues announcements of pending moments and delivers them to webhooks.
type Notifier struct {
	sink.NopObserver

	opts    Options
	email   *emailer // nil: no e-mail
	queue   chan Moment
	metric  *prometheus.CounterVec
	workers sync.WaitGroup

	mu       sync.Mutex // guards started, stopped, and sends on queue against close
	started  bool
	stopped  bool
	ctx      context.Context
	cancel   context.CancelFunc
	attempts atomic.Uint64
	counts   [3]atomic.Uint64 // delivered, failed, dropped
}

// New validates opts and returns a Notifier; call Start before it delivers.
func New(opts Options) (*Notifier, error) {
	if len(opts.Webhooks) == 0 && opts.Email == nil {
		return nil, errors.New("notify: no webhooks and no e-mail")
	}
	for i, w := range opts.Webhooks {
		if err := ValidateURL(w.URL); err != nil {
			return nil, fmt.Errorf("notify: webhooks[%d]: %w", i, err)
		}
		if _, err := ParseFormat(string(w.Format)); err != nil {
			return nil, fmt.Errorf("notify: webhooks[%d]: %w", i, err)
		}
	}
	var email *emailer
	if opts.Email != nil {
		e, err := newEmailer(*opts.Email)
		if err != nil {
			return nil, fmt.Errorf("notify: e-mail: %w", err)
		}
		email = e
	}
	if opts.ConsoleURL != "" {
		if err := validateConsoleURL(opts.ConsoleURL); err != nil {
			return nil, fmt.Errorf("notify: consoleURL: %w", err)
		}
	}
	if opts.Client == nil {
		opts.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	setDefault(&opts.QueueSize, DefaultQueueSize)
	setDefault(&opts.Workers, DefaultWorkers)
	setDefault(&opts.MaxAttempts, DefaultMaxAttempts)
	setDefault(&opts.AttemptTimeout, DefaultAttemptTimeout)
	setDefault(&opts.BaseBackoff, DefaultBaseBackoff)
	setDefault(&opts.MaxBackoff, DefaultMaxBackoff)
	setDefault(&opts.MaxRetryAfter, DefaultMaxRetryAfter)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Sleep == nil {
		opts.Sleep = sleep
	}
	if opts.Jitter == nil {
		opts.Jitter = equalJitter
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	n := &Notifier{opts: opts, email: email, queue: make(chan Moment, opts.QueueSize)}
	if opts.Registerer != nil {
		n.metric = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "actgate_notifications_total",
			Help: "Announcements of pending binding moments by result: delivered or failed (per webhook and per e-mail), dropped (queue full).",
		}, []string{"result"})
		for _, r := range []Result{ResultDelivered, ResultFailed, ResultDropped} {
			n.metric.WithLabelValues(string(r))
		}
		if err := opts.Registerer.Register(n.metric); err != nil {
			return nil, fmt.Errorf("notify: register metrics: %w", err)
		}
	}
	return n, nil
}

func setDefault[T int | time.Duration](p *T, d T) {
	if *p <= 0 {
		*p = d
	}
}

// Start starts the workers. ctx bounds every delivery: when it ends, in-flight attempts are
// abandoned (counted failed). Start is a no-op after the first call.
func (n *Notifier) Start(ctx context.Context) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.started || n.stopped {
		return
	}
	n.started = true
	n.ctx, n.cancel = context.WithCancel(ctx)
	for range n.opts.Workers {
		n.workers.Add(1)
		go n.work()
	}
}

// Stop refuses new announcements and waits for the queued ones to be delivered until ctx
// ends; then it abandons the rest (in-flight attempts are cancelled, queued ones counted
// failed) and returns ctx's error.
func (n *Notifier) Stop(ctx context.Context) error {
	n.mu.Lock()
	if n.stopped {
		n.mu.Unlock()
		return nil
	}
	n.stopped = true
	close(n.queue)
	started := n.started
	n.mu.Unlock()
	if !started {
		for m := range n.queue {
			n.count(ResultFailed, n.channels(m))
			n.opts.Log.Info("Announcement abandoned: notifier stopped before start", "moment", m.ID, "envelopeDigest", m.EnvelopeDigest)
		}
		return nil
	}
	done := make(chan struct{})
	go func() { n.workers.Wait(); close(done) }()
	select {
	case <-done:
		n.cancel()
		return nil
	case <-ctx.Done():
		n.cancel()
		<-done
		return fmt.Errorf("notify: stop: %w", ctx.Err())
	}
}

// MomentEmitted queues an announcement of e (sink.Observer). It never blocks.
func (n *Notifier) MomentEmitted(e sink.MomentEvent) {
	_ = n.Enqueue(FromEvent(e))
}

// Enqueue queues an announcement of m without blocking. It returns ErrQueueFull (the
// announcement is dropped, logged and counted) or ErrStopped.
func (n *Notifier) Enqueue(m Moment) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped {
		n.opts.Log.Info("Announcement dropped: notifier stopped", "moment", m.ID, "envelopeDigest", m.EnvelopeDigest)
		n.count(ResultDropped, 1)
		return ErrStopped
	}
	select {
	case n.queue <- m:
		return nil
	default:
		n.opts.Log.Info("Announcement dropped: queue full", "moment", m.ID, "envelopeDigest", m.EnvelopeDigest, "queueSize", n.opts.QueueSize)
		n.count(ResultDropped, 1)
		return ErrQueueFull
	}
}

// Stats returns the counts so far.
func (n *Notifier) Stats() Stats {
	return Stats{
		Delivered: n.counts[0].Load(), Failed: n.counts[1].Load(), Dropped: n.counts[2].Load(),
		Attempts: n.attempts.Load(),
	}
}

func (n *Notifier) count(r Result, k int) {
	if k <= 0 {
		return
	}
	switch r {
	case ResultDelivered:
		n.counts[0].Add(uint64(k))
	case ResultFailed:
		n.counts[1].Add(uint64(k))
	case ResultDropped:
		n.counts[2].Add(uint64(k))
	}
	if n.metric != nil {
		n.metric.WithLabelValues(string(r)).Add(float64(k))
	}
}

func (n *Notifier) work() {
	defer n.workers.Done()
	for m := range n.queue {
		// Deliver reports the outcome per webhook through count; its error is logged there.
		_ = n.deliver(n.ctx, m)
	}
}

// Deliver sends an announcement of m to every webhook now, with retries, and returns an
// error naming the webhooks that did not take it (nil when all did). It blocks; the cluster
// manager uses it to record the announcement only once it was delivered.
func (n *Notifier) Deliver(ctx context.Context, m Moment) error {
	return n.deliver(ctx, m)
}

func (n *Notifier) deliver(ctx context.Context, m Moment) error {
	link := n.link(m.ID)
	calls := m.Calls
	m.Calls = nil // announcements carry no argument values unless a webhook opts in
	type bodyKey struct {
		f     Format
		calls bool
	}
	bodies := map[bodyKey][]byte{}
	var errs []error
	for i, w := range n.opts.Webhooks {
		f, _ := ParseFormat(string(w.Format))
		withCalls := w.IncludeCalls && len(calls) > 0
		key := bodyKey{f, withCalls}
		b, ok := bodies[key]
		if !ok {
			mm := m
			if withCalls {
				mm.Calls = calls
			}
			var err error
			if b, err = Render(f, mm, link); err != nil {
				n.count(ResultFailed, 1)
				n.opts.Log.Error(err, "Announcement not built", "moment", m.ID, "envelopeDigest", m.EnvelopeDigest, "webhook", i, "format", string(f))
				errs = append(errs, fmt.Errorf("webhooks[%d] (%s): %w", i, hostOf(w.URL), err))
				continue
			}
			bodies[key] = b
		}
		attempts, err := n.post(ctx, w, b)
		if err != nil {
			n.count(ResultFailed, 1)
			n.opts.Log.Info("Announcement failed", "moment", m.ID, "envelopeDigest", m.EnvelopeDigest,
				"webhook", i, "host", hostOf(w.URL), "attempts", attempts, "error", err.Error())
			errs = append(errs, fmt.Errorf("webhooks[%d] (%s): %w", i, hostOf(w.URL), err))
			continue
		}
		n.count(ResultDelivered, 1)
		n.opts.Log.V(1).Info("Announcement delivered", "moment", m.ID, "envelopeDigest", m.EnvelopeDigest, "webhook", i, "host", hostOf(w.URL), "attempts", attempts)
	}
	if n.email != nil {
		if err := n.mail(ctx, m, link); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// channels is how many outcomes an announcement of m counts: one per webhook and, with
// e-mail, one per principal.
func (n *Notifier) channels(m Moment) int {
	k := len(n.opts.Webhooks)
	if n.email != nil {
		k += max(1, len(m.Principals))
	}
	return k
}

// link is the console link of a moment ("" without a ConsoleURL).
func (n *Notifier) link(id string) string { return ConsoleLink(n.opts.ConsoleURL, id) }

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// equalJitter waits a uniformly random time in [d/2, d): spread enough that many gates
// retrying one receiver do not synchronise, never less than half the backoff.
func equalJitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	half := d / 2
	return half + rand.N(d-half)
}
