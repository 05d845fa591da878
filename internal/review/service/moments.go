package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"sort"
	"time"

	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/authority/leasestore"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/policy"
	"github.com/actgate/actgate/internal/review"
	"github.com/actgate/actgate/internal/tracing"
)

// ComponentBindingMoment is the LabelComponent value on the BindingMoments the service creates.
const ComponentBindingMoment = "binding-moment"

// group is the binding moments of one envelope in one session: one per principal asked.
type group struct {
	env     *envelope.Envelope
	moments []*v1alpha1.BindingMoment
	created time.Time
	expires time.Time
	actRef  string // the escalated Act
}

func (g *group) names() []string {
	out := make([]string, len(g.moments))
	for i, m := range g.moments {
		out[i] = m.Name
	}
	return out
}

// resolved is one principal's resolution of a group's envelope.
type resolved struct {
	principal string
	r         *envelope.Resolution
}

// resolutions returns the resolutions of g that count: recorded by the controller (status
// Resolved, resolvedBy = spec.principal), naming g's envelope, by a principal the current
// decision accepts for this call (policy.ValidResolver: listed, not the agent, not the sink
// under separation of duties).
func (g *group) resolutions(x *call) []resolved {
	var out []resolved
	for _, m := range g.moments {
		res := m.Spec.Resolution
		if m.Status.State != v1alpha1.BindingMomentResolved || res == nil || m.Status.ResolvedBy != m.Spec.Principal ||
			res.EnvelopeDigest != m.Spec.EnvelopeDigest || string(res.EnvelopeDigest) != g.env.Digest() {
			continue
		}
		// A moment authorises nothing once expired (BindingMomentExpired): a resolution recorded
		// at or after its expiry does not count.
		if m.Status.ResolvedAt == nil || !m.Status.ResolvedAt.Before(&m.Spec.ExpiresAt) {
			continue
		}
		if policy.ValidResolver(x.d, m.Spec.Principal, x.c.user, x.binding.SinkID) != nil {
			continue
		}
		r := &envelope.Resolution{EnvelopeDigest: string(res.EnvelopeDigest), Kind: envelope.Kind(res.Kind), Answer: res.Answer}
		if res.OptionIdx != nil {
			r.OptionIdx = int(*res.OptionIdx)
		}
		if envelope.Verify(g.env, r) != nil {
			continue
		}
		out = append(out, resolved{principal: m.Spec.Principal, r: r})
	}
	return out
}

// open reports whether some moment of g is still undecided at now: unexpired and not yet
// recorded Resolved or Expired by the controller (a resolution the principal wrote counts once
// the controller has recorded it).
func (g *group) open(now time.Time) bool {
	for _, m := range g.moments {
		if m.Status.State != v1alpha1.BindingMomentResolved && m.Status.State != v1alpha1.BindingMomentExpired && now.Before(m.Spec.ExpiresAt.Time) {
			return true
		}
	}
	return false
}

// expired reports whether g expired at now with no resolution that counts.
func (g *group) expired(now time.Time, rs []resolved) bool {
	return len(rs) == 0 && !now.Before(g.expires)
}

// momentGroups lists the binding moments of the call's session that offer the call's action
// on the call's server and destination (optionOn: an agent-authored moment's options may call
// several servers), made for the same agent (service account and pod), grouped by envelope,
// newest first. The pod is part of the agent: another pod presenting the same session id
// shares nothing.
func (s *Service) momentGroups(ctx context.Context, x *call) ([]*group, *outcome) {
	return s.listGroups(ctx, x, LabelSession, sessionLabel(x.session), func(ann map[string]string) bool {
		return ann[AnnotationSessionID] == x.session && ann[AnnotationAgent] == x.c.user && ann[AnnotationPodUID] == x.c.podUID
	})
}

