package boltstore

import (
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/journal"
)

// The AEB-1 vectors (testdata/README.md) that concern this store: consumption before dispatch,
// custody, retry, observation and reconciliation. Each maps onto the store as follows:
//
//	AEB-1                                  this store
//	native replay unit                     the authority (consumed once)
//	operation_id                           DispatchRecord.OperationID
//	normalized_action_digest, provider_id  ActionDigest, Upstream
//	custody INVOKING + NOT_INVOKED         INVOKED
//	custody INVOKING + INDETERMINATE       INDETERMINATE
//	custody TERMINAL + COMMITTED           EXECUTED (effect relation in Reason)
//	custody TERMINAL + PROVEN_NOT_COMMITTED FAILED
//	custody UNRESERVED                     no record for the operation, nothing consumed for it
var storeVectors = []string{
	"atomic_reservation_unavailable",
	"operation_replay",
	"native_evidence_rewrapped",
	"timeout_after_dispatch",
	"blind_retry_refused",
	"unauthenticated_reconciliation_refused",
	"authenticated_executed_reconciliation",
	"provider_committed_effect_diverged",
	"provider_unknown_effect_unknown",
	"provider_proven_not_committed",
}

type aebVector struct {
	ID    string `json:"id"`
	Input struct {
		Mode      string `json:"mode"`
		Operation struct {
			OperationID  string `json:"operation_id"`
			ProviderID   string `json:"provider_id"`
			ActionDigest string `json:"normalized_action_digest"`
			ExecutorID   string `json:"executor_id"`
		} `json:"operation"`
		Reservation struct {
			Atomicity       string `json:"atomicity"`
			PriorOperations []struct {
				OperationID     string `json:"operation_id"`
				Custody         string `json:"custody"`
				ProviderOutcome string `json:"provider_outcome"`
			} `json:"prior_operations"`
			ConsumedNativeReplayUnits []string `json:"consumed_native_replay_units"`
		} `json:"reservation"`
		Observation *struct {
			Source          string `json:"source"`
			ProviderOutcome string `json:"provider_outcome"`
			EffectRelation  string `json:"effect_relation"`
		} `json:"observation"`
		Reconciliation *struct {
			Authenticated   bool   `json:"authenticated"`
			ProviderID      string `json:"provider_id"`
			OperationID     string `json:"operation_id"`
			ActionDigest    string `json:"normalized_action_digest"`
			ProviderOutcome string `json:"provider_outcome"`
			EffectRelation  string `json:"effect_relation"`
		} `json:"reconciliation"`
	} `json:"input"`
	Expected struct {
		Custody         string   `json:"custody"`
		ProviderOutcome string   `json:"provider_outcome"`
		Decision        string   `json:"decision"`
		Reasons         []string `json:"reasons"`
	} `json:"expected"`
}

// stateOf maps an AEB-1 custody and provider outcome to a journal state ("" = no record).
func stateOf(t *testing.T, custody, outcome string) journal.State {
	t.Helper()
	switch {
	case custody == "UNRESERVED":
		return ""
	case custody == "INVOKING" && outcome == "NOT_INVOKED":
		return journal.StateInvoked
	case custody == "INVOKING" && outcome == "INDETERMINATE":
		return journal.StateIndeterminate
	case custody == "TERMINAL" && outcome == "COMMITTED":
		return journal.StateExecuted
	case custody == "TERMINAL" && outcome == "PROVEN_NOT_COMMITTED":
		return journal.StateFailed
	}
	t.Fatalf("no mapping for custody %s, provider outcome %s", custody, outcome)
	return ""
}

