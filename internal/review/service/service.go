package service

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/budget/kubeledger"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/review"
	"github.com/actgate/actgate/internal/review/service/kubecache"
	"github.com/actgate/actgate/internal/review/service/tokenreview"
	"github.com/actgate/actgate/internal/tracing"
)

// Defaults for Options.
const (
	// DefaultAudience is the token audience the service accepts: sidecars present a projected
	// service-account token requested for it.
	DefaultAudience = "actgate-authority"
	// DefaultReviewTimeout bounds one review, API calls included.
	DefaultReviewTimeout = 5 * time.Second
	// DefaultMomentTTL is how long a binding moment awaits its principal.
	DefaultMomentTTL = 15 * time.Minute
	// DefaultFieldManager names the service's writes.
	DefaultFieldManager = "actgate-authority"
	// DefaultTokenReviewTTL is how long an authenticated TokenReview is reused
	// (tokenreview.DefaultTTL: kube-apiserver's own cache holds a success for 10 s).
	DefaultTokenReviewTTL = tokenreview.DefaultTTL
)

// Options wire a Service.
type Options struct {
	// Client talks to the API server directly (client.New, never a cache): TokenReviews, Acts,
	// BindingMoments, and Pods and ToolPolicies when there is no Cache or it misses. Its scheme
	// must hold client-go's types and actgate's v1alpha1. Required.
	Client client.Client
	// Cache serves the reads of ToolPolicies, Pods and BindingMoments from informers (NewCache;
	// started by the caller) and wakes policy watchers on every change. Optional: nil reads them
	// from the API server on every review, and watchers look again every few seconds.
	Cache *Cache
	// TokenReviewTTL is how long an authenticated TokenReview result is reused, by token hash
	// (a token the API server refused: at most a second). Optional: DefaultTokenReviewTTL;
	// negative turns the cache off.
	TokenReviewTTL time.Duration
	// Store holds authorities: the Lease store in production. Required.
	Store authority.Store
	// Signer signs the authorities the service issues; Store's verifier must trust its key.
	// Required.
	Signer *authority.Signer
	// Audiences are the token audiences accepted (TokenReview spec.audiences). Optional:
	// [DefaultAudience].
	Audiences []string
	// Now is the clock. Optional: time.Now.
	Now func() time.Time
	// ReviewTimeout bounds one review. Optional: DefaultReviewTimeout.
	ReviewTimeout time.Duration
	// MomentTTL is how long a binding moment awaits its principals. Optional: DefaultMomentTTL.
	MomentTTL time.Duration
	// Metrics records latency and decisions. Optional.
	Metrics *Metrics
	// Log receives act ids, digests and codes, never argument values. Optional: discard.
	Log logr.Logger
	// FieldManager names the service's writes. Optional: DefaultFieldManager.
	FieldManager string
	// TracerProvider records a span per review, continuing the caller's W3C trace context
	// (traceparent header), and one per Lease consume. Optional: nil is tracing off.
	TracerProvider trace.TracerProvider
}

// Service answers ActReviews. Build it with New; it is safe for concurrent use, and any number
// of replicas may serve the same cluster.
type Service struct {
	c         client.Client
	store     authority.Store
	signer    *authority.Signer
	audiences []string
	now       func() time.Time
	timeout   time.Duration
	momentTTL time.Duration
	metrics   *Metrics
	log       logr.Logger
	manager   string
	policies  *policyCache
	tracer    trace.Tracer // nil: tracing off
	cache     *Cache       // nil: no informers
	tokens    *tokenreview.Cache
	changes   *changes
	envelopes *envelopeCache
	recent    kubecache.RecentMoments
	// recentActs are the Acts a Permit or a consumed grant just wrote, as the write returned
	// them: the outcome Report that follows patches that version (a compare-and-swap on its
	// resourceVersion) without reading it first, and reads it when it is not remembered or
	// has changed.
	recentActs *kubecache.Recent[*v1alpha1.Act]
	// agents verify the agents' tokens of policies with spec.agentAuth (agentident.go).
	agents agentVerifiers
	// ledger counts budgets (budgets.go).
	ledger *kubeledger.Ledger
	sweeps *sweeps
}

