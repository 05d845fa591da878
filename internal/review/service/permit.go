package service

import (
	"context"
	"encoding/base64"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/policy"
	"github.com/actgate/actgate/internal/review"
)

// permit answers a Permit: the protected path of a pod in one request. The act is checked and
// policy evaluated exactly as for a Review (the sidecar decided Permit with the same compiled
// policy; the service never issues what its own evaluation would not). Then the Act is created
// carrying its permit record: the signed authority, and the operation that consumed it and
// when (permitRecord). The Act's name is derived from the act id, so its create is the
// compare-and-swap of the consumption: of any number of Permits of the act (from any number
// of replicas) at most one creates it, and the authority never exists unconsumed. A Permit
// that finds the Act already recorded is refused (EF_005), unless it is the same operation's
// retry, which gets the recorded answer again. No Lease is stored. The Act's status is left
// for the outcome Report, which writes decision, authority, operation and state in one patch:
// a permitted call costs two writes, the Act and its outcome.
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
	ttl := d.AuthorityTTL
	if ttl <= 0 {
		ttl = 60 * time.Second
	}
	a, err := s.signer.Sign(x.binding, x.now, min(ttl, authority.MaxTTL))
	if err != nil {
		return deny(http.StatusOK, ef.EFActInvalid, review.ReasonAuthority, "No authority could be issued for this act.")
	}
	opID := req.Permit.OperationID
	rec := permitRecord{authority: a, operation: opID, consumedAt: x.now.UTC().Truncate(time.Millisecond)}
	if err := rec.annotate(x.obj); err != nil {
		return deny(http.StatusOK, ef.EFActInvalid, review.ReasonAuthority, "No authority could be issued for this act.")
	}
	// The budget charges are planned and made before the Act's create, the consumption's
	// compare-and-swap (budgets.go); a create that refuses gives them back.
	if o := s.planBudgets(ctx, x, false); o != nil {
		return *o
	}
	if len(x.charges) > 0 {
		s.sweepSoon(x.c.namespace)
		if err := s.ledger.In(x.c.namespace).Charge(ctx, opID, x.charges); err != nil {
			o := budgetFailure(ctx, err)
			s.log.V(1).Info("permit refused: budget", "act", x.binding.ActID, "actionDigest", x.actionDigest(), "code", o.resp.Code,
				"policy", d.Policy, "rule", d.Rule)
			return o
		}
	}
	err = s.c.Create(ctx, x.obj, client.FieldOwner(s.manager))
	if err == nil {
		s.recentActs.Add(x.obj)
	}
	if apierrors.IsAlreadyExists(err) {
		var o *outcome
		if rec, o = s.permitted(ctx, x, opID); o != nil {
			s.refundUnlessRecorded(ctx, x.obj, opID, x.charges)
			return *o
		}
		err = nil
	}
	if err != nil {
		// Unknown whether the Act was created: the charges stay (counted more, never less).
		return apiFailure(ctx, "record the act", err)
	}
	signed, err := review.Signed(rec.authority)
	if err != nil {
		return deny(http.StatusOK, ef.EFActInvalid, review.ReasonAuthority, "No authority could be issued for this act.")
	}
	s.log.V(1).Info("permit issued consumed", "act", x.binding.ActID, "actionDigest", x.actionDigest(), "authority", rec.authority.ID,
		"operation", opID, "policy", d.Policy, "rule", d.Rule, "expires", rec.authority.ExpiresAt)
	return outcome{status: http.StatusOK, resp: review.Response{
		Allowed: true, Decision: v1alpha1.ActDecisionAllowed, Reason: review.ReasonPolicy, Act: x.obj.Name,
		ConsequenceClass: x.class, Authority: signed,
		Consumed: &review.Consumed{AuthorityID: rec.authority.ID, OperationID: rec.operation, ConsumedAt: rec.consumedAt},
	}}
}