func TestAEBConsequenceVectors(t *testing.T) {
	raw, err := os.ReadFile("testdata/aeb-consequence-conformance.v1.json")
	if err != nil {
		t.Fatal(err)
	}
	var suite struct {
		Vectors []aebVector `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &suite); err != nil {
		t.Fatal(err)
	}
	byID := map[string]aebVector{}
	for _, v := range suite.Vectors {
		byID[v.ID] = v
	}
	for _, id := range storeVectors {
		v, ok := byID[id]
		if !ok {
			t.Fatalf("vector %s missing from the suite", id)
		}
		t.Run(id, func(t *testing.T) { runAEBVector(t, v) })
	}
}

func runAEBVector(t *testing.T, v aebVector) {
	f := newFixture(t)
	s := f.open(t)
	op := v.Input.Operation
	bind := authority.Binding{
		ActID:           "act:" + op.OperationID,
		ArgumentsDigest: op.ActionDigest,
		ActionDigest:    op.ActionDigest,
		Tool:            "order.purchase",
		Destination:     op.ProviderID,
		SinkID:          op.ExecutorID,
		PolicyEpoch:     "1",
	}
	issue := func(b authority.Binding) authority.Authority {
		a, err := f.signer.Sign(b, f.clock.Now(), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Issue(ctx, a); err != nil {
			t.Fatal(err)
		}
		return a
	}
	evidence := journal.Outcome{Authoritative: true, EvidenceDigest: digestOf("provider evidence")}

	// Prior state.
	var prior authority.Authority
	priorOp := ""
	if ps := v.Input.Reservation.PriorOperations; len(ps) > 0 {
		p := ps[0]
		priorOp = p.OperationID
		prior = issue(bind)
		if _, _, err := s.ConsumeAndPend(ctx, prior.ID, prior.Binding, pendingFor(prior, p.OperationID), nil); err != nil {
			t.Fatal(err)
		}
		switch stateOf(t, p.Custody, p.ProviderOutcome) {
		case journal.StateInvoked:
			mustTransition(t, s, p.OperationID, journal.StateInvoked, journal.Outcome{})
		case journal.StateIndeterminate:
			mustTransition(t, s, p.OperationID, journal.StateInvoked, journal.Outcome{})
			mustTransition(t, s, p.OperationID, journal.StateIndeterminate, journal.Outcome{})
		case journal.StateExecuted:
			mustTransition(t, s, p.OperationID, journal.StateExecuted, evidence)
		}
	}
	if len(v.Input.Reservation.ConsumedNativeReplayUnits) > 0 {
		// The native evidence (the authority) was already spent by an earlier operation.
		prior = issue(bind)
		if _, _, err := s.ConsumeAndPend(ctx, prior.ID, prior.Binding, pendingFor(prior, "operation:earlier"), nil); err != nil {
			t.Fatal(err)
		}
	}

	// The vector's step, and the store's answer.
	var (
		stepErr error
		checkOp = op.OperationID
		fresh   authority.Authority // an authority the step tried to consume, if any
	)
	switch v.Input.Mode {
	case "ADMISSION":
		switch {
		case v.Input.Reservation.Atomicity == "unavailable":
			fresh = issue(bind)
			s.Close() // the atomic store is unavailable
			_, _, stepErr = s.ConsumeAndPend(ctx, fresh.ID, fresh.Binding, pendingFor(fresh, op.OperationID), nil)
			s = f.open(t)
		case priorOp == op.OperationID:
			// The same operation presented again, with otherwise valid authority.
			b := bind
			b.ActID = "act:replay"
			fresh = issue(b)
			_, _, stepErr = s.ConsumeAndPend(ctx, fresh.ID, fresh.Binding, pendingFor(fresh, op.OperationID), nil)
			checkOp = priorOp
		default:
			// The spent native evidence rewrapped under a new operation.
			_, _, stepErr = s.ConsumeAndPend(ctx, prior.ID, prior.Binding, pendingFor(prior, op.OperationID), nil)
		}
	case "RETRY":
		// A blind retry of the same act: the same authority under a new operation ID.
		_, _, stepErr = s.ConsumeAndPend(ctx, prior.ID, prior.Binding, pendingFor(prior, journal.NewOperationID()), nil)
	case "INVOCATION_OBSERVATION":
		obs := v.Input.Observation
		o := journal.Outcome{Reason: journal.Reason(v.Expected.Reasons[0])}
		to := journal.StateIndeterminate
		if obs.Source == "PROVIDER_EVIDENCE" {
			switch obs.ProviderOutcome {
			case "COMMITTED":
				to, o.Authoritative, o.EvidenceDigest = journal.StateExecuted, true, evidence.EvidenceDigest
			case "PROVEN_NOT_COMMITTED":
				to, o.Authoritative, o.EvidenceDigest = journal.StateFailed, true, evidence.EvidenceDigest
			}
		}
		_, stepErr = s.Transition(ctx, op.OperationID, to, o)
	case "RECONCILIATION":
		r := v.Input.Reconciliation
		outcome := journal.StateExecuted
		if r.ProviderOutcome == "PROVEN_NOT_COMMITTED" {
			outcome = journal.StateFailed
		}
		_, stepErr = s.Reconcile(ctx, op.OperationID, journal.Reconciliation{
			Authenticated: r.Authenticated, OperationID: r.OperationID, ActionDigest: r.ActionDigest,
			Upstream: r.ProviderID, Outcome: outcome, EvidenceDigest: evidence.EvidenceDigest,
			Reason: journal.Reason(v.Expected.Reasons[0]),
		})
	default:
		t.Fatalf("mode %s", v.Input.Mode)
	}

	// Decision: REFUSE means the store refused the step; every other decision means it took it.
	if refused := stepErr != nil; refused != (v.Expected.Decision == "REFUSE") {
		t.Fatalf("decision %s expected, store returned %v", v.Expected.Decision, stepErr)
	}
	switch v.ID {
	case "atomic_reservation_unavailable":
		if !errors.Is(stepErr, authority.ErrStoreUnavailable) {
			t.Fatalf("refusal %v, want ErrStoreUnavailable", stepErr)
		}
	case "operation_replay":
		if !errors.Is(stepErr, journal.ErrExists) {
			t.Fatalf("refusal %v, want journal.ErrExists", stepErr)
		}
	case "native_evidence_rewrapped", "blind_retry_refused":
		if !errors.Is(stepErr, authority.ErrConsumed) {
			t.Fatalf("refusal %v, want ErrConsumed", stepErr)
		}
	case "unauthenticated_reconciliation_refused":
		if !errors.Is(stepErr, journal.ErrReconciliationRefused) {
			t.Fatalf("refusal %v, want ErrReconciliationRefused", stepErr)
		}
	}

	// Custody and provider outcome, read back from the store.
	want := stateOf(t, v.Expected.Custody, v.Expected.ProviderOutcome)
	rec, err := s.Record(ctx, checkOp)
	switch {
	case want == "":
		if !errors.Is(err, journal.ErrNotFound) {
			t.Fatalf("custody UNRESERVED, but operation %s has a record (%s, %v)", checkOp, rec.State, err)
		}
	case err != nil:
		t.Fatal(err)
	case rec.State != want:
		t.Fatalf("custody %s/%s expects %s, record is %s", v.Expected.Custody, v.Expected.ProviderOutcome, want, rec.State)
	}
	if want != "" && v.Input.Mode != "ADMISSION" && v.Input.Mode != "RETRY" && stepErr == nil && string(rec.Reason) != v.Expected.Reasons[0] {
		t.Fatalf("reason %q, want %q", rec.Reason, v.Expected.Reasons[0])
	}
	// A refused admission never spends the fresh authority it was refused for.
	if fresh.ID != "" {
		if got, err := s.Get(ctx, "", fresh.ID); err != nil || got.State != authority.StateIssued {
			t.Fatalf("refused admission consumed its authority: %s, %v", got.State, err)
		}
	}
	// The original authority is never released, whatever the outcome.
	if prior.ID != "" {
		if got, err := s.Get(ctx, "", prior.ID); err != nil || got.State != authority.StateConsumed {
			t.Fatalf("prior authority: %s, %v; want CONSUMED", got.State, err)
		}
	}
}

func mustTransition(t *testing.T, s *Store, op string, to journal.State, o journal.Outcome) {
	t.Helper()
	if _, err := s.Transition(ctx, op, to, o); err != nil {
		t.Fatal(err)
	}
}