// New returns a Service.
func New(opts Options) (*Service, error) {
	switch {
	case opts.Client == nil:
		return nil, errors.New("service: Options.Client is required")
	case opts.Store == nil:
		return nil, errors.New("service: Options.Store is required")
	case opts.Signer == nil:
		return nil, errors.New("service: Options.Signer is required")
	case opts.ReviewTimeout < 0, opts.MomentTTL < 0:
		return nil, errors.New("service: negative timeout")
	}
	s := &Service{
		c: opts.Client, store: opts.Store, signer: opts.Signer, audiences: opts.Audiences,
		now: opts.Now, timeout: opts.ReviewTimeout, momentTTL: opts.MomentTTL,
		metrics: opts.Metrics, log: opts.Log, manager: opts.FieldManager, policies: newPolicyCache(),
		tracer: tracing.TracerOf(opts.TracerProvider), cache: opts.Cache, changes: newChanges(),
		envelopes: newEnvelopeCache(),
	}
	if len(s.audiences) == 0 {
		s.audiences = []string{DefaultAudience}
	}
	if s.now == nil {
		s.now = time.Now
	}
	// A watch event's lag is wall-clock time, whatever clock reviews are decided by.
	s.recent = kubecache.NewRecentMoments(time.Now)
	s.recentActs = kubecache.NewRecent[*v1alpha1.Act](time.Now, kubecache.RecentActsMax, kubecache.RecentActsTTL)
	if s.timeout == 0 {
		s.timeout = DefaultReviewTimeout
	}
	if s.momentTTL == 0 {
		s.momentTTL = DefaultMomentTTL
	}
	if s.log.GetSink() == nil {
		s.log = logr.Discard()
	}
	if s.manager == "" {
		s.manager = DefaultFieldManager
	}
	ttl := opts.TokenReviewTTL
	if ttl == 0 {
		ttl = DefaultTokenReviewTTL
	}
	// Token answers age by the wall clock, as the API server's own cache of them does, not by
	// Options.Now, the clock authorities are issued and expire by.
	s.tokens = tokenreview.New(ttl, time.Now)
	if s.cache != nil {
		s.cache.SetChanged(s.changes.notify)
	}
	var err error
	if s.ledger, err = kubeledger.New(kubeledger.Options{Client: s.c, Now: s.now, FieldManager: s.manager}); err != nil {
		return nil, err
	}
	s.sweeps = &sweeps{last: map[string]time.Time{}}
	return s, nil
}

// outcome is a response and the HTTP status it is sent with.
type outcome struct {
	status int
	resp   review.Response
}

// deny builds a refusal. The message defaults to the code's description.
func deny(status int, code ef.EFCode, reason review.Reason, msg string) outcome {
	if msg == "" {
		msg = code.Description()
	}
	return outcome{status: status, resp: review.Response{
		Decision: v1alpha1.ActDecisionDenied, Code: code, Reason: reason, Message: msg, Retryable: code.Retryable(),
	}}
}

// unreachable reports whether err says the API server could not be reached or did not answer
// in time: "unreachable or slow" in docs/operations.md "Failure modes (all fail closed)".
func unreachable(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	if apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsTooManyRequests(err) {
		return true
	}
	if utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	var oe *net.OpError
	return errors.As(err, &oe)
}

// apiFailure is the refusal for an API server or store failure: EF_060 when the API server is
// slow or unreachable (retryable as validation only, tool-use-binding §23), else
// EF_STORE_UNAVAILABLE. Never an allow (docs/architecture.md "Fail closed").
func apiFailure(ctx context.Context, what string, err error) outcome {
	if unreachable(ctx, err) {
		return deny(503, ef.EF060, review.ReasonTimeout, fmt.Sprintf("The authority service could not %s in time; the tool was not invoked.", what))
	}
	return deny(503, ef.EFStoreUnavailable, review.ReasonUnavailable, fmt.Sprintf("The authority service could not %s; the tool was not invoked.", what))
}

// consumeCode maps an authority error to the EF code the sink would give (internal/sink's
// mapping of the same sentinels, tool-use-binding §23, §30).
func consumeCode(err error) ef.EFCode {
	switch {
	case errors.Is(err, authority.ErrConsumed):
		return ef.EF005
	case errors.Is(err, authority.ErrSinkMismatch):
		return ef.EF040
	case errors.Is(err, authority.ErrDestinationMismatch):
		return ef.EFDestinationMismatch
	case errors.Is(err, authority.ErrArgumentsMismatch), errors.Is(err, authority.ErrScopeMismatch):
		return ef.EFScopeMismatch
	case errors.Is(err, authority.ErrNotFound), errors.Is(err, authority.ErrExpired),
		errors.Is(err, authority.ErrNotYetValid), errors.Is(err, authority.ErrEpochMismatch),
		errors.Is(err, authority.ErrBadSignature), errors.Is(err, authority.ErrInvalid):
		return ef.EF002
	}
	return ef.EFStoreUnavailable
}

// authorityFailure is the refusal for an error of the authority store.
func authorityFailure(ctx context.Context, err error) outcome {
	if errors.Is(err, authority.ErrStoreUnavailable) {
		return apiFailure(ctx, "reach the authority store", err)
	}
	return deny(200, consumeCode(err), review.ReasonAuthority, "")
}
