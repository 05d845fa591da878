package reconcile

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/actgate/actgate/internal/journal"
)

// Defaults of a Settler, the same as the Act controller's (actgate-controlplane manager --reconcile-*).
const (
	DefaultSettleBackoff    = 30 * time.Second
	DefaultSettleMaxBackoff = 30 * time.Minute
	DefaultFreshness        = 5 * time.Minute
)

// ResultNotConfigured is what a Settler reports for a record whose upstream has no usable
// reconciliation endpoint: nothing was asked.
const ResultNotConfigured = "NotConfigured"

// Settler settles the INDETERMINATE records of a dispatch journal by authenticated
// reconciliation: the standalone gate's counterpart of the Act controller
// (action-evidence-boundary, "Perform Authenticated Reconciliation"). For each record it asks
// the record's upstream's reconciliation endpoint (Ask), judges the answer (Judge) and, only
// when the verdict settles it, moves the record to EXECUTED or FAILED with the answer's evidence
// digest (journal.Reconcile). Every other finding leaves the record INDETERMINATE and asks again
// after a backoff that doubles per attempt. It never calls the tool.
//
// The sink reads a reconciled record when the act is retried (docs/architecture.md "Retries"): a
// retry of a settled act gets the settled state and is never invoked again.
type Settler struct {
	// Journal is the dispatch journal to settle.
	Journal journal.Journal
	// Endpoint returns the reconciliation endpoint of an upstream (a record's Upstream) and
	// the server name the endpoint knows it by; ok is false when none is configured.
	Endpoint func(upstream string) (server string, ep Endpoint, ok bool)
	// Agent and SinkID are the gate's agent identity and sink id (the acts' initiator and
	// executor, bound into the judged operation).
	Agent, SinkID string
	// Client asks the endpoints; nil means the zero Client (HTTPS only, DefaultTimeout).
	Client *Client
	// Freshness is how long after the provider's observation an answer is accepted; 0 means
	// DefaultFreshness.
	Freshness time.Duration
	// Backoff and MaxBackoff space the attempts of one record: Backoff·2^(n-1) after attempt
	// n, at most MaxBackoff; 0 means the defaults.
	Backoff, MaxBackoff time.Duration
	// Now is the trusted clock; nil means time.Now.
	Now func() time.Time
	// Log receives one line per attempt that does not settle and per settlement, with the
	// operation id and digests only.
	Log logr.Logger
	// Observe, if set, is told the result of every attempt: a Finding, or ResultNotConfigured.
	Observe func(result string)
	// Settled, if set, is called with each record a verdict settled (already durable).
	Settled func(rec journal.DispatchRecord, v Verdict)

	mu   sync.Mutex
	next map[string]attemptState // by operation id
}

type attemptState struct {
	n   int
	due time.Time
}

