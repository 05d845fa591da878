package anchor

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/receipt"
)

// ErrRefused is wrapped by a Post error when the authority service refused the checkpoint for
// good (the anchor holds another key, a newer or conflicting checkpoint, a bad signature): the
// Anchorer does not retry that checkpoint, and posts the next one offered.
var ErrRefused = errors.New("anchor: refused")

// Defaults of Options.
const (
	DefaultMinBackoff  = 500 * time.Millisecond
	DefaultMaxBackoff  = 30 * time.Second
	DefaultPostTimeout = 10 * time.Second
	DefaultInterval    = time.Second
)

// PostFunc sends one anchor request: the log's PEM public key and its newest checkpoint. The
// authority service's client (review.Client.PostAnchor) is one.
type PostFunc func(ctx context.Context, publicKeyPEM string, cp v1alpha1.AnchoredCheckpoint) error

// Options configure an Anchorer.
type Options struct {
	// Post sends a checkpoint. Required.
	Post PostFunc
	// PublicKeyPEM is the log's public key (receipts.pub.pem). Required.
	PublicKeyPEM string
	// MinBackoff and MaxBackoff bound the wait before retrying a failed post; it doubles from
	// MinBackoff on each failure up to MaxBackoff. Defaults DefaultMinBackoff and
	// DefaultMaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// PostTimeout bounds one post. Default DefaultPostTimeout.
	PostTimeout time.Duration
	// Interval is the least time from the start of one post to the start of the next, so a
	// busy log writes its anchor (one API write each) at most once per Interval, however
	// often it commits; a checkpoint offered after a quiet Interval is posted at once, and
	// Flush ends the wait. Default DefaultInterval; negative posts back to back.
	Interval time.Duration
	// Metrics counts posts and records the anchored seq. Optional.
	Metrics *Metrics
	// Log receives failures at the default level: seq, head digest and the error, never
	// receipts. Optional: discard.
	Log logr.Logger
}

// Anchorer posts the newest offered checkpoint of one log. Offer is safe for concurrent use and
// never blocks; Run does the posting.
type Anchorer struct {
	o         Options
	kick      chan struct{}
	flush     chan struct{} // closed by Flush
	flushOnce sync.Once

	mu       sync.Mutex
	next     *receipt.SignedCheckpoint // newest offered and not yet posted
	anchored uint64                    // seq of the last checkpoint the service accepted
	tried    uint64                    // seq of the last checkpoint posted (accepted or refused)
}