// agentGroups lists the gate-authored binding moments that other sessions of the caller's
// agent (the same service account and pod) raised for exactly the call's action, server and
// destination, grouped by envelope, newest first. A caller whose pod is not known has none.
func (s *Service) agentGroups(ctx context.Context, x *call) ([]*group, *outcome) {
	key := escalationLabel(x)
	if key == "" {
		return nil, nil
	}
	return s.listGroups(ctx, x, LabelEscalation, key, func(ann map[string]string) bool {
		return ann[AnnotationSessionID] != x.session && ann[AnnotationAgent] == x.c.user && ann[AnnotationPodUID] == x.c.podUID &&
			ann[AnnotationServer] == x.server && ann[AnnotationDestination] == x.destination &&
			ann[AnnotationActionDigest] == x.actionDigest()
	})
}

// listGroups lists the binding moments the service made (LabelManagedBy) whose label key has
// value, whose annotations keep accepts and whose envelope offers the call's action, grouped
// by envelope, newest first.
//
// They are read from the namespace's moment informer (Cache), else (no informer, not synced, or
// x.momentsFromAPI) from the API server's watch cache, with the moments this service created
// that the read does not show yet (recentMoments). Either read lags etcd by the time a watch
// event takes to arrive. A Permit that misses a decline recorded within that lag is decided as
// it would have been an instant earlier; an escalation whose informer view says "pending" is
// decided again from the watch cache (confirmed); a review that misses a moment another
// replica created within that lag escalates anew (more moments for the principals, never an
// allow). What a grant rests on is read by quorum (grantMoment).
func (s *Service) listGroups(ctx context.Context, x *call, key, value string, keep func(map[string]string) bool) ([]*group, *outcome) {
	var items []v1alpha1.BindingMoment
	cached := false
	if s.cache != nil && !x.momentsFromAPI {
		items, cached = s.cache.Moments(ctx, x.c.namespace, key, value)
	}
	if cached {
		x.momentsCached = true
	} else {
		var list v1alpha1.BindingMomentList
		if err := s.c.List(ctx, &list, client.InNamespace(x.c.namespace),
			client.MatchingLabels{leasestore.LabelManagedBy: leasestore.ManagedBy, key: value}, fromWatchCache()); err != nil {
			o := apiFailure(ctx, "read the binding moments", err)
			return nil, &o
		}
		items = list.Items
	}
	items = s.recent.Merge(x.c.namespace, key, value, items)
	byDigest := map[string]*group{}
	for i := range items {
		m := &items[i]
		if m.Labels[leasestore.LabelManagedBy] != leasestore.ManagedBy || m.Labels[key] != value || !keep(m.Annotations) {
			continue
		}
		env, err := s.envelopes.parse(m.Spec.Envelope)
		if err != nil || env.Digest() != string(m.Spec.EnvelopeDigest) {
			s.log.Info("binding moment ignored: its envelope does not verify", "bindingMoment", m.Namespace+"/"+m.Name)
			continue
		}
		offers := false
		for i := range env.NumOptions() {
			if o, _ := env.Option(i); o.ActionDigest == x.actionDigest() && optionOn(m, env.NumOptions(), i, x) {
				offers = true
			}
		}
		if !offers {
			continue
		}
		g := byDigest[env.Digest()]
		if g == nil {
			g = &group{env: env, created: m.CreationTimestamp.Time, expires: m.Spec.ExpiresAt.Time, actRef: m.Spec.ActRef.Name}
			byDigest[env.Digest()] = g
		}
		g.moments = append(g.moments, m)
		if m.CreationTimestamp.Time.Before(g.created) {
			g.created = m.CreationTimestamp.Time
		}
	}
	out := make([]*group, 0, len(byDigest))
	for _, g := range byDigest {
		sort.Slice(g.moments, func(i, j int) bool { return g.moments[i].Name < g.moments[j].Name })
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].created.Equal(out[j].created) {
			return out[i].created.After(out[j].created)
		}
		return out[i].env.Digest() < out[j].env.Digest()
	})
	return out, nil
}

