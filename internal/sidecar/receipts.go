package sidecar

import (
	"context"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/receipt"
	"github.com/actgate/actgate/internal/sink"
)

// Receipts: every allow and deny produces a signed, hash-chained receipt. The sidecar keeps the
// same receipt log as the standalone gate (internal/receipt), in its journal directory, with the
// same rules as internal/sink:
//   - a refusal, an escalation and the answer to a retry are appended (best effort: the decision
//     stands if the append fails, and the failure is logged);
//   - a hot-path allow is appended before the upstream is called, and a failed append refuses
//     the call (EF_STORE_UNAVAILABLE): no record of the decision, no dispatch;
//   - a dispatch of a consumed authority is made durable (AppendDurable) before the invoke; if
//     that fails, the DISPATCH_PENDING record is settled FAILED (not_dispatched) and the call is
//     refused, as internal/sink does;
//   - the outcome of a dispatch (the proxy's invoke, or a host loop's Complete) is appended.
// Receipts hold ids, digests and codes, never arguments.

// receiptFor is the receipt of a decision about cand.
func (g *Gate) receiptFor(cand *act.Candidate, server string, class act.ConsequenceClass, decision string, code ef.EFCode) receipt.Receipt {
	if class == "" {
		class = cand.Act.ConsequenceClass
	}
	return receipt.Receipt{
		Time: g.now().UTC(), ActID: cand.Act.CandidateActID, Tool: cand.Act.Tool.ToolID, Server: server,
		Class: string(class), Decision: decision, Code: string(code),
		ArgumentsDigest: cand.ArgumentsDigest(), ActionDigest: cand.ActionDigest(),
	}
}

// appendReceipt appends r when the Gate keeps receipts.
func (g *Gate) appendReceipt(r receipt.Receipt) error {
	if g.receipts == nil {
		return nil
	}
	_, err := g.receipts.Append(r)
	return err
}

// receiptRefusal appends the receipt of a refusal or an escalation (best effort).
func (g *Gate) receiptRefusal(cand *act.Candidate, server string, class act.ConsequenceClass, code ef.EFCode) {
	d := receipt.DecisionDeny
	if code == ef.EFEscalationRequired {
		d = receipt.DecisionEscalate
	}
	if err := g.appendReceipt(g.receiptFor(cand, server, class, d, code)); err != nil {
		g.log.Error(err, "Receipt append failed", "act", cand.Act.CandidateActID, "code", code)
	}
}

// receiptHot appends the allow of a hot-path call before it is invoked. If that fails the call
// must not be invoked: no record of the decision, no dispatch (fail closed, as internal/sink);
// it returns the refusal to give.
func (g *Gate) receiptHot(cand *act.Candidate, server string, ad admission, opID string) (sink.Result, bool) {
	d := receipt.DecisionAllow
	if ad.audit && ad.auditCode != "" {
		d = receipt.DecisionAuditAllow
	}
	r := g.receiptFor(cand, server, ad.class, d, ad.auditCode)
	r.OperationID = opID
	err := g.appendReceipt(r)
	if err == nil {
		return sink.Result{}, true
	}
	g.log.Error(err, "Receipt append failed; not invoking", "act", cand.Act.CandidateActID)
	res := refusal(ef.EFStoreUnavailable, "")
	res.ActID = cand.Act.CandidateActID
	return res, false
}

// receiptDispatch makes the allow of a dispatch durable before it is invoked. On failure it
// settles the DISPATCH_PENDING record FAILED (not_dispatched) and returns the refusal to give.
func (g *Gate) receiptDispatch(ctx context.Context, cand *act.Candidate, server string, ad admission) (sink.Result, bool) {
	if g.receipts == nil {
		return sink.Result{}, true
	}
	rec := ad.rec
	r := g.receiptFor(cand, server, ad.class, receipt.DecisionAllow, "")
	r.ActID, r.AuthorityID, r.OperationID = rec.ActID, rec.AuthorityID, rec.OperationID
	_, err := g.receipts.AppendDurable(ctx, r)
	if err == nil {
		return sink.Result{}, true
	}
	g.log.Error(err, "Durable receipt failed; not invoking", "act", rec.ActID, "operation", rec.OperationID)
	if settled, err := g.transition(rec.OperationID, journal.StateFailed, sink.NotDispatchedOutcome(rec.OperationID)); err != nil {
		// It stays DISPATCH_PENDING: INDETERMINATE at the next start, refused until reconciled.
		g.log.Error(err, "Could not settle an undispatched record", "operation", rec.OperationID)
	} else {
		g.report(settled)
	}
	code := ef.EFStoreUnavailable
	if ctx.Err() != nil {
		code = ef.EF060
	}
	g.receiptRefusal(cand, server, ad.class, code)
	res := refusal(code, "")
	res.ActID = rec.ActID
	return res, false
}

// receiptOutcome appends the outcome of a dispatch (best effort).
func (g *Gate) receiptOutcome(rec journal.DispatchRecord) {
	if g.receipts == nil {
		return
	}
	if err := g.appendReceipt(receipt.OutcomeOf(rec, g.serverOf(rec.Upstream), g.now())); err != nil {
		g.log.Error(err, "Receipt append failed", "act", rec.ActID, "operation", rec.OperationID)
	}
}

// serverOf is the name of the server whose URL is upstream ("" if none).
func (g *Gate) serverOf(upstream string) string {
	for name, u := range g.servers {
		if u == upstream {
			return name
		}
	}
	return ""
}