// New returns an Anchorer; start it with Run.
func New(o Options) (*Anchorer, error) {
	if o.Post == nil || o.PublicKeyPEM == "" {
		return nil, errors.New("anchor: Options.Post and Options.PublicKeyPEM are required")
	}
	if _, err := ParsePublicKey(o.PublicKeyPEM); err != nil {
		return nil, err
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = DefaultMinBackoff
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	o.MaxBackoff = max(o.MaxBackoff, o.MinBackoff)
	if o.PostTimeout <= 0 {
		o.PostTimeout = DefaultPostTimeout
	}
	switch {
	case o.Interval == 0:
		o.Interval = DefaultInterval
	case o.Interval < 0:
		o.Interval = 0
	}
	return &Anchorer{o: o, kick: make(chan struct{}, 1), flush: make(chan struct{})}, nil
}

// Offer hands the Anchorer a checkpoint the log signed (use it as
// receipt.Options.OnCheckpoint). It keeps only the newest: a checkpoint not after one already
// waiting or posted is dropped. It never blocks. Build the Anchorer before opening the log:
// receipt.Open offers the file's last checkpoint before it returns.
func (a *Anchorer) Offer(sc receipt.SignedCheckpoint) {
	a.mu.Lock()
	if sc.Seq <= a.tried || (a.next != nil && sc.Seq <= a.next.Seq) {
		a.mu.Unlock()
		return
	}
	sc.Signature = append([]byte(nil), sc.Signature...)
	a.next = &sc
	a.mu.Unlock()
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// Flush ends the Interval wait for good: from now on Run posts each checkpoint as soon as the
// previous post is done. Call it when the log has signed its last checkpoint (shutdown).
func (a *Anchorer) Flush() {
	a.flushOnce.Do(func() { close(a.flush) })
}

func (a *Anchorer) flushed() bool {
	select {
	case <-a.flush:
		return true
	default:
		return false
	}
}

// Anchored returns the seq of the newest checkpoint the service accepted (0 for none yet).
func (a *Anchorer) Anchored() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.anchored
}

// Run posts offered checkpoints until ctx ends: the newest waiting, retried with backoff until
// the service accepts or refuses it, or a newer one replaces it. Posts start at least
// Options.Interval apart until Flush.
func (a *Anchorer) Run(ctx context.Context) {
	backoff := time.Duration(0)
	var lastStart time.Time
	for {
		if backoff > 0 {
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		a.mu.Lock()
		sc := a.next
		a.mu.Unlock()
		if sc == nil {
			select {
			case <-ctx.Done():
				return
			case <-a.kick:
				continue
			}
		}
		if wait := time.Until(lastStart.Add(a.o.Interval)); backoff == 0 && wait > 0 && !a.flushed() {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-a.flush:
				t.Stop()
			case <-t.C:
			}
			// A newer checkpoint offered during the wait replaces sc.
			continue
		}
		lastStart = time.Now()
		pctx, cancel := context.WithTimeout(ctx, a.o.PostTimeout)
		err := a.o.Post(pctx, a.o.PublicKeyPEM, ToAPI(*sc))
		cancel()
		if ctx.Err() != nil {
			return
		}
		a.mu.Lock()
		done := err == nil || errors.Is(err, ErrRefused)
		if done {
			a.tried = max(a.tried, sc.Seq)
			if a.next == sc {
				a.next = nil
			}
		}
		if err == nil {
			a.anchored = max(a.anchored, sc.Seq)
		}
		a.mu.Unlock()
		a.o.Metrics.observe(err, sc.Seq)
		switch {
		case err == nil:
			backoff = 0
		case done:
			a.o.Log.Error(err, "receipt checkpoint refused by the authority service; not retried", "seq", sc.Seq, "head", sc.Head)
			backoff = 0
		default:
			backoff = min(max(2*backoff, a.o.MinBackoff), a.o.MaxBackoff)
			a.o.Log.Error(err, "receipt checkpoint not anchored; retrying", "seq", sc.Seq, "head", sc.Head, "retryIn", backoff.String())
		}
	}
}

// Metrics of an Anchorer.
type Metrics struct {
	posts    *prometheus.CounterVec
	anchored prometheus.Gauge
}

// NewMetrics registers actgate_receipt_anchor_posts_total{result="anchored|refused|failed"}
// and actgate_receipt_anchor_seq (the seq of the newest anchored checkpoint) with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		posts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "actgate_receipt_anchor_posts_total",
			Help: "Receipt checkpoints posted to the authority service for anchoring, by result (anchored, refused: not retried, failed: retried).",
		}, []string{"result"}),
		anchored: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "actgate_receipt_anchor_seq",
			Help: "Seq (log size) of the newest receipt checkpoint anchored in the pod's ReceiptAnchor.",
		}),
	}
	for _, c := range []prometheus.Collector{m.posts, m.anchored} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, r := range []string{"anchored", "refused", "failed"} {
		m.posts.WithLabelValues(r)
	}
	return m, nil
}

func (m *Metrics) observe(err error, seq uint64) {
	if m == nil {
		return
	}
	switch {
	case err == nil:
		m.posts.WithLabelValues("anchored").Inc()
		m.anchored.Set(float64(seq))
	case errors.Is(err, ErrRefused):
		m.posts.WithLabelValues("refused").Inc()
	default:
		m.posts.WithLabelValues("failed").Inc()
	}
}
