package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/diag"
	"github.com/actgate/actgate/internal/policysource"
	"github.com/actgate/actgate/internal/review"
)

// onePolicy answers the first request with p and holds every watch until ctx ends.
type onePolicy struct {
	p    *review.PodPolicy
	sent bool
}

func (o *onePolicy) PodPolicy(ctx context.Context, _ string, _ time.Duration) (*review.PodPolicy, error) {
	if !o.sent && o.p != nil {
		o.sent = true
		return o.p, nil
	}
	<-ctx.Done()
	return nil, review.ErrUnavailable
}

func readyz(t *testing.T, h http.Handler, query string) (int, readyBody) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, ReadyPath+query, nil))
	var b readyBody
	if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil {
		t.Fatalf("body %q: %v", rec.Body.String(), err)
	}
	return rec.Code, b
}

func TestReadiness(t *testing.T) {
	up := httptest.NewServer(http.NotFoundHandler())
	defer up.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downURL := "http://" + closed.Addr().String() + "/mcp"
	_ = closed.Close()

	policy := &review.PodPolicy{Version: "policy/u/1", Policy: &review.GoverningPolicy{
		Name: "p", Namespace: testNS, UID: "u", Generation: 1, ResourceVersion: "1", Epoch: 4,
		Spec: v1alpha1.ToolPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}},
			Servers:     []v1alpha1.ToolServer{{Name: "payments", URL: up.URL}},
			Rules:       []v1alpha1.ToolRule{{Name: "all", Tools: []string{"*"}, Evidence: &v1alpha1.EvidenceRequirement{Role: v1alpha1.EvidenceRoleNone}}},
		},
	}}
	for _, tc := range []struct {
		name            string
		answer          *review.PodPolicy
		upstreams       []Upstream
		ready, startup  bool
		upstreamsReport map[string]string
	}{
		{"no policy yet", nil, []Upstream{{Name: "payments", URL: up.URL}}, false, false, map[string]string{"payments": "ok"}},
		{"policy and upstream", policy, []Upstream{{Name: "payments", URL: up.URL}}, true, true, map[string]string{"payments": "ok"}},
		{"upstream down", policy, []Upstream{{Name: "payments", URL: up.URL}, {Name: "mail", URL: downURL}}, false, true,
			map[string]string{"payments": "ok", "mail": diag.UpstreamUnreachable}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, err := policysource.New(policysource.Options{Client: &onePolicy{p: tc.answer}})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() { _ = src.Run(ctx) }()
			if tc.answer != nil {
				if err := src.WaitReady(ctx); err != nil {
					t.Fatal(err)
				}
			}
			h := newReadiness(src, tc.upstreams, nil)
			code, b := readyz(t, h, "")
			if (code == http.StatusOK) != tc.ready || b.Ready != tc.ready {
				t.Fatalf("readiness: HTTP %d %+v, want ready %v", code, b, tc.ready)
			}
			for name, want := range tc.upstreamsReport {
				if b.Upstreams[name] != want {
					t.Errorf("upstream %s: %q, want %q", name, b.Upstreams[name], want)
				}
			}
			code, b = readyz(t, h, "?check=policy")
			if (code == http.StatusOK) != tc.startup || b.Upstreams != nil {
				t.Fatalf("startup: HTTP %d %+v, want ready %v", code, b, tc.startup)
			}
			if tc.answer != nil && b.Epoch != 4 {
				t.Fatalf("epoch %d", b.Epoch)
			}
		})
	}
}

func TestReadinessCachesUpstreamChecks(t *testing.T) {
	src, err := policysource.New(policysource.Options{Client: &onePolicy{}})
	if err != nil {
		t.Fatal(err)
	}
	h := newReadiness(src, []Upstream{{Name: "payments", URL: "https://payments.example/mcp"}}, nil)
	dials := 0
	now := time.Unix(1_800_000_000, 0)
	h.now = func() time.Time { return now }
	h.dial = func(context.Context, string, string) (net.Conn, error) {
		dials++
		return nil, &net.OpError{Op: "dial", Err: errors.New("connection refused")}
	}
	for range 3 {
		readyz(t, h, "")
	}
	if dials != 1 {
		t.Fatalf("%d dials within the cache TTL", dials)
	}
	now = now.Add(upstreamCheckTTL)
	readyz(t, h, "")
	if dials != 2 {
		t.Fatalf("%d dials after the TTL", dials)
	}
}

func TestHostPort(t *testing.T) {
	for in, want := range map[string]string{
		"https://payments.example/mcp":     "payments.example:443",
		"http://browser.actgate.svc/x":     "browser.actgate.svc:80",
		"https://mail.example:8443/mcp":    "mail.example:8443",
		"http://[::1]:9000/mcp":            "[::1]:9000",
		"https://user:pw@host.example/mcp": "host.example:443",
	} {
		if got, err := hostPort(in); err != nil || got != want {
			t.Errorf("%s: %q %v, want %q", in, got, err, want)
		}
	}
}
