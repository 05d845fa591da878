package service

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/policy"
	"github.com/actgate/actgate/internal/review"
)

// issueConsumer is implemented by the Lease store (leasestore.Store.IssueConsumed): it creates
// an authority already consumed, in one write.
type issueConsumer interface {
	IssueConsumed(ctx context.Context, a authority.Authority, operationID string) (authority.Record, error)
}

// permit answers a Permit: the protected path of a pod in one request. The act is checked and
// policy evaluated exactly as for a Review (the sidecar decided Permit with the same compiled
// policy; the service never issues what its own evaluation would not), the Act is recorded,
// and the authority is created already consumed by the sidecar's operation (the Lease create is
// the compare-and-swap: nobody can consume it in between). The Act's status is left for the
// outcome Report, which writes decision, authority, operation and state in one patch: a permit
// costs two writes, the Act and the Lease.
func (s *Service) permit(ctx context.Context, c *caller, req *review.Request) outcome {
	x, refused := s.evaluate(ctx, c, req)
	if refused != nil {
		return *refused
	}
	d := x.d
	switch {
	case d.Audit || d.Outcome == policy.OutcomeAllow || d.Outcome == policy.OutcomeEscalate:
		s.log.Info("permit refused: the policy does not permit this call", "act", x.binding.ActID,
			"actionDigest", x.actionDigest(), "outcome", d.Outcome, "audit", d.Audit, "policy", d.Policy, "rule", d.Rule)
		return deny(http.StatusOK, ef.EFPolicyDenied, review.ReasonPolicy, "The authority service's policy does not permit this call as a machine permit.")
	case d.Outcome != policy.OutcomePermit:
		code := d.Code
		if !code.Known() {
			code = ef.EFPolicyDenied
		}
		return deny(http.StatusOK, code, review.ReasonPolicy, d.Message)
	case x.act.PolicyState.PolicyEpoch != d.Epoch:
		// tool-use-binding §16 MUST 5: the sidecar decided under another epoch than the current.
		return deny(http.StatusOK, ef.EF002, review.ReasonAuthority, "The policy changed since the sink decided this call.")
	}
	groups, o := s.momentGroups(ctx, x)
	if o != nil {
		return *o
	}
	if declinedGroup(groups) != nil {
		return deny(http.StatusOK, ef.EFMomentDeclined, review.ReasonBindingMoment, "")
	}
	if o := s.recordAct(ctx, x.obj); o != nil {
		return *o
	}
	ttl := d.AuthorityTTL
	if ttl <= 0 {
		ttl = 60 * time.Second
	}
	a, err := s.signer.Sign(x.binding, x.now, min(ttl, authority.MaxTTL))
	if err != nil {
		return deny(http.StatusOK, ef.EFActInvalid, review.ReasonAuthority, "No authority could be issued for this act.")
	}
	opID := req.Permit.OperationID
	var rec authority.Record
	if ic, ok := s.store.(issueConsumer); ok {
		rec, err = ic.IssueConsumed(ctx, a, opID)
	} else if _, err = s.store.Issue(ctx, a); err == nil {
		rec, err = s.store.Consume(ctx, a.ID, x.binding, authority.Consumption{OperationID: opID})
	}
	if err != nil {
		s.log.V(1).Info("permit refused by the authority store", "act", x.binding.ActID, "authority", a.ID, "cause", authority.CodeOf(err))
		if errors.Is(err, authority.ErrAlreadyIssued) {
			err = fmt.Errorf("%w: %s", authority.ErrConsumed, a.ID)
		}
		return authorityFailure(ctx, err)
	}
	signed, err := review.Signed(a)
	if err != nil {
		return deny(http.StatusOK, ef.EFActInvalid, review.ReasonAuthority, "No authority could be issued for this act.")
	}
	s.log.V(1).Info("permit issued consumed", "act", x.binding.ActID, "actionDigest", x.actionDigest(), "authority", a.ID,
		"operation", opID, "policy", d.Policy, "rule", d.Rule, "expires", a.ExpiresAt)
	return outcome{status: http.StatusOK, resp: review.Response{
		Allowed: true, Decision: v1alpha1.ActDecisionAllowed, Reason: review.ReasonPolicy, Act: x.obj.Name,
		ConsequenceClass: x.class, Authority: signed,
		Consumed: &review.Consumed{AuthorityID: a.ID, OperationID: rec.ConsumedBy, ConsumedAt: rec.ConsumedAt.UTC()},
	}}
}

// refusal answers a Refusal: the Act of a call the sidecar refused by its own policy is
// recorded, Denied with the sidecar's code, so that the ledger shows refusals made in the pod.
// The act is checked and evaluated as for a Review (the Act's spec is the service's view of the
// call: destination, class, rule, epoch); the sidecar's code and message are recorded as its
// refusal. It authorises nothing: the answer is never an allow. It costs two writes, the Act
// and its status.
func (s *Service) refusal(ctx context.Context, c *caller, req *review.Request) outcome {
	x, refused := s.evaluate(ctx, c, req)
	if refused != nil {
		return *refused
	}
	if o := s.recordAct(ctx, x.obj); o != nil {
		return *o
	}
	code, msg := req.Refusal.Code, req.Refusal.Message
	if msg == "" {
		msg = code.Description()
	}
	if err := s.setActStatus(ctx, x.obj, deniedStatus(code, msg, v1alpha1.ActStateMatch)); err != nil {
		return apiFailure(ctx, "record the refusal", err)
	}
	s.log.V(1).Info("refusal recorded", "act", x.binding.ActID, "actionDigest", x.actionDigest(), "code", code,
		"policy", x.d.Policy, "rule", x.d.Rule)
	o := deny(http.StatusOK, code, review.ReasonPolicy, msg)
	o.resp.Act, o.resp.ConsequenceClass = x.obj.Name, x.class
	return o
}
