package sidecar

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/authority/boltstore"
	"github.com/actgate/actgate/internal/hostloop"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/receipt"
	"github.com/actgate/actgate/internal/review"
	"github.com/actgate/actgate/internal/sink"
)

// Defaults of Options.
const (
	// DefaultReviewTimeout bounds one request to the authority service (Permit, Review,
	// Consume). The service's own bound is 5 s (service.DefaultReviewTimeout); the sidecar
	// allows for the round trip.
	DefaultReviewTimeout = 6 * time.Second
	// DefaultActTTL is expires_at - created_at of the acts the sidecar builds.
	DefaultActTTL = 5 * time.Minute
	// DefaultReportTimeout bounds one Report of an outcome to the service (outbox.go).
	DefaultReportTimeout = 5 * time.Second
	// DefaultRecordTimeout bounds one journal write.
	DefaultRecordTimeout = 10 * time.Second
	// DefaultHostLoopTimeout bounds how long a host loop may take between an allow under
	// authority (/v1/enforce) and its outcome (/v1/complete); past it the dispatch is recorded
	// INDETERMINATE.
	DefaultHostLoopTimeout = 5 * time.Minute
	// RuntimeID is the act's agent.runtime_id for calls through the sidecar.
	RuntimeID = "actgate-sidecar"
)

// ErrConfig is wrapped by every configuration error of New.
var ErrConfig = errors.New("sidecar: invalid configuration")

// Server is one protected upstream: its ToolPolicy server name and the URL the sidecar forwards
// its calls to (the policy's spec.servers[].url; the policy refuses any other destination).
type Server struct {
	Name string
	URL  string
}

// Options wire a Gate.
type Options struct {
	// Review asks the authority service. Required.
	Review *review.Client
	// Policy decides each call: the compiled ToolPolicy that governs the pod. Required.
	Policy sink.PolicyEvaluator
	// Store is the dispatch journal and the copy of every authority the sidecar consumed
	// (boltstore in the pod's journal directory). Its verifier holds the authority service's
	// public keys: every authority is verified with them before it is journaled. Required.
	Store *boltstore.Store
	// Namespace is the pod's namespace: authorities are bound to it. Required.
	Namespace string
	// SinkID is this sink's id (the governing ToolPolicy's spec.sink.id). Required.
	SinkID string
	// Servers are the protected upstreams; a call addressed anywhere else is refused. Required.
	Servers []Server
	// Principal is the act's initiating principal; empty means the agent's own identity.
	Principal string
	// IDKey keys the act ids (act.IDIssuer); at least act.MinIDKeyBytes. It must persist
	// across restarts for a retry after a restart to be recognised (the sidecar keeps it in its
	// journal directory). Empty means a random key for this process.
	IDKey []byte
	// Now is the clock. Optional: time.Now.
	Now func() time.Time
	// ReviewTimeout bounds one request to the service. Optional: DefaultReviewTimeout.
	ReviewTimeout time.Duration
	// ActTTL is the lifetime of an act. Optional: DefaultActTTL.
	ActTTL time.Duration
	// RecordTimeout bounds one journal write. Optional: DefaultRecordTimeout.
	RecordTimeout time.Duration
	// ReportTimeout bounds one Report of an outcome. Optional: DefaultReportTimeout.
	ReportTimeout time.Duration
	// HostLoopTimeout bounds a host loop's dispatch (DefaultHostLoopTimeout).
	HostLoopTimeout time.Duration
	// Outbox is where acknowledged outcome reports are remembered (outbox.go). Optional: in
	// memory (tests); the sidecar keeps it in its journal directory.
	Outbox *Outbox
	// Log receives act ids, digests and codes, never argument values. Optional: discard.
	Log logr.Logger
	// Observer is told every call the gate answered (internal/metrics). Optional: nothing.
	Observer sink.Observer
	// TracerProvider records the spans of each call (internal/tracing). Optional: nil is
	// tracing off.
	TracerProvider trace.TracerProvider
	// Receipts is the signed, hash-chained receipt log. Optional: no receipts (unit tests);
	// the sidecar always opens one in its journal directory.
	Receipts *receipt.Log
}

