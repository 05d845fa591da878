package review

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/ef"
)

const (
	goodPodPolicy = `{"apiVersion":"review.actgate.io/v1alpha1","kind":"PodPolicy","version":"policy/u1/2/3",` +
		`"policy":{"name":"payments","namespace":"agents","uid":"u1","generation":2,"resourceVersion":"7","epoch":3,` +
		`"spec":{"podSelector":{"matchLabels":{"app":"a"}},"servers":[{"name":"payments","url":"https://payments.example/mcp"}],` +
		`"rules":[{"name":"reads","tools":["get_*"],"consequenceClass":"INFORMATIONAL","evidence":{"role":"None"}}]}}}`
	goodNoPolicy = `{"apiVersion":"review.actgate.io/v1alpha1","kind":"PodPolicy","version":"none/NotGoverned",` +
		`"none":{"reason":"NotGoverned","code":"EF_POLICY_UNAVAILABLE","message":"No ToolPolicy governs the caller's pod."}}`
)

func TestDecodePodPolicyAccepts(t *testing.T) {
	p, err := DecodePodPolicy([]byte(goodPodPolicy))
	if err != nil {
		t.Fatal(err)
	}
	if p.Policy == nil || p.Policy.Epoch != 3 || p.Policy.Spec.Servers[0].Name != "payments" || p.None != nil {
		t.Fatalf("decoded %+v", p)
	}
	p, err = DecodePodPolicy([]byte(goodNoPolicy))
	if err != nil {
		t.Fatal(err)
	}
	if p.None == nil || p.None.Reason != ReasonNotGoverned || p.None.Code != ef.EFPolicyUnavailable {
		t.Fatalf("decoded %+v", p)
	}
}

func TestDecodePodPolicyRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, body, field string
	}{
		{"not JSON", `{`, "$"},
		{"empty", ``, "$"},
		{"array", `[]`, "$"},
		{"wrong kind", strings.Replace(goodNoPolicy, `"PodPolicy"`, `"ActReview"`, 1), "kind"},
		{"wrong apiVersion", strings.Replace(goodNoPolicy, `review.actgate.io/v1alpha1`, `v1`, 1), "apiVersion"},
		{"no version", strings.Replace(goodNoPolicy, `"version":"none/NotGoverned",`, ``, 1), "version"},
		{"long version", strings.Replace(goodNoPolicy, `none/NotGoverned`, strings.Repeat("v", 600), 1), "version"},
		{"neither", `{"apiVersion":"review.actgate.io/v1alpha1","kind":"PodPolicy","version":"v"}`, "$"},
		{"both", strings.Replace(goodPodPolicy, `"policy":`, `"none":{"reason":"NotGoverned","code":"EF_POLICY_UNAVAILABLE","message":""},"policy":`, 1), "$"},
		{"unknown top-level member", strings.Replace(goodNoPolicy, `"version"`, `"extra":1,"version"`, 1), "$"},
		// A spec member this sidecar does not know might have restricted calls: refused, never dropped.
		{"unknown spec member", strings.Replace(goodPodPolicy, `"rules":`, `"denyEverything":true,"rules":`, 1), "$"},
		{"duplicate member", strings.Replace(goodPodPolicy, `"epoch":3`, `"epoch":3,"epoch":4`, 1), "$"},
		{"case-folded member", strings.Replace(goodPodPolicy, `"epoch":3`, `"Epoch":3`, 1), "$"},
		{"no epoch", strings.Replace(goodPodPolicy, `"epoch":3`, `"epoch":0`, 1), "policy.epoch"},
		{"no generation", strings.Replace(goodPodPolicy, `"generation":2`, `"generation":0`, 1), "policy.generation"},
		{"no uid", strings.Replace(goodPodPolicy, `"uid":"u1"`, `"uid":""`, 1), "policy"},
		{"no name", strings.Replace(goodPodPolicy, `"name":"payments","namespace"`, `"name":"","namespace"`, 1), "policy"},
		{"unknown code", strings.Replace(goodNoPolicy, `EF_POLICY_UNAVAILABLE`, `EF_999`, 1), "none"},
		{"no reason", strings.Replace(goodNoPolicy, `"reason":"NotGoverned",`, ``, 1), "none"},
		{"epoch is a string", strings.Replace(goodPodPolicy, `"epoch":3`, `"epoch":"3"`, 1), "$"},
		{"not UTF-8", "{\"apiVersion\":\"\xff\"}", "$"},
		{"too large", `{"x":"` + strings.Repeat("a", MaxPolicyBytes) + `"}`, "$"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := DecodePodPolicy([]byte(tc.body))
			var fe *FieldError
			if err == nil || !errors.Is(err, ErrBadReview) || !errors.As(err, &fe) || fe.Field != tc.field {
				t.Fatalf("got %+v, %v; want a FieldError at %s", p, err, tc.field)
			}
		})
	}
}

