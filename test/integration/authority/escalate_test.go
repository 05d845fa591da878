package authority

import (
	"testing"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/review"
)

// TestEscalationFromInformer: with the service's informers synced, a new escalation reads no
// binding moments from the API server (the informer's view, with the moments the service just
// created, is what a list of the watch cache would show): it costs three writes (the Act, the
// BindingMoment, the Act's status) and nothing else. The same action reviewed again at once,
// in the session and from another session of the pod, joins that moment: no wait on any cache,
// no second moment.
func TestEscalationFromInformer(t *testing.T) {
	r := newRig(t, rigOptions{})
	counter := cachedService(t, r, 0)
	waitMomentInformer(t, r, counter, "email_send", 1)

	counter.reset()
	first := r.call(t, "s-fresh", "send_payment", paymentArgs)
	resp := r.do(t, first.req)
	expectDeny(t, resp, ef.EFEscalationRequired, review.ReasonBindingMoment)
	if resp.Escalation == nil || resp.Escalation.State != review.EscalationPending || len(resp.Escalation.BindingMoments) != 1 {
		t.Fatalf("escalation: %+v / %+v", resp, resp.Escalation)
	}
	t.Logf("one escalation: API requests %v", counter.snapshot())
	if n := counter.get("GET bindingmoments"); n != 0 {
		t.Fatalf("the escalation read binding moments from the API server %d times (%v); want the informer", n, counter.snapshot())
	}
	if w := counter.writes(); w != 3 || counter.get("POST acts") != 1 || counter.get("POST bindingmoments") != 1 || counter.get("PATCH acts/status") != 1 {
		t.Fatalf("the escalation made %d writes (%v), want 3: the Act, the BindingMoment, the Act's status", w, counter.snapshot())
	}
	name := resp.Escalation.BindingMoments[0]
	for _, session := range []string{"s-fresh", "s-fresh-other"} {
		again := r.do(t, r.call(t, session, "send_payment", paymentArgs).req)
		if again.Escalation == nil || again.Escalation.State != review.EscalationPending || len(again.Escalation.BindingMoments) != 1 ||
			again.Escalation.BindingMoments[0] != name {
			t.Fatalf("the same action from session %s right after: %+v / %+v", session, again, again.Escalation)
		}
	}
	if n := len(r.moments(t)); n != 1 {
		t.Fatalf("%d BindingMoments, want the one escalation's", n)
	}
}