// permitted answers a Permit whose Act already exists: it is read back (by quorum), and only
// the same operation's retry of the same call, before its outcome is reported, gets the
// recorded authority again. Anything else — another operation, an act recorded by a Review or
// a Refusal, an act id reused for another call, an outcome already recorded — is refused and
// nothing is written.
func (s *Service) permitted(ctx context.Context, x *call, opID string) (permitRecord, *outcome) {
	fail := func(o outcome) (permitRecord, *outcome) { return permitRecord{}, &o }
	want := x.obj.Spec
	cur := &v1alpha1.Act{}
	if err := s.c.Get(ctx, client.ObjectKeyFromObject(x.obj), cur); err != nil {
		return fail(apiFailure(ctx, "record the act", err))
	}
	if !equality.Semantic.DeepEqual(cur.Spec, want) {
		return fail(deny(http.StatusOK, ef.EFActInvalid, review.ReasonBadRequest, "The act id was already used for another call."))
	}
	rec, ok := permitRecordOf(cur)
	switch {
	case !ok:
		s.log.V(1).Info("permit refused: the act was already decided", "act", x.binding.ActID, "decision", cur.Status.Decision)
		return fail(deny(http.StatusOK, ef.EF005, review.ReasonAuthority, "The act was already decided; its authority cannot be issued again."))
	case rec.operation != opID || rec.authority.ID != mustID(x.binding) || cur.Status.State != "":
		s.log.V(1).Info("permit refused: the act's authority is consumed", "act", x.binding.ActID, "authority", rec.authority.ID)
		return fail(deny(http.StatusOK, ef.EF005, review.ReasonAuthority, ""))
	}
	x.obj = cur
	return rec, nil
}

// mustID is the authority ID of b, "" when b has none (never equal to a recorded ID).
func mustID(b authority.Binding) string {
	id, err := authority.DeriveID(b)
	if err != nil {
		return ""
	}
	return id
}

// permitRecord is what a Permit records on its Act at create (the v1alpha1
// AnnotationActPermit* annotations): the signed authority and its consumption.
type permitRecord struct {
	authority  authority.Authority
	operation  string
	consumedAt time.Time
}

// annotate writes r on a, which is about to be created.
func (r permitRecord) annotate(a *v1alpha1.Act) error {
	payload, err := r.authority.Payload()
	if err != nil {
		return err
	}
	if a.Annotations == nil {
		a.Annotations = map[string]string{}
	}
	a.Annotations[v1alpha1.AnnotationActPermitAuthority] = r.authority.ID
	a.Annotations[v1alpha1.AnnotationActPermitOperation] = r.operation
	a.Annotations[v1alpha1.AnnotationActPermitConsumedAt] = r.consumedAt.Format(time.RFC3339Nano)
	a.Annotations[v1alpha1.AnnotationActPermitPayload] = string(payload)
	a.Annotations[v1alpha1.AnnotationActPermitSignature] = base64.StdEncoding.EncodeToString(r.authority.Signature)
	return nil
}

// permitRecordOf reads the permit record of a, false when a has none or it does not parse (an
// act a Review or a Refusal recorded has none).
func permitRecordOf(a *v1alpha1.Act) (permitRecord, bool) {
	ann := a.Annotations
	id, op := ann[v1alpha1.AnnotationActPermitAuthority], ann[v1alpha1.AnnotationActPermitOperation]
	if id == "" || op == "" {
		return permitRecord{}, false
	}
	at, err := time.Parse(time.RFC3339Nano, ann[v1alpha1.AnnotationActPermitConsumedAt])
	if err != nil {
		return permitRecord{}, false
	}
	auth, err := authority.ParsePayload([]byte(ann[v1alpha1.AnnotationActPermitPayload]))
	if err != nil || auth.ID != id || auth.Binding.ActID != a.Spec.ActID {
		return permitRecord{}, false
	}
	if auth.Signature, err = base64.StdEncoding.DecodeString(ann[v1alpha1.AnnotationActPermitSignature]); err != nil {
		return permitRecord{}, false
	}
	return permitRecord{authority: auth, operation: op, consumedAt: at.UTC()}, true
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
	if o := s.recordAct(ctx, x); o != nil {
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