func FuzzDecodePodPolicy(f *testing.F) {
	f.Add([]byte(goodPodPolicy))
	f.Add([]byte(goodNoPolicy))
	f.Add([]byte(`{"apiVersion":"review.actgate.io/v1alpha1","kind":"PodPolicy","version":"v","policy":{}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := DecodePodPolicy(body)
		if err != nil {
			if !errors.Is(err, ErrBadReview) {
				t.Fatalf("error %v does not wrap ErrBadReview", err)
			}
			return
		}
		// Whatever decodes is one answer: a policy with an identity and an epoch, or a reason.
		if (p.Policy == nil) == (p.None == nil) || p.Version == "" {
			t.Fatalf("accepted %+v", p)
		}
		if p.Policy != nil && (p.Policy.Epoch < 1 || p.Policy.UID == "") {
			t.Fatalf("accepted a policy without identity or epoch: %+v", p.Policy)
		}
		if p.None != nil && !p.None.Code.Known() {
			t.Fatalf("accepted an unknown code %q", p.None.Code)
		}
	})
}

func TestClientPodPolicy(t *testing.T) {
	var gotQuery, gotAuth string
	status, body := http.StatusOK, goodPodPolicy
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != PolicyPath {
			http.NotFound(w, r)
			return
		}
		gotQuery, gotAuth = r.URL.RawQuery, r.Header.Get("Authorization")
		SetLevel(w.Header(), Level)
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	c := &Client{URL: srv.URL, HTTP: srv.Client(), Token: func() (string, error) { return "tok", nil }}
	ctx := context.Background()

	p, err := c.PodPolicy(ctx, "", 0)
	if err != nil || p.Policy == nil || gotQuery != "" || gotAuth != "Bearer tok" {
		t.Fatalf("%+v %v query %q auth %q", p, err, gotQuery, gotAuth)
	}
	if _, err := c.PodPolicy(ctx, "policy/u1/2/3", 1500*time.Millisecond); err != nil || gotQuery != "timeoutSeconds=2&version=policy%2Fu1%2F2%2F3&watch=true" {
		t.Fatalf("watch: %v, query %q", err, gotQuery)
	}
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   error
	}{
		{"unauthenticated", http.StatusUnauthorized, `{"kind":"Status","reason":"Unauthenticated"}`, ErrPolicyRefused},
		{"bad request", http.StatusBadRequest, `{}`, ErrPolicyRefused},
		{"unavailable", http.StatusServiceUnavailable, `{}`, ErrUnavailable},
		{"too many requests", http.StatusTooManyRequests, ``, ErrUnavailable},
		{"a 200 that does not decode", http.StatusOK, `{"kind":"PodPolicy"}`, ErrBadReview},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body = tc.status, tc.body
			if p, err := c.PodPolicy(ctx, "", 0); !errors.Is(err, tc.want) || p != nil {
				t.Fatalf("%+v %v, want %v", p, err, tc.want)
			}
		})
	}
	srv.Close()
	if _, err := c.PodPolicy(ctx, "", 0); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("server gone: %v", err)
	}
}
