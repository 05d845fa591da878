package service

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/review"
)

// countingClient is a fake API server that counts every request made of it (a TokenReview
// is the first thing a review asks) and answers TokenReviews as not authenticated.
func countingClient(n *atomic.Int64) client.Client {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	return interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme).Build(), interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			n.Add(1)
			if tr, ok := obj.(*authenticationv1.TokenReview); ok {
				tr.Status = authenticationv1.TokenReviewStatus{Error: "not in this test"}
				return nil
			}
			return c.Create(ctx, obj, opts...)
		},
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			n.Add(1)
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			n.Add(1)
			return c.List(ctx, list, opts...)
		},
	})
}

// TestLevelRefusals: on every endpoint (reviews, the pod policy, receipt anchors) a request
// whose review protocol level header is malformed is refused with 400 BadRequest, one of a
// level this service does not serve with 403 SidecarTooOld or SidecarTooNew, before the API
// server is asked anything; every answer, refusals included, states the service's level. A
// request without the header is level 1 and goes on to authentication.
func TestLevelRefusals(t *testing.T) {
	anchorBody := `{"apiVersion":"review.actgate.io/v1alpha1","kind":"ReceiptAnchorRequest"}`
	for _, tc := range []struct {
		name   string
		values []string // the request's level headers; nil: none
		status int      // on every endpoint; 401: passed the level check, refused at authentication
		reason string
	}{
		{"no header: level 1", nil, http.StatusUnauthorized, string(review.ReasonUnauthenticated)},
		{"level 1", []string{"1"}, http.StatusUnauthorized, string(review.ReasonUnauthenticated)},
		{"level 0", []string{"0"}, http.StatusForbidden, string(review.ReasonSidecarTooOld)},
		{"a future level", []string{strconv.Itoa(review.Level + 1)}, http.StatusForbidden, string(review.ReasonSidecarTooNew)},
		{"six digits", []string{"999999"}, http.StatusForbidden, string(review.ReasonSidecarTooNew)},
		{"empty", []string{""}, http.StatusBadRequest, string(review.ReasonBadRequest)},
		{"non-numeric", []string{"one"}, http.StatusBadRequest, string(review.ReasonBadRequest)},
		{"negative", []string{"-1"}, http.StatusBadRequest, string(review.ReasonBadRequest)},
		{"huge", []string{"18446744073709551617"}, http.StatusBadRequest, string(review.ReasonBadRequest)},
		{"two headers", []string{"1", "1"}, http.StatusBadRequest, string(review.ReasonBadRequest)},
		{"a list", []string{"1,2"}, http.StatusBadRequest, string(review.ReasonBadRequest)},
	} {
		for _, ep := range []struct {
			name, method, path, body string
			passed                   int // the status when the level passes: authentication, or the anchor's body check
		}{
			{"review", http.MethodPost, review.Path, goodBody, http.StatusUnauthorized},
			{"pod policy", http.MethodGet, review.PolicyPath, "", http.StatusUnauthorized},
			{"anchor", http.MethodPost, review.AnchorPath, anchorBody, http.StatusBadRequest},
		} {
			t.Run(tc.name+"/"+ep.name, func(t *testing.T) {
				status, wantReason := tc.status, tc.reason
				if status == http.StatusUnauthorized && ep.passed != status {
					status, wantReason = ep.passed, string(review.ReasonBadRequest) // the empty anchor request's publicKey
				}
				var asked atomic.Int64
				s, err := New(Options{Client: countingClient(&asked), Store: noStore{}, Signer: testSigner(t)})
				if err != nil {
					t.Fatal(err)
				}
				mux := http.NewServeMux()
				mux.Handle(review.Path, s)
				mux.Handle(review.PolicyPath, s.PolicyHandler())
				mux.Handle(review.AnchorPath, s.AnchorHandler())
				req := httptest.NewRequest(ep.method, ep.path, strings.NewReader(ep.body))
				if ep.body != "" {
					req.Header.Set("Content-Type", "application/json")
				}
				req.Header.Set("Authorization", "Bearer t")
				for _, v := range tc.values {
					req.Header.Add(review.LevelHeader, v)
				}
				w := httptest.NewRecorder()
				mux.ServeHTTP(w, req)
				if w.Code != status {
					t.Fatalf("HTTP %d, want %d: %s", w.Code, status, w.Body.String())
				}
				if got := w.Header().Values(review.LevelHeader); len(got) != 1 || got[0] != strconv.Itoa(review.Level) {
					t.Fatalf("answer states level %q, want %d", got, review.Level)
				}
				var reason string
				if ep.path == review.Path {
					resp, err := review.DecodeResponse(w.Body.Bytes(), "u-1")
					if err != nil {
						t.Fatalf("not an ActReview for the request's uid: %v\n%s", err, w.Body.String())
					}
					if resp.Allowed || resp.Code == "" {
						t.Fatalf("response %+v", resp)
					}
					reason = string(resp.Reason)
				} else {
					var st metav1.Status
					if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil || st.Kind != "Status" {
						t.Fatalf("not a Status: %v\n%s", err, w.Body.String())
					}
					reason = string(st.Reason)
				}
				if reason != wantReason || (tc.status == http.StatusUnauthorized && strings.Contains(w.Body.String(), review.LevelHeader)) {
					t.Fatalf("reason %q, want %q: %s", reason, wantReason, w.Body.String())
				}
				if n := asked.Load(); tc.status != http.StatusUnauthorized && n != 0 {
					t.Fatalf("the API server was asked %d times for a request refused by its level", n)
				}
			})
		}
	}
}

// TestLevelRefusalOfAFutureShape: a sidecar of a future level may send members this service
// does not know; it is told its level is the problem, in an answer for its uid (which it can
// read), not that its review is malformed. The same body at this level is malformed (and, as
// any body the strict decoder refuses before reading it, answered without a uid).
func TestLevelRefusalOfAFutureShape(t *testing.T) {
	body := strings.Replace(goodBody, `"operation":"Review"`, `"operation":"Review","futureMember":{"x":1}`, 1)
	for _, tc := range []struct {
		level  string
		status int
		reason review.Reason
		uid    types.UID
	}{
		{strconv.Itoa(review.Level + 1), http.StatusForbidden, review.ReasonSidecarTooNew, "u-1"},
		{strconv.Itoa(review.Level), http.StatusBadRequest, review.ReasonBadRequest, ""},
	} {
		var asked atomic.Int64
		s, err := New(Options{Client: countingClient(&asked), Store: noStore{}, Signer: testSigner(t)})
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodPost, review.Path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer t")
		req.Header.Set(review.LevelHeader, tc.level)
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		resp, err := review.DecodeResponse(w.Body.Bytes(), tc.uid)
		if w.Code != tc.status || err != nil || resp.Allowed || resp.Reason != tc.reason || asked.Load() != 0 {
			t.Fatalf("level %s: HTTP %d %+v %v (API requests %d), want %d %s for uid %q", tc.level, w.Code, resp, err, asked.Load(), tc.status, tc.reason, tc.uid)
		}
	}
}