// declinedGroup returns a group a principal declined, if any: its actions are refused in the
// session (envelope-04 §7.3 declined; internal/sink keeps the same rule).
func declinedGroup(groups []*group) *group {
	for _, g := range groups {
		for _, m := range g.moments {
			if m.Status.State == v1alpha1.BindingMomentResolved && m.Spec.Resolution != nil &&
				m.Status.ResolvedBy == m.Spec.Principal && m.Spec.Resolution.Kind == v1alpha1.ResolutionKind(envelope.KindDeclined) {
				return g
			}
		}
	}
	return nil
}

func escalation(g *group, state review.EscalationState, rs []resolved) *review.Escalation {
	e := &review.Escalation{State: state, BindingMoments: g.names(), EnvelopeDigest: g.env.Digest()}
	if state == review.EscalationPending {
		e.Envelope = string(g.env.Canonical())
		e.ExpiresAt = &metav1.Time{Time: g.expires}
	}
	if len(rs) > 0 {
		r := rs[0].r
		e.Resolution = &review.Resolution{Kind: string(r.Kind), Answer: r.Answer}
		if r.Kind == envelope.KindOption {
			idx := int32(r.OptionIdx)
			e.Resolution.OptionIdx = &idx
		}
		for _, x := range rs {
			e.Resolution.ResolvedBy = append(e.Resolution.ResolvedBy, x.principal)
		}
	}
	return e
}

func ofKind(rs []resolved, k envelope.Kind) []resolved {
	var out []resolved
	for _, r := range rs {
		if r.r.Kind == k {
			out = append(out, r)
		}
	}
	return out
}

// escalate handles a call policy escalates to a human (see the package documentation,
// "Binding moments").
func (s *Service) escalate(ctx context.Context, x *call) outcome {
	if !x.strict {
		// Arguments outside the strict profile cannot be bound to a human (docs/architecture.md
		// "Digests").
		return s.refuse(ctx, x, deny(http.StatusOK, ef.EFArgumentsOutOfProfile, review.ReasonPolicy, ""))
	}
	groups, o := s.momentGroups(ctx, x)
	if o != nil {
		return *o
	}
	now := s.now()
	rss := make([][]resolved, len(groups))
	for i, g := range groups {
		rss[i] = g.resolutions(x)
	}
	// A decline or a question anywhere in the session closes the action (envelope-04 §7.3).
	for i, g := range groups {
		if d := ofKind(rss[i], envelope.KindDeclined); len(d) > 0 {
			o := deny(http.StatusOK, ef.EFMomentDeclined, review.ReasonBindingMoment, "")
			o.resp.Escalation = escalation(g, review.EscalationDeclined, d)
			return s.refuse(ctx, x, o)
		}
	}
	for i, g := range groups {
		if q := ofKind(rss[i], envelope.KindQuestion); len(q) > 0 {
			o := deny(http.StatusOK, ef.EFEscalationRequired, review.ReasonBindingMoment,
				"The principal reopened this question; deliberation is back with the agent.")
			o.resp.Escalation = escalation(g, review.EscalationReopened, q)
			return s.refuse(ctx, x, o)
		}
	}
	// An unspent grant for exactly this call, in any group.
	if o, ok := s.grantFrom(ctx, x, groups, rss); ok {
		return o
	}
	// An answer not yet delivered, newest first.
	for i, g := range groups {
		if a := ofKind(rss[i], envelope.KindAnswer); len(a) > 0 {
			if o, ok := s.deliverOnce(ctx, x, g, review.EscalationAnswered, a); ok {
				return o
			}
		}
	}
	// Moments still awaiting principals: the newest.
	for _, g := range groups {
		if g.open(now) {
			return s.confirmed(ctx, x, func() outcome { return s.pending(ctx, x, g) })
		}
	}
	// An expiry not yet delivered: the act is denied, once.
	for i, g := range groups {
		if g.expired(now, rss[i]) {
			if o, ok := s.deliverOnce(ctx, x, g, review.EscalationExpired, nil); ok {
				return o
			}
		}
	}
	// Another session of the same agent escalated exactly this action: an unspent grant of its
	// moments goes to the first call that asks, and while they are pending this call gets the
	// same moments rather than new ones for the principals to wade through. Declines,
	// questions, answers and expiries stay with the session they were raised in, and once its
	// moments are no longer pending the action escalates anew.
	agent, o := s.agentGroups(ctx, x)
	if o != nil {
		return *o
	}
	arss := make([][]resolved, len(agent))
	for i, g := range agent {
		arss[i] = g.resolutions(x)
	}
	if o, ok := s.grantFrom(ctx, x, agent, arss); ok {
		return o
	}
	for _, g := range agent {
		if g.open(now) {
			return s.confirmed(ctx, x, func() outcome { return s.pending(ctx, x, g) })
		}
	}
	// No moment for this action: the informer's view, with the moments this service created
	// within a watch event's lag (recentMoments), is as complete as the watch cache's.
	return s.newMoments(ctx, x)
}