// Run settles once at once and then every interval until ctx ends.
func (s *Settler) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := s.RunOnce(ctx); err != nil && ctx.Err() == nil {
			s.Log.Error(err, "Reconciliation pass failed")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// RunOnce makes one pass over the journal's INDETERMINATE records whose next attempt is due and
// returns how many it settled. An error means the journal could not be listed.
func (s *Settler) RunOnce(ctx context.Context) (int, error) {
	recs, err := s.Journal.InState(ctx, journal.StateIndeterminate)
	if err != nil {
		return 0, fmt.Errorf("reconcile: listing INDETERMINATE dispatches: %w", err)
	}
	settled := 0
	for _, rec := range recs {
		if ctx.Err() != nil {
			break
		}
		if !s.due(rec.OperationID) {
			continue
		}
		if s.settle(ctx, rec) {
			settled++
		}
	}
	return settled, nil
}

// settle makes one attempt for rec and reports whether it settled it.
func (s *Settler) settle(ctx context.Context, rec journal.DispatchRecord) bool {
	log := s.Log.WithValues("operation", rec.OperationID, "act", rec.ActID, "actionDigest", rec.ActionDigest)
	server, ep, ok := s.Endpoint(rec.Upstream)
	if !ok {
		s.observe(ResultNotConfigured)
		s.retryAfter(rec.OperationID, s.maxBackoff())
		log.V(1).Info("INDETERMINATE dispatch has no reconciliation endpoint; it stays INDETERMINATE")
		return false
	}
	q := Query{OperationID: rec.OperationID, ActionDigest: rec.ActionDigest, Tool: rec.Tool, Server: server}
	answer, err := s.client().Ask(ctx, ep, q)
	if err != nil {
		finding, ok := Classify(err)
		if !ok {
			finding = FindingUnreachable
		}
		s.observe(string(finding))
		s.backoff(rec.OperationID)
		log.Info("Reconciliation did not settle the dispatch", "finding", finding, "error", err.Error())
		return false
	}
	exp := Expectation{Query: q, Agent: s.Agent, SinkID: s.SinkID, NotBefore: rec.CreatedAt}
	v, err := Judge(exp, answer, s.freshness(), s.now())
	if err != nil {
		s.backoff(rec.OperationID)
		log.Error(err, "Reconciliation answer could not be judged")
		return false
	}
	s.observe(string(v.Finding))
	if !v.Finding.Settles() {
		s.backoff(rec.OperationID)
		log.Info("Reconciliation did not settle the dispatch", "finding", v.Finding, "reason", v.Reason)
		return false
	}
	out, err := s.Journal.Reconcile(ctx, rec.OperationID, journal.Reconciliation{
		Authenticated: true, OperationID: rec.OperationID, ActionDigest: rec.ActionDigest, Upstream: rec.Upstream,
		Outcome: journal.State(v.State), EvidenceDigest: string(v.EvidenceDigest), Reason: journal.ReasonAuthenticatedReconciliation,
	})
	if err != nil {
		s.backoff(rec.OperationID)
		log.Error(err, "Reconciled outcome could not be recorded")
		return false
	}
	s.mu.Lock()
	delete(s.next, rec.OperationID)
	s.mu.Unlock()
	log.Info("Dispatch settled by authenticated reconciliation", "state", out.State, "evidenceDigest", out.EvidenceDigest)
	if s.Settled != nil {
		s.Settled(out, v)
	}
	return true
}

func (s *Settler) due(op string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.next[op]
	return !ok || !s.now().Before(a.due)
}

// backoff schedules the next attempt of op after one more failed attempt.
func (s *Settler) backoff(op string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next == nil {
		s.next = map[string]attemptState{}
	}
	a := s.next[op]
	a.n++
	a.due = s.now().Add(BackoffAfter(s.Backoff, s.maxBackoff(), a.n))
	s.next[op] = a
}

// BackoffAfter is the wait after attempt n (n ≥ 1) of reconciling one operation: base·2^(n-1),
// at most limit (base 0: DefaultSettleBackoff). The Act controller spaces its attempts the same.
func BackoffAfter(base, limit time.Duration, n int) time.Duration {
	d := base
	if d <= 0 {
		d = DefaultSettleBackoff
	}
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

func (s *Settler) retryAfter(op string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next == nil {
		s.next = map[string]attemptState{}
	}
	a := s.next[op]
	a.due = s.now().Add(d)
	s.next[op] = a
}

func (s *Settler) observe(result string) {
	if s.Observe != nil {
		s.Observe(result)
	}
}

func (s *Settler) client() *Client {
	if s.Client != nil {
		return s.Client
	}
	return &Client{}
}

func (s *Settler) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Settler) freshness() time.Duration {
	if s.Freshness > 0 {
		return s.Freshness
	}
	return DefaultFreshness
}

func (s *Settler) maxBackoff() time.Duration {
	if s.MaxBackoff > 0 {
		return s.MaxBackoff
	}
	return DefaultSettleMaxBackoff
}