// Gate is the sidecar's finality sink: internal/sink's Gate (the one `actgate serve` runs)
// with the pod's policy, the authority service as the issuer of protected acts and the keeper
// of binding moments, the pod's journal, and an outbox that reports every outcome to the
// service. It satisfies mcpproxy.Gate and serves host loops (Enforce, Complete). Build it with
// NewGate.
type Gate struct {
	*sink.Gate
	servers   map[string]string // name → URL
	namespace string
	store     *boltstore.Store
	outbox    *Outbox
	ids       *act.IDIssuer
	host      *hostloop.Loop
	authority *serviceAuthority
	log       logr.Logger
	principal string
	actTTL    time.Duration
	now       func() time.Time
}

var _ mcpproxy.Gate = (*Gate)(nil)

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// NewGate validates opts, recovers the journal (internal/sink.New) and starts the outbox.
func NewGate(opts Options) (*Gate, error) {
	switch {
	case opts.Review == nil:
		return nil, fmt.Errorf("%w: Review is required", ErrConfig)
	case opts.Policy == nil:
		return nil, fmt.Errorf("%w: Policy is required", ErrConfig)
	case opts.Store == nil:
		return nil, fmt.Errorf("%w: Store is required", ErrConfig)
	case !dnsLabel.MatchString(opts.Namespace) || len(opts.Namespace) > 63:
		return nil, fmt.Errorf("%w: Namespace %q is not a namespace name", ErrConfig, opts.Namespace)
	case opts.SinkID == "":
		return nil, fmt.Errorf("%w: SinkID is required", ErrConfig)
	case len(opts.Servers) == 0:
		return nil, fmt.Errorf("%w: at least one server is required", ErrConfig)
	case opts.ReviewTimeout < 0 || opts.ActTTL < 0 || opts.RecordTimeout < 0 || opts.ReportTimeout < 0 || opts.HostLoopTimeout < 0:
		return nil, fmt.Errorf("%w: durations must not be negative", ErrConfig)
	case opts.ActTTL > act.MaxTTL:
		return nil, fmt.Errorf("%w: ActTTL above %s", ErrConfig, act.MaxTTL)
	}
	g := &Gate{servers: map[string]string{}, namespace: opts.Namespace, store: opts.Store, log: opts.Log,
		principal: opts.Principal, actTTL: orDefault(opts.ActTTL, DefaultActTTL), now: opts.Now}
	if g.log.GetSink() == nil {
		g.log = logr.Discard()
	}
	if g.now == nil {
		g.now = time.Now
	}
	for i, s := range opts.Servers {
		if !dnsLabel.MatchString(s.Name) || len(s.Name) > 63 {
			return nil, fmt.Errorf("%w: servers[%d]: name %q is not a DNS label", ErrConfig, i, s.Name)
		}
		if _, dup := g.servers[s.Name]; dup {
			return nil, fmt.Errorf("%w: servers[%d]: server %q listed twice", ErrConfig, i, s.Name)
		}
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			return nil, fmt.Errorf("%w: servers[%d] (%s): URL must be an absolute http or https URL without user info", ErrConfig, i, s.Name)
		}
		g.servers[s.Name] = s.URL
	}
	key := opts.IDKey
	if len(key) == 0 {
		key = randomKey()
	}
	ids, err := act.NewIDIssuer(key, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: IDKey: %w", ErrConfig, err)
	}
	g.ids = ids
	timeout := orDefault(opts.ReviewTimeout, DefaultReviewTimeout)
	g.outbox = opts.Outbox
	if g.outbox == nil {
		g.outbox = NewMemoryOutbox()
	}
	g.outbox.start(opts.Review, opts.Store, orDefault(opts.ReportTimeout, DefaultReportTimeout), g.now, g.log.WithName("outbox"))
	var dropped func()
	if m, ok := opts.Observer.(interface{ RefusalRecordDropped() }); ok {
		dropped = m.RefusalRecordDropped
	}
	g.authority = &serviceAuthority{client: opts.Review, timeout: timeout, namespace: opts.Namespace, sinkID: opts.SinkID, log: g.log,
		refusals: newRefusals(opts.Review, timeout, g.log.WithName("refusals"), dropped)}
	sg, err := sink.New(sink.Options{
		Pins:           NewPinStore(opts.Review, opts.Policy, timeout), // rules[].pin: status.toolPins through the authority service (toolpins.go)
		SinkID:         opts.SinkID,
		Namespace:      opts.Namespace,
		Policy:         opts.Policy,
		Store:          opts.Store,
		Journal:        reportingJournal{Store: opts.Store, outbox: g.outbox},
		IDs:            ids,
		Receipts:       receiptLog(opts.Receipts),
		Now:            opts.Now,
		Log:            g.log,
		Principal:      opts.Principal,
		RuntimeID:      RuntimeID,
		ActTTL:         g.actTTL,
		RecordTimeout:  orDefault(opts.RecordTimeout, DefaultRecordTimeout),
		Observer:       opts.Observer,
		TracerProvider: opts.TracerProvider,
		Authority:      g.authority,
		Budgets:        serviceBudgets{}, // the authority service checks and charges (budgets.go)
	})
	if err != nil {
		g.outbox.stop()
		g.authority.refusals.stop()
		if errors.Is(err, sink.ErrConfig) {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		return nil, err
	}
	g.Gate = sg
	// What recovery left INDETERMINATE, and what a previous run journaled but never got
	// acknowledged, is reported now.
	ctx, cancel := context.WithTimeout(context.Background(), orDefault(opts.RecordTimeout, DefaultRecordTimeout))
	defer cancel()
	if err := g.outbox.load(ctx); err != nil {
		g.outbox.stop()
		g.authority.refusals.stop()
		return nil, err
	}
	// Host loops run through the same code as serve's (internal/hostloop), with the pod's
	// servers, principal and journal.
	g.host, err = hostloop.New(hostloop.Config{
		Gate: sg, Records: opts.Store, Servers: g.servers, Principal: opts.Principal, RuntimeID: RuntimeID, IDs: ids,
		ActTTL: g.actTTL, Now: g.now, Timeout: orDefault(opts.HostLoopTimeout, DefaultHostLoopTimeout),
		RecordTimeout: orDefault(opts.RecordTimeout, DefaultRecordTimeout), Log: g.log.WithName("hostloop"),
	})
	if err != nil {
		g.outbox.stop()
		g.authority.refusals.stop()
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return g, nil
}

// receiptLog is r as the sink's ReceiptLog (nil stays nil: no receipts).
func receiptLog(r *receipt.Log) sink.ReceiptLog {
	if r == nil {
		return nil
	}
	return r
}

// Close ends the host-loop dispatches still awaiting their outcome (INDETERMINATE), stops the
// outbox (what it has not delivered stays in the journal for the next start) and the refusal
// records (what is queued is dropped).
func (g *Gate) Close() {
	g.host.Close()
	g.outbox.stop()
	g.authority.refusals.stop()
}

// HostLoop is the gate's host-loop endpoint (/v1/enforce, /v1/complete).
func (g *Gate) HostLoop() *hostloop.Loop { return g.host }

// HostLoopHandler serves the host-loop endpoint for host loops in the pod, whose calls are made
// as agent (the pod's service-account user): the loopback listener is the pod's own.
func (g *Gate) HostLoopHandler(agent string) http.Handler {
	return g.host.Handler(hostloop.FixedAgent(agent))
}

// Outbox is the gate's outcome outbox.
func (g *Gate) Outbox() *Outbox { return g.outbox }

// ServerURL returns the URL the sidecar forwards server's calls to.
func (g *Gate) ServerURL(server string) (string, bool) {
	u, ok := g.servers[server]
	return u, ok
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}