// confirmed returns answer() when the call's moments were read from the API server. When they
// were read from the informer, whose view may lag by a watch event, the escalation is decided
// again from the API server's watch cache first: "still pending" is the answer a lagging view
// gives for a resolution just recorded, and the principal who just resolved should not wait a
// round for the informer. "No moment yet" is not confirmed: the moments this service just
// created are in the view (recentMoments). Every other answer rests on state that only moves
// forward once seen (a recorded resolution, an expiry), or on a quorum read (a grant).
func (s *Service) confirmed(ctx context.Context, x *call, answer func() outcome) outcome {
	if !x.momentsCached {
		return answer()
	}
	x.momentsFromAPI, x.momentsCached = true, false
	return s.escalate(ctx, x)
}

// grantFrom gives the call the authority of a group whose recorded options, from enough
// eligible principals, authorise exactly this call and whose grant is not spent; ok is false
// when there is none.
func (s *Service) grantFrom(ctx context.Context, x *call, groups []*group, rss [][]resolved) (outcome, bool) {
	for i, g := range groups {
		var voters []resolved
		var names []string
		for _, r := range ofKind(rss[i], envelope.KindOption) {
			// The option must authorise exactly this call: its action digest is recomputed from
			// the live tool and arguments (envelope-04 §7.3, §12.6).
			if _, err := envelope.AuthorizeCall(g.env, r.r, x.tool(), x.args); err == nil {
				voters = append(voters, r)
				names = append(names, r.principal)
			}
		}
		if policy.Satisfied(x.d, names, x.c.user, x.binding.SinkID) {
			if o, ok := s.grantMoment(ctx, x, g, voters); ok {
				return o, true
			}
		}
	}
	return outcome{}, false
}

// pending answers with the group's moments, still awaiting principals.
func (s *Service) pending(ctx context.Context, x *call, g *group) outcome {
	o := deny(http.StatusOK, ef.EFEscalationRequired, review.ReasonBindingMoment, x.d.Message)
	o.resp.Decision = v1alpha1.ActDecisionEscalated
	o.resp.Escalation = escalation(g, review.EscalationPending, nil)
	st := actStatus{decision: v1alpha1.ActDecisionEscalated, state: v1alpha1.ActStateMatch, code: ef.EFEscalationRequired,
		message: o.resp.Message, moments: g.names(), settled: metav1.ConditionFalse, settleReason: v1alpha1.ActAwaitingPrincipalReason}
	if err := s.setActStatus(ctx, x.obj, st); err != nil {
		s.log.Error(err, "act status not recorded", "act", x.binding.ActID)
	}
	return o
}

