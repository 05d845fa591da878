package service

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/action"
	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/jcs"
	"github.com/actgate/actgate/internal/policy"
	"github.com/actgate/actgate/internal/review"
	"github.com/actgate/actgate/internal/sink"
)

func TestBearerToken(t *testing.T) {
	for _, tc := range []struct {
		header, token string
		ok            bool
	}{
		{"Bearer abc", "abc", true},
		{"bearer abc", "abc", true},
		{"Bearer  abc ", "abc", true},
		{"Bearer ", "", false},
		{"Basic YWJj", "", false},
		{"abc", "", false},
		{"", "", false},
	} {
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		if tc.header != "" {
			r.Header.Set("Authorization", tc.header)
		}
		token, ok := bearerToken(r)
		if token != tc.token || ok != tc.ok {
			t.Errorf("%q: %q %v, want %q %v", tc.header, token, ok, tc.token, tc.ok)
		}
	}
}

func TestSplitServiceAccount(t *testing.T) {
	for _, tc := range []struct {
		user, ns, name string
		ok             bool
	}{
		{"system:serviceaccount:agents:billing", "agents", "billing", true},
		{"system:serviceaccount:agents:billing.v2", "agents", "billing.v2", true},
		{"system:serviceaccount:agents", "", "", false},
		{"system:serviceaccount::billing", "", "", false},
		{"system:serviceaccount:Agents:billing", "", "", false},
		{"system:serviceaccount:agents:bill:ing", "", "", false},
		{"alice@example.com", "", "", false},
		{"system:node:n1", "", "", false},
	} {
		ns, name, ok := splitServiceAccount(tc.user)
		if ns != tc.ns || name != tc.name || ok != tc.ok {
			t.Errorf("%q: %q %q %v", tc.user, ns, name, ok)
		}
	}
}

func accepted(gen, observed, epoch int64, status metav1.ConditionStatus) *v1alpha1.ToolPolicy {
	p := &v1alpha1.ToolPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: gen}}
	p.Status.PolicyEpoch = epoch
	if status != "" {
		p.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ToolPolicyAcceptedCondition, Status: status, ObservedGeneration: observed}}
	}
	return p
}

func TestReady(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    *v1alpha1.ToolPolicy
		ok   bool
	}{
		{"accepted", accepted(3, 3, 2, metav1.ConditionTrue), true},
		{"accepted via status.observedGeneration", func() *v1alpha1.ToolPolicy {
			p := accepted(3, 2, 2, metav1.ConditionTrue)
			p.Status.ObservedGeneration = 3
			return p
		}(), true},
		{"no condition", accepted(3, 3, 2, ""), false},
		{"not accepted", accepted(3, 3, 2, metav1.ConditionFalse), false},
		{"unknown", accepted(3, 3, 2, metav1.ConditionUnknown), false},
		{"older generation", accepted(3, 2, 2, metav1.ConditionTrue), false},
		{"no epoch", accepted(3, 3, 0, metav1.ConditionTrue), false},
	} {
		if got := ready(tc.p) == ""; got != tc.ok {
			t.Errorf("%s: ready = %q", tc.name, ready(tc.p))
		}
	}
}

func TestSelects(t *testing.T) {
	p := &v1alpha1.ToolPolicy{Spec: v1alpha1.ToolPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}}}
	if !selects(p, map[string]string{"app": "a", "x": "y"}) || selects(p, map[string]string{"app": "b"}) || selects(p, nil) {
		t.Fatal("matchLabels not applied")
	}
	all := &v1alpha1.ToolPolicy{}
	if !selects(all, nil) {
		t.Fatal("an empty selector selects every pod")
	}
	broken := &v1alpha1.ToolPolicy{Spec: v1alpha1.ToolPolicySpec{PodSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}}}
	if !selects(broken, map[string]string{"app": "b"}) {
		t.Fatal("a selector that does not parse must count as selecting (fail closed)")
	}
}

func TestConsumeCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want ef.EFCode
	}{
		{authority.ErrConsumed, ef.EF005},
		{authority.ErrSinkMismatch, ef.EF040},
		{authority.ErrDestinationMismatch, ef.EFDestinationMismatch},
		{authority.ErrArgumentsMismatch, ef.EFScopeMismatch},
		{authority.ErrScopeMismatch, ef.EFScopeMismatch},
		{authority.ErrNotFound, ef.EF002},
		{authority.ErrExpired, ef.EF002},
		{authority.ErrNotYetValid, ef.EF002},
		{authority.ErrEpochMismatch, ef.EF002},
		{authority.ErrBadSignature, ef.EF002},
		{authority.ErrInvalid, ef.EF002},
		{authority.ErrStoreUnavailable, ef.EFStoreUnavailable},
		{errors.New("anything else"), ef.EFStoreUnavailable},
	} {
		if got := consumeCode(fmt.Errorf("wrapped: %w", tc.err)); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.err, got, tc.want)
		}
	}
}

// TestFailureCodes: an API server that is slow or unreachable is EF_060; other failures are
// EF_STORE_UNAVAILABLE; neither is ever allowed.
func TestFailureCodes(t *testing.T) {
	gr := schema.GroupResource{Resource: "leases"}
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want ef.EFCode
	}{
		{"deadline", context.Background(), fmt.Errorf("get: %w", context.DeadlineExceeded), ef.EF060},
		{"context ended", expired, errors.New("whatever"), ef.EF060},
		{"connection refused", context.Background(), &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, ef.EF060},
		{"server timeout", context.Background(), apierrors.NewServerTimeout(gr, "get", 1), ef.EF060},
		{"timeout", context.Background(), apierrors.NewTimeoutError("slow", 1), ef.EF060},
		{"too many requests", context.Background(), apierrors.NewTooManyRequests("busy", 1), ef.EF060},
		{"unavailable", context.Background(), apierrors.NewServiceUnavailable("down"), ef.EF060},
		{"forbidden", context.Background(), apierrors.NewForbidden(gr, "x", errors.New("no")), ef.EFStoreUnavailable},
		{"internal", context.Background(), apierrors.NewInternalError(errors.New("boom")), ef.EFStoreUnavailable},
		{"store unavailable, unreachable", context.Background(), fmt.Errorf("%w: %w", authority.ErrStoreUnavailable, context.DeadlineExceeded), ef.EF060},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := apiFailure(tc.ctx, "test", tc.err)
			if o.resp.Allowed || o.resp.Code != tc.want || o.status != http.StatusServiceUnavailable {
				t.Fatalf("%+v (HTTP %d), want a deny with %s", o.resp, o.status, tc.want)
			}
			if tc.want == ef.EF060 && (!o.resp.Retryable || o.resp.Reason != review.ReasonTimeout) {
				t.Fatalf("EF_060 without retryable/Timeout: %+v", o.resp)
			}
		})
	}
	if o := authorityFailure(context.Background(), fmt.Errorf("x: %w", authority.ErrConsumed)); o.resp.Code != ef.EF005 || o.resp.Reason != review.ReasonAuthority {
		t.Fatalf("authority refusal %+v", o.resp)
	}
}

