package authority

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/review"
)

// levelTransport sends every request with the review protocol level header set to value
// (the real client sets its own; this one is what a sidecar of another release would send).
type levelTransport struct {
	base  http.RoundTripper
	value string
}

func (l levelTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(review.LevelHeader, l.value)
	return l.base.RoundTrip(r)
}

// TestSidecarLevelRefusedBeforeAnything: the authority service, on a real API server, refuses
// the Permit of a sidecar whose review protocol level it does not serve — below
// MinSidecarLevel (SidecarTooOld) or above its own Level (SidecarTooNew), HTTP 403 — and one
// whose level header is malformed (HTTP 400), and creates nothing: no Act, no Lease, no
// request of the service's to the API server at all. Each answer states the service's level.
// The same Permit from a sidecar of this release is allowed once and its Act created.
func TestSidecarLevelRefusedBeforeAnything(t *testing.T) {
	counter := &apiCounter{counts: map[string]int{}}
	r := newRig(t, rigOptions{apiConfig: func(cfg *rest.Config) *rest.Config { return counter.wrap(cfg) }})
	ctx := context.Background()
	c := r.call(t, "s-level", "email_send", `{"to":"ops@example.com","body":"level"}`)
	actID := c.cand.Act.CandidateActID
	req := permitReq(t, c, 1, "op-level-1")

	for _, tc := range []struct {
		name, value string
		status      int
		reason      review.Reason
	}{
		{"below MinSidecarLevel", strconv.Itoa(review.MinSidecarLevel - 1), http.StatusForbidden, review.ReasonSidecarTooOld},
		{"above Level", strconv.Itoa(review.Level + 1), http.StatusForbidden, review.ReasonSidecarTooNew},
		{"malformed", "1; level=2", http.StatusBadRequest, review.ReasonBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			counter.reset()
			var status int
			var stated []string
			base := r.client(r.agentTk)
			cl := &review.Client{URL: base.URL, Token: base.Token, HTTP: &http.Client{Transport: observe(levelTransport{base.HTTP.Transport, tc.value},
				func(resp *http.Response) { status, stated = resp.StatusCode, resp.Header.Values(review.LevelHeader) })}}
			resp, err := cl.Do(ctx, req)
			// The client reads the service's refusal of its level as "no service of a level
			// this sidecar speaks": an error, never a response it could act on.
			if tc.reason != review.ReasonBadRequest && (!errors.Is(err, review.ErrSidecarRefused) || resp != nil) {
				t.Fatalf("Permit at level %q: %+v %v, want ErrSidecarRefused", tc.value, resp, err)
			}
			if tc.reason == review.ReasonBadRequest && (err != nil || resp.Allowed || resp.Reason != review.ReasonBadRequest || resp.Code != ef.EFPolicyDenied) {
				t.Fatalf("Permit with a malformed level: %+v %v", resp, err)
			}
			if status != tc.status || len(stated) != 1 || stated[0] != strconv.Itoa(review.Level) {
				t.Fatalf("HTTP %d stating level %q; want %d stating %d", status, stated, tc.status, review.Level)
			}
			if st := cl.LevelStatus(); tc.reason != review.ReasonBadRequest && st.Refused != tc.reason {
				t.Fatalf("client level status %+v, want refused %s", st, tc.reason)
			}
			if n := len(counter.snapshot()); n != 0 {
				t.Fatalf("the service asked the API server %v for a request refused by its level", counter.snapshot())
			}
			var acts v1alpha1.ActList
			if err := r.env.Client.List(ctx, &acts, client.InNamespace(r.ns)); err != nil || len(acts.Items) != 0 {
				t.Fatalf("Acts after a refused level: %d %v", len(acts.Items), err)
			}
			if n := len(r.leases(t)); n != 0 {
				t.Fatalf("%d Leases after a refused level", n)
			}
		})
	}

	// This release's sidecar: allowed, the Act created once.
	resp := r.do(t, req)
	if !resp.Allowed || resp.Consumed == nil || resp.Consumed.OperationID != "op-level-1" {
		t.Fatalf("Permit at level %d: %+v", review.Level, resp)
	}
	if a := r.actObject(t, actID); a.Annotations[v1alpha1.AnnotationActPermitOperation] != "op-level-1" {
		t.Fatalf("the Act does not record the Permit: %v", a.Annotations)
	}
	if st := r.client(r.agentTk).LevelStatus(); st.Seen {
		t.Fatalf("a fresh client's status: %+v", st)
	}
}

// observe calls seen with every response of rt.
func observe(rt http.RoundTripper, seen func(*http.Response)) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(r)
		if err == nil {
			seen(resp)
		}
		return resp, err
	})
}