// grantMoment gives a resolved option's authority to this call, once: the grant is recorded on
// the escalated Act with the resourceVersion of a fresh read, so of several calls (and several
// replicas) exactly one gets it. ok is false when the grant was already spent on another call.
func (s *Service) grantMoment(ctx context.Context, x *call, g *group, voters []resolved) (outcome, bool) {
	esc := escalation(g, review.EscalationGranted, voters)
	id, err := authority.DeriveID(x.binding)
	if err != nil {
		return deny(http.StatusOK, ef.EFActInvalid, review.ReasonAuthority, "No authority could be issued for this act."), true
	}
	key := client.ObjectKey{Namespace: x.c.namespace, Name: g.actRef}
	var conflict error
	for range 3 {
		var escalated v1alpha1.Act
		err := s.c.Get(ctx, key, &escalated)
		switch {
		case apierrors.IsNotFound(err):
			// Without the escalated act the grant cannot be recorded once: not granted.
			s.log.Info("escalated act missing; its binding moments grant nothing", "act", g.actRef)
			return outcome{}, false
		case err != nil:
			return apiFailure(ctx, "read the escalated act", err), true
		}
		switch granted := escalated.Annotations[AnnotationGrantedAct]; {
		case granted == x.binding.ActID:
			return s.grantTo(ctx, x, esc), true
		case granted != "":
			return outcome{}, false
		}
		if escalated.Annotations == nil {
			escalated.Annotations = map[string]string{}
		}
		escalated.Annotations[AnnotationGrantedAct] = x.binding.ActID
		escalated.Annotations[AnnotationGrantedAuthority] = id
		err = s.c.Update(ctx, &escalated, client.FieldOwner(s.manager))
		switch {
		case apierrors.IsConflict(err):
			conflict = err
			continue
		case err != nil:
			return apiFailure(ctx, "record the grant", err), true
		}
		s.log.Info("binding moment resolution granted", "act", x.binding.ActID, "escalatedAct", g.actRef,
			"envelope", g.env.Digest(), "actionDigest", x.actionDigest())
		return s.grantTo(ctx, x, esc), true
	}
	return apiFailure(ctx, "record the grant", conflict), true
}

// grantTo issues the authority of a grant recorded on the escalated Act for this call. When
// the Review names the operation that consumes it and the call's Act has no status yet, the
// authority is consumed here (grantConsumed); otherwise it is issued as a Lease for a Consume.
func (s *Service) grantTo(ctx context.Context, x *call, esc *review.Escalation) outcome {
	st := x.obj.Status
	if x.consumeOp == "" || st.Decision != "" || st.State != "" || st.AuthorityRef != nil || st.OperationID != "" {
		return s.grant(ctx, x, x.d.AuthorityTTL, review.ReasonBindingMoment, esc)
	}
	return s.grantConsumed(ctx, x, esc)
}

// grantConsumed gives the call the authority of its grant already consumed by x.consumeOp: the
// permit record (the signed authority, the operation, when) is written on the call's Act by a
// compare-and-swap on the resourceVersion the Act was recorded at, so one Act records at most
// one consumption, and the grant on the escalated Act names this act alone. No Lease is
// stored, no Consume follows, and the Act's status is left for the outcome Report, as for a
// Permit: the Report authenticates by the permit record.
func (s *Service) grantConsumed(ctx context.Context, x *call, esc *review.Escalation) outcome {
	ttl := x.d.AuthorityTTL
	if ttl <= 0 {
		ttl = 60 * time.Second
	}
	a, err := s.signer.Sign(x.binding, x.now, min(ttl, authority.MaxTTL))
	if err != nil {
		return s.refuse(ctx, x, deny(http.StatusOK, ef.EFActInvalid, review.ReasonAuthority, "No authority could be issued for this act."))
	}
	rec := permitRecord{authority: a, operation: x.consumeOp, consumedAt: x.now.UTC().Truncate(time.Millisecond)}
	orig := x.obj.DeepCopy()
	if err := rec.annotate(x.obj); err != nil {
		return s.refuse(ctx, x, deny(http.StatusOK, ef.EFActInvalid, review.ReasonAuthority, "No authority could be issued for this act."))
	}
	// The budget charges the Act records (unenforced when a person approved past a limit) are
	// made before the permit record's compare-and-swap, and given back when it refuses.
	charged, o := s.chargeAct(ctx, x.obj, x.consumeOp)
	if o != nil {
		return s.refuse(ctx, x, *o)
	}
	pctx, span := tracing.Start(ctx, s.tracer, "actgate.grant.consume", trace.SpanKindInternal)
	err = s.c.Patch(pctx, x.obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}), client.FieldOwner(s.manager))
	if span.IsRecording() {
		code := ""
		if err != nil {
			code = string(ef.EF005)
		}
		span.SetAttributes(tracing.AttrActID.String(x.binding.ActID), tracing.AttrAuthorityID.String(a.ID),
			tracing.AttrOperationID.String(x.consumeOp), tracing.AttrActionDigest.String(x.actionDigest()), tracing.AttrCode.String(code))
	}
	span.End()
	switch {
	case apierrors.IsConflict(err):
		// Written meanwhile (a retried Review of the same act): only the same operation's
		// record, with no outcome yet, is answered again.
		cur := &v1alpha1.Act{}
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(x.obj), cur); err != nil {
			return apiFailure(ctx, "record the consumption", err)
		}
		got, ok := permitRecordOf(cur)
		if !ok || got.operation != x.consumeOp {
			s.refund(ctx, x.obj.Namespace, x.consumeOp, charged)
		}
		if !ok || got.operation != x.consumeOp || got.authority.ID != a.ID || cur.Status.State != "" {
			return deny(http.StatusOK, ef.EF005, review.ReasonAuthority, "This act's authority is already consumed.")
		}
		rec = got
	case err != nil:
		return apiFailure(ctx, "record the consumption", err)
	default:
		s.recentActs.Add(x.obj)
	}
	s.log.V(1).Info("granted authority issued consumed", "act", x.binding.ActID, "actionDigest", x.actionDigest(),
		"authority", a.ID, "operation", x.consumeOp, "expires", a.ExpiresAt)
	return consumedGrant(rec, esc)
}

