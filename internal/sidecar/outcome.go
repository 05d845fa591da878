package sidecar

import (
	"context"
	"errors"
	"fmt"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/review"
	"github.com/actgate/actgate/internal/sink"
)

// record classifies one invocation as internal/sink does (sink.ClassifyOutcome) and records it
// in the journal. The write has its own deadline: an outcome is recorded even when the caller
// has gone. A write that fails leaves the record DISPATCH_PENDING (recovery makes it
// INDETERMINATE), and the call is reported INDETERMINATE.
func (g *Gate) record(rec journal.DispatchRecord, out sink.InvokeResult, ierr error) (journal.State, error) {
	to, o := sink.ClassifyOutcome(rec.OperationID, out, ierr)
	out2, err := g.transition(rec.OperationID, to, o)
	if err != nil {
		g.log.Error(err, "Outcome not recorded", "act", rec.ActID, "operation", rec.OperationID, "outcome", to)
		return journal.StateIndeterminate, fmt.Errorf("sidecar: recording outcome %s of %s: %w", to, rec.OperationID, err)
	}
	g.report(out2)
	g.receiptOutcome(out2)
	return to, nil
}

// report tells the authority service the outcome just journaled (operation Report), so that
// the Act moves from CONSUMED to EXECUTED, FAILED or INDETERMINATE: digests only, never the
// result. It is best effort under its own short deadline: the journal is the source of truth,
// and a report that fails or is refused is logged (ids and digests) and changes nothing of
// what the agent gets.
func (g *Gate) report(rec journal.DispatchRecord) {
	var state v1alpha1.ActState
	switch rec.State {
	case journal.StateExecuted:
		state = v1alpha1.ActStateExecuted
	case journal.StateFailed:
		state = v1alpha1.ActStateFailed
	case journal.StateIndeterminate:
		state = v1alpha1.ActStateIndeterminate
	default:
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.reportTO)
	defer cancel()
	resp, err := g.review.Do(ctx, review.Request{Operation: review.OperationReport, Report: &review.ReportRequest{
		AuthorityID: rec.AuthorityID, OperationID: rec.OperationID, State: state, EvidenceDigest: rec.EvidenceDigest,
	}})
	switch {
	case err != nil:
		g.log.Error(err, "Outcome not reported to the authority service", "act", rec.ActID, "authority", rec.AuthorityID,
			"operation", rec.OperationID, "actionDigest", rec.ActionDigest, "state", state, "evidence", rec.EvidenceDigest)
	case !resp.Allowed || resp.Reported == nil || resp.Reported.State != state || resp.Reported.OperationID != rec.OperationID:
		g.log.Info("Outcome report refused by the authority service", "act", rec.ActID, "authority", rec.AuthorityID,
			"operation", rec.OperationID, "actionDigest", rec.ActionDigest, "state", state, "evidence", rec.EvidenceDigest,
			"code", resp.Code, "reason", resp.Reason)
	default:
		g.log.V(1).Info("Outcome reported", "act", rec.ActID, "actObject", resp.Act, "operation", rec.OperationID, "state", state)
	}
}

func (g *Gate) transition(opID string, to journal.State, o journal.Outcome) (journal.DispatchRecord, error) {
	ctx, cancel := context.WithTimeout(context.Background(), g.recordTO)
	defer cancel()
	rec, err := g.journal.Transition(ctx, opID, to, o)
	if err == nil {
		g.unsettled.settled(rec)
	}
	return rec, err
}

// HostOutcome is what a host loop reports about a tool it ran (POST /v1/complete).
type HostOutcome string

// Host outcomes.
const (
	// HostExecuted: the tool ran and returned its result.
	HostExecuted HostOutcome = "executed"
	// HostFailed: the tool refused or failed with an error of its own.
	HostFailed HostOutcome = "failed"
	// HostIndeterminate: the host does not know whether the tool took effect (it crashed, timed
	// out, lost the connection). Only authenticated reconciliation settles it.
	HostIndeterminate HostOutcome = "indeterminate"
)

// Sentinel errors of Complete.
var (
	// ErrUnknownOperation: no dispatch of this sidecar has that operation id.
	ErrUnknownOperation = errors.New("sidecar: no such dispatch")
	// ErrSettled: the dispatch already has an outcome; it is never overwritten.
	ErrSettled = errors.New("sidecar: dispatch already settled")
)

// Complete records the outcome a host loop reports for a dispatch Enforce allowed. The host
// loop is the executor of an in-process tool, so its report of executed or failed is the
// authoritative evidence, digested with the result it returned; indeterminate stays
// INDETERMINATE. A dispatch is settled once: a second report is ErrSettled.
func (g *Gate) Complete(ctx context.Context, operationID string, outcome HostOutcome, result []byte) (journal.DispatchRecord, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.recordTO)
	defer cancel()
	rec, err := g.journal.Record(rctx, operationID)
	switch {
	case errors.Is(err, journal.ErrNotFound):
		return journal.DispatchRecord{}, fmt.Errorf("%w: %s", ErrUnknownOperation, clip(operationID))
	case err != nil:
		return journal.DispatchRecord{}, err
	case !rec.State.InFlight():
		return rec, fmt.Errorf("%w: %s is %s", ErrSettled, operationID, rec.State)
	}
	var (
		to journal.State
		o  journal.Outcome
	)
	switch outcome {
	case HostExecuted:
		to = journal.StateExecuted
		o = journal.Outcome{Authoritative: true, Reason: ReasonHostExecuted, EvidenceDigest: sink.EvidenceDigest(result)}
	case HostFailed:
		to = journal.StateFailed
		o = journal.Outcome{Authoritative: true, Reason: ReasonHostFailed, EvidenceDigest: sink.EvidenceDigest(result)}
	case HostIndeterminate:
		to = journal.StateIndeterminate
		o = journal.Outcome{Reason: ReasonHostUnknown}
	default:
		return rec, fmt.Errorf("sidecar: outcome %q is not executed, failed or indeterminate", clip(string(outcome)))
	}
	if to.Terminal() && len(result) <= journal.MaxResultBytes {
		o.Result = result
	}
	out, err := g.transition(operationID, to, o)
	if err != nil {
		if errors.Is(err, journal.ErrInvalidTransition) {
			return rec, fmt.Errorf("%w: %w", ErrSettled, err)
		}
		return rec, err
	}
	g.log.Info("Dispatch outcome reported by the host loop", "act", out.ActID, "authority", out.AuthorityID,
		"operation", out.OperationID, "actionDigest", out.ActionDigest, "state", out.State)
	g.report(out)
	g.receiptOutcome(out)
	return out, nil
}

// clip bounds an untrusted string for errors and logs.
func clip(s string) string {
	if len(s) > 128 {
		return s[:128] + "…"
	}
	return s
}