// TestMergePatch: the examples of RFC 7396 Appendix A that apply to objects.
func TestMergePatch(t *testing.T) {
	for _, tc := range []struct{ target, patch, want string }{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`{"e":null}`, `{"a":1}`, `{"a":1,"e":null}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
		{`{"amount":"100.00"}`, `{"amount":12345678901234567890}`, `{"amount":12345678901234567890}`},
	} {
		got, err := sink.MergePatch(json.RawMessage(tc.target), json.RawMessage(tc.patch))
		if err != nil {
			t.Fatalf("%s + %s: %v", tc.target, tc.patch, err)
		}
		canon, err := jcs.Canonicalize(got, jcs.Full)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := jcs.Canonicalize([]byte(tc.want), jcs.Full)
		if string(canon) != string(want) {
			t.Errorf("%s + %s = %s, want %s", tc.target, tc.patch, canon, want)
		}
	}
	for _, bad := range [][2]string{{`[]`, `{}`}, {`{}`, `"x"`}, {`{}`, `{} {}`}, {`nope`, `{}`}} {
		if _, err := sink.MergePatch(json.RawMessage(bad[0]), json.RawMessage(bad[1])); err == nil {
			t.Errorf("%s + %s accepted", bad[0], bad[1])
		}
	}
}

// FuzzMergePatch: the target is the agent's arguments. Whatever they are, the merge never
// panics, and its result is an object.
func FuzzMergePatch(f *testing.F) {
	f.Add([]byte(`{"amount":"100.00","to":"x"}`), []byte(`{"dry_run":true}`))
	f.Add([]byte(`{"a":{"b":[1,2]}}`), []byte(`{"a":{"b":null}}`))
	f.Add([]byte(`{"a":1e400}`), []byte(`{}`))
	f.Fuzz(func(t *testing.T, target, patch []byte) {
		out, err := sink.MergePatch(target, patch)
		if err != nil {
			return
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(out, &obj); err != nil || obj == nil {
			t.Fatalf("merge result %s is not an object: %v", out, err)
		}
	})
}

func testCall(t *testing.T, args string, alts ...string) *call {
	t.Helper()
	canon, err := jcs.Canonicalize([]byte(args), jcs.Strict)
	if err != nil {
		t.Fatal(err)
	}
	d, err := action.Digest("send_payment", canon, jcs.Strict)
	if err != nil {
		t.Fatal(err)
	}
	x := &call{
		c:    &caller{user: "system:serviceaccount:agents:agent"},
		act:  &act.AgentCandidateAct{CandidateActID: "act-1", Tool: act.Tool{ToolID: "send_payment"}, ArgumentsDigest: act.ArgumentsDigest{Value: d}},
		args: canon, strict: true, server: "payments", destination: "https://payments.example/mcp", class: v1alpha1.ConsequenceFinancial,
		binding: authority.Binding{ActID: "act-1", ArgumentsDigest: jcs.Digest(canon)},
		d:       policy.Decision{Rule: "money-movement"},
	}
	for i, a := range alts {
		x.d.Alternatives = append(x.d.Alternatives, v1alpha1.Alternative{Label: fmt.Sprintf("alt %d", i), Reasoning: "because", Args: runtime.RawExtension{Raw: []byte(a)}})
	}
	return x
}

func TestGateEnvelope(t *testing.T) {
	x := testCall(t, `{"amount":"100.00","to":"acct-9"}`, `{"dry_run":true}`, `{"amount":"1.00"}`, `{"to":"acct-9"}`, `{"dry_run":true}`)
	env, err := gateEnvelope(x)
	if err != nil {
		t.Fatal(err)
	}
	// The requested call, then the two alternatives that differ from it and from each other.
	if env.NumOptions() != 3 || env.RecommendedIdx() != 1 {
		t.Fatalf("%d options, recommended %d", env.NumOptions(), env.RecommendedIdx())
	}
	if o, _ := env.Option(0); o.ActionDigest != x.actionDigest() {
		t.Fatal("option 0 is not the requested call")
	}
	dry, _ := action.Digest("send_payment", []byte(`{"amount":"100.00","dry_run":true,"to":"acct-9"}`), jcs.Strict)
	if o, _ := env.Option(1); o.ActionDigest != dry {
		t.Fatal("option 1 is not the merge-patched dry run")
	}
	if strings.Contains(string(env.Canonical()), "acct-9") || strings.Contains(string(env.Canonical()), "100.00") {
		t.Fatal("the briefing repeats argument values")
	}
	if _, err := gateEnvelope(testCall(t, `{"to":"acct-9"}`, `{"to":"acct-9"}`)); err == nil {
		t.Fatal("an envelope with one option was built")
	}
}

func TestNames(t *testing.T) {
	id := "act-0123456789abcdef0123456789abcdef-0123456789abcdef0123456789abcdef"
	if actName(id) != id {
		t.Fatal("a valid act id is not its own Act name")
	}
	for _, s := range []string{"Act_1", strings.Repeat("a", 300), "act/1"} {
		if n := actName(s); len(validation.IsDNS1123Subdomain(n)) > 0 || n == s {
			t.Errorf("actName(%q) = %q", s, n)
		}
	}
	if l := sessionLabel("mcp session ✓"); len(validation.IsValidLabelValue(l)) > 0 || l != sessionLabel("mcp session ✓") || l == sessionLabel("other") {
		t.Errorf("sessionLabel = %q", l)
	}
	if n := momentName(id, "alice@example.com"); len(validation.IsDNS1123Subdomain(n)) > 0 || n == momentName(id, "bob@example.com") {
		t.Errorf("momentName = %q", n)
	}
}

func testSigner(t *testing.T) *authority.Signer {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	s, err := authority.NewSigner(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type noStore struct{ authority.Store }

func TestNewRefusesIncompleteOptions(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	s := testSigner(t)
	for name, o := range map[string]Options{
		"no client":        {Store: noStore{}, Signer: s},
		"no store":         {Client: c, Signer: s},
		"no signer":        {Client: c, Store: noStore{}},
		"negative timeout": {Client: c, Store: noStore{}, Signer: s, ReviewTimeout: -time.Second},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}

// tokenReviews answers TokenReviews with status; everything else reaches the fake client.
func tokenReviews(status authenticationv1.TokenReviewStatus) client.Client {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	return interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme).Build(), interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if tr, ok := obj.(*authenticationv1.TokenReview); ok {
				tr.Status = status
				return nil
			}
			return c.Create(ctx, obj, opts...)
		},
	})
}

const goodBody = `{"apiVersion":"review.actgate.io/v1alpha1","kind":"ActReview","request":{"uid":"u-1","operation":"Review","server":"payments","act":{},"arguments":{}}}`

// TestServeHTTPRefusals: everything refused before a decision is a well-formed ActReview with
// allowed false, the right status and reason, and is counted.
func TestServeHTTPRefusals(t *testing.T) {
	sa := authenticationv1.UserInfo{Username: "system:serviceaccount:agents:agent"}
	for _, tc := range []struct {
		name, method, path, ctype, body, token string
		tr                                     authenticationv1.TokenReviewStatus
		status                                 int
		reason                                 review.Reason
		uid                                    string
	}{
		{"GET", http.MethodGet, review.Path, "application/json", goodBody, "t", authenticationv1.TokenReviewStatus{}, 405, review.ReasonBadRequest, ""},
		{"other path", http.MethodPost, "/apis", "application/json", goodBody, "t", authenticationv1.TokenReviewStatus{}, 404, review.ReasonBadRequest, ""},
		{"not JSON", http.MethodPost, review.Path, "text/plain", goodBody, "t", authenticationv1.TokenReviewStatus{}, 415, review.ReasonBadRequest, ""},
		{"too large", http.MethodPost, review.Path, "application/json", `{"x":"` + strings.Repeat("a", review.MaxReviewBytes) + `"}`, "t", authenticationv1.TokenReviewStatus{}, 413, review.ReasonBadRequest, ""},
		{"malformed", http.MethodPost, review.Path, "application/json", strings.Replace(goodBody, `"Review"`, `"Invoke"`, 1), "t", authenticationv1.TokenReviewStatus{}, 400, review.ReasonBadRequest, "u-1"},
		{"no token", http.MethodPost, review.Path, "application/json; charset=utf-8", goodBody, "", authenticationv1.TokenReviewStatus{}, 401, review.ReasonUnauthenticated, "u-1"},
		{"token not authenticated", http.MethodPost, review.Path, "application/json", goodBody, "t", authenticationv1.TokenReviewStatus{Error: "invalid"}, 401, review.ReasonUnauthenticated, "u-1"},
		{"other audience", http.MethodPost, review.Path, "application/json", goodBody, "t",
			authenticationv1.TokenReviewStatus{Authenticated: true, User: sa, Audiences: []string{"https://kubernetes.default.svc"}}, 401, review.ReasonUnauthenticated, "u-1"},
		{"not a service account", http.MethodPost, review.Path, "application/json", goodBody, "t",
			authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "alice@example.com"}, Audiences: []string{DefaultAudience}}, 401, review.ReasonUnauthenticated, "u-1"},
		{"two pods", http.MethodPost, review.Path, "application/json", goodBody, "t",
			authenticationv1.TokenReviewStatus{Authenticated: true, Audiences: []string{DefaultAudience}, User: authenticationv1.UserInfo{Username: sa.Username,
				Extra: map[string]authenticationv1.ExtraValue{extraPodName: {"a", "b"}, extraPodUID: {"uid-1"}}}}, 401, review.ReasonUnboundToken, "u-1"},
		{"pod name without UID", http.MethodPost, review.Path, "application/json", goodBody, "t",
			authenticationv1.TokenReviewStatus{Authenticated: true, Audiences: []string{DefaultAudience}, User: authenticationv1.UserInfo{Username: sa.Username,
				Extra: map[string]authenticationv1.ExtraValue{extraPodName: {"agent-0"}}}}, 401, review.ReasonUnboundToken, "u-1"},
		{"pod not found", http.MethodPost, review.Path, "application/json", goodBody, "t",
			authenticationv1.TokenReviewStatus{Authenticated: true, Audiences: []string{DefaultAudience}, User: authenticationv1.UserInfo{Username: sa.Username,
				Extra: map[string]authenticationv1.ExtraValue{extraPodName: {"agent-0"}, extraPodUID: {"uid-1"}}}}, 403, review.ReasonPodNotFound, "u-1"},
		{"unbound token", http.MethodPost, review.Path, "application/json", goodBody, "t",
			authenticationv1.TokenReviewStatus{Authenticated: true, User: sa, Audiences: []string{DefaultAudience}}, 401, review.ReasonUnboundToken, "u-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m, err := NewMetrics(reg)
			if err != nil {
				t.Fatal(err)
			}
			s, err := New(Options{Client: tokenReviews(tc.tr), Store: noStore{}, Signer: testSigner(t), Metrics: m})
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", tc.ctype)
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			w := httptest.NewRecorder()
			s.ServeHTTP(w, req)
			if w.Code != tc.status {
				t.Fatalf("HTTP %d, want %d: %s", w.Code, tc.status, w.Body.String())
			}
			resp, err := review.DecodeResponse(w.Body.Bytes(), "u-1")
			if tc.uid == "" {
				resp, err = review.DecodeResponse(w.Body.Bytes(), "")
			}
			if err != nil {
				t.Fatalf("response is not an ActReview for uid %q: %v\n%s", tc.uid, err, w.Body.String())
			}
			if resp.Allowed || resp.Reason != tc.reason || resp.Code == "" {
				t.Fatalf("response %+v, want a deny with reason %s", resp, tc.reason)
			}
			mfs, _ := reg.Gather()
			if len(mfs) != 2 {
				t.Fatalf("%d metric families after one review, want 2", len(mfs))
			}
		})
	}
}

func TestNilMetrics(t *testing.T) {
	var m *Metrics
	m.observe(review.OperationReview, review.Response{}, time.Millisecond) // must not panic
	if _, err := NewMetrics(prometheus.NewRegistry()); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	_, _ = NewMetrics(reg)
	if _, err := NewMetrics(reg); err == nil {
		t.Fatal("registering twice succeeded")
	}
}