// consumedGrant is the answer of a Review whose grant rec records consumed.
func consumedGrant(rec permitRecord, esc *review.Escalation) outcome {
	signed, err := review.Signed(rec.authority)
	if err != nil {
		return deny(http.StatusOK, ef.EFActInvalid, review.ReasonAuthority, "No authority could be issued for this act.")
	}
	return outcome{status: http.StatusOK, resp: review.Response{
		Allowed: true, Decision: v1alpha1.ActDecisionAllowed, Reason: review.ReasonBindingMoment, Authority: signed, Escalation: esc,
		Consumed: &review.Consumed{AuthorityID: rec.authority.ID, OperationID: rec.operation, ConsumedAt: rec.consumedAt},
	}}
}

// deliverOnce refuses the call with a resolution that authorises nothing (an answer) or an
// expiry, the first time it is seen for the escalated act; ok is false when it was delivered
// before, and the call escalates anew.
func (s *Service) deliverOnce(ctx context.Context, x *call, g *group, state review.EscalationState, rs []resolved) (outcome, bool) {
	key := client.ObjectKey{Namespace: x.c.namespace, Name: g.actRef}
	var escalated v1alpha1.Act
	err := s.c.Get(ctx, key, &escalated)
	switch {
	case apierrors.IsNotFound(err):
		return outcome{}, false
	case err != nil:
		return apiFailure(ctx, "read the escalated act", err), true
	}
	if escalated.Annotations[AnnotationDelivered] != "" {
		return outcome{}, false
	}
	orig := escalated.DeepCopy()
	if escalated.Annotations == nil {
		escalated.Annotations = map[string]string{}
	}
	escalated.Annotations[AnnotationDelivered] = string(state)
	if err := s.c.Patch(ctx, &escalated, client.MergeFrom(orig), client.FieldOwner(s.manager)); err != nil {
		return apiFailure(ctx, "record the delivery", err), true
	}
	code, msg := ef.EFEscalationRequired, "The principal answered; the answer is in the escalation. The call was not authorised."
	if state == review.EscalationExpired {
		code, msg = ef.EF002, "The binding moment expired unresolved; the call was not authorised."
		if err := s.setActStatus(ctx, &escalated, deniedStatus(code, msg, v1alpha1.ActStateMatch)); err != nil {
			s.log.Error(err, "escalated act status not recorded", "act", g.actRef)
		}
	}
	o := deny(http.StatusOK, code, review.ReasonBindingMoment, msg)
	o.resp.Escalation = escalation(g, state, rs)
	return s.refuse(ctx, x, o), true
}

// momentName is the name of the BindingMoment of an act for a principal: deterministic, so a
// retried review creates nothing new.
func momentName(actID, principal string) string {
	sum := sha256.Sum256([]byte(actID + "\x00" + principal))
	return "bm-" + hex.EncodeToString(sum[:])[:40]
}

// newMoments escalates the call: a gate-authored envelope, one BindingMoment per eligible
// principal, the act Escalated.
func (s *Service) newMoments(ctx context.Context, x *call) outcome {
	principals := policy.EligiblePrincipals(x.d, x.c.user, x.binding.SinkID)
	if len(principals) < policy.MinPrincipals(x.d) || len(principals) == 0 {
		return s.refuse(ctx, x, deny(http.StatusOK, ef.EFEscalationRequired, review.ReasonBindingMoment,
			"This call needs a human decision and policy names no principal who may make it."))
	}
	draft, err := gateDraft(x)
	var env *envelope.Envelope
	var calls []v1alpha1.BindingMomentCall
	if err == nil {
		env, err = envelope.Build(draft)
	}
	if err == nil {
		// What each option runs, for the principal's surfaces (kubectl actgate show, the
		// console): the calls the options' digests were computed from.
		calls, err = momentCalls(x, draft)
	}
	if err != nil {
		s.log.Info("no binding moment could be built", "act", x.binding.ActID, "policy", x.d.Policy, "rule", x.d.Rule, "cause", err.Error())
		return s.refuse(ctx, x, deny(http.StatusOK, ef.EFEscalationRequired, review.ReasonBindingMoment,
			"This call needs a human decision; no binding moment could be built."))
	}
	expires := metav1.NewTime(s.now().Add(s.momentTTL).Truncate(time.Second))
	g := &group{env: env, expires: expires.Time, actRef: x.obj.Name}
	for _, p := range principals {
		m := &v1alpha1.BindingMoment{
			ObjectMeta: metav1.ObjectMeta{
				Name: momentName(x.binding.ActID, p), Namespace: x.c.namespace,
				Labels: map[string]string{
					leasestore.LabelManagedBy: leasestore.ManagedBy, leasestore.LabelComponent: ComponentBindingMoment,
					LabelSession: sessionLabel(x.session), leasestore.LabelActID: leasestore.ActLabelValue(x.binding.ActID),
				},
				Annotations: map[string]string{
					AnnotationSessionID: x.session, AnnotationAgent: x.c.user, AnnotationServer: x.server,
					AnnotationDestination: x.destination, AnnotationTool: x.tool(), AnnotationActionDigest: x.actionDigest(),
				},
			},
			Spec: v1alpha1.BindingMomentSpec{
				Envelope: string(env.Canonical()), EnvelopeDigest: v1alpha1.Digest(env.Digest()),
				Synopsis: env.Content().Synopsis, Principal: p,
				ActRef: v1alpha1.LocalObjectReference{Name: x.obj.Name}, ExpiresAt: expires,
				Calls: calls,
			},
		}
		if key := escalationLabel(x); key != "" {
			m.Labels[LabelEscalation] = key
			m.Annotations[AnnotationPod], m.Annotations[AnnotationPodUID] = x.c.podName, x.c.podUID
		}
		switch err := s.c.Create(ctx, m, client.FieldOwner(s.manager)); {
		case err == nil:
			s.recent.Add(m)
		case !apierrors.IsAlreadyExists(err):
			return apiFailure(ctx, "create the binding moment", err)
		}
		g.moments = append(g.moments, m)
	}
	s.log.Info("escalated to binding moments", "act", x.binding.ActID, "actionDigest", x.actionDigest(),
		"envelope", env.Digest(), "bindingMoments", g.names(), "policy", x.d.Policy, "rule", x.d.Rule)
	return s.pending(ctx, x, g)
}
