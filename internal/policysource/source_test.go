package policysource

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/review"
	"github.com/actgate/actgate/internal/sink"
)

const paymentsURL = "https://payments.example/mcp"

// service plays the authority service's policy endpoint: each answer is queued by the test;
// a watch waits for the next one.
type service struct {
	mu      sync.Mutex
	answers chan result
	asked   int
}

type result struct {
	p   *review.PodPolicy
	err error
}

func newService() *service { return &service{answers: make(chan result, 16)} }

func (s *service) PodPolicy(ctx context.Context, _ string, _ time.Duration) (*review.PodPolicy, error) {
	s.mu.Lock()
	s.asked++
	s.mu.Unlock()
	select {
	case r := <-s.answers:
		return r.p, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", review.ErrUnavailable, ctx.Err())
	}
}

func (s *service) answer(p *review.PodPolicy, err error) { s.answers <- result{p, err} }

func spec(role v1alpha1.EvidenceRole) v1alpha1.ToolPolicySpec {
	return v1alpha1.ToolPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}},
		Sink:        &v1alpha1.SinkIdentity{ID: "sink-a"},
		Servers:     []v1alpha1.ToolServer{{Name: "payments", URL: paymentsURL}},
		Rules: []v1alpha1.ToolRule{{Name: "reads", Tools: []string{"get_*"}, ConsequenceClass: v1alpha1.ConsequenceInformational,
			Evidence: &v1alpha1.EvidenceRequirement{Role: role}}},
	}
}

func governing(epoch int64, s v1alpha1.ToolPolicySpec) *review.PodPolicy {
	return &review.PodPolicy{Version: fmt.Sprint("policy/u1/", epoch), Policy: &review.GoverningPolicy{
		Name: "payments", Namespace: "agents", UID: "u1", Generation: epoch, ResourceVersion: fmt.Sprint(epoch), Epoch: epoch, Spec: s,
	}}
}

func none(reason review.Reason) *review.PodPolicy {
	return &review.PodPolicy{Version: "none/" + string(reason), None: &review.NoPolicy{Reason: reason, Code: ef.EFPolicyUnavailable, Message: "none"}}
}

var getBalance = sink.PolicyRequest{Server: "payments", Destination: paymentsURL, Tool: "get_balance", Args: []byte(`{}`),
	Class: act.ClassInformational, Agent: "system:serviceaccount:agents:a", StrictArgs: true}

// until waits for cond.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func start(t *testing.T, svc *service, sinkID string) *Source {
	t.Helper()
	src, err := New(Options{Client: svc, SinkID: sinkID, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v", err)
		}
	})
	return src
}

func expectRefused(t *testing.T, src *Source, code ef.EFCode) {
	t.Helper()
	d := src.Evaluate(context.Background(), getBalance)
	if d.Outcome != sink.PolicyDeny || d.Code != code {
		t.Fatalf("decision %+v, want a deny with %s", d, code)
	}
	if src.Ready() || src.CanEscalate("payments", "get_balance") || len(src.Servers()) != 0 || src.SinkID() != "" {
		t.Fatalf("holds a policy: %+v", src.Status())
	}
}

func TestSourceFailsClosed(t *testing.T) {
	svc := newService()
	src := start(t, svc, "sink-a")

	// Nothing received yet.
	expectRefused(t, src, ef.EFPolicyUnavailable)
	if st := src.Status(); st.Reason != "NotYetReceived" {
		t.Fatalf("status %+v", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := src.WaitReady(ctx); !errors.Is(err, ErrNoPolicy) {
		t.Fatalf("WaitReady: %v", err)
	}

	// A policy: decided by it, at its epoch.
	svc.answer(governing(1, spec(v1alpha1.EvidenceRoleNone)), nil)
	if err := src.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := src.Evaluate(context.Background(), getBalance); d.Outcome != sink.PolicyAllow || d.Epoch != 1 || d.Policy != "agents/payments" {
		t.Fatalf("decision %+v", d)
	}
	if src.SinkID() != "sink-a" || len(src.Servers()) != 1 || src.Epoch() != 1 {
		t.Fatalf("status %+v", src.Status())
	}

	// The service unreachable: the policy is kept (the hot path continues).
	svc.answer(nil, fmt.Errorf("%w: connection refused", review.ErrUnavailable))
	svc.answer(governing(1, spec(v1alpha1.EvidenceRoleNone)), nil)
	until(t, "the re-ask after the failure", func() bool { svc.mu.Lock(); defer svc.mu.Unlock(); return svc.asked >= 4 })
	if !src.Ready() {
		t.Fatalf("dropped the policy on a transport error: %+v", src.Status())
	}

	// A change: the new epoch decides.
	svc.answer(governing(2, spec(v1alpha1.EvidenceRolePolicyPermit)), nil)
	until(t, "epoch 2", func() bool { return src.Epoch() == 2 })
	if d := src.Evaluate(context.Background(), getBalance); d.Outcome != sink.PolicyPermit || d.Epoch != 2 {
		t.Fatalf("decision %+v", d)
	}

	// None governs the pod any more.
	svc.answer(none(review.ReasonAmbiguousPolicy), nil)
	until(t, "none", func() bool { return !src.Ready() })
	expectRefused(t, src, ef.EFPolicyUnavailable)
	if st := src.Status(); st.Reason != string(review.ReasonAmbiguousPolicy) {
		t.Fatalf("status %+v", st)
	}

	// Back, then a policy that does not compile.
	svc.answer(governing(3, spec(v1alpha1.EvidenceRoleNone)), nil)
	until(t, "epoch 3", func() bool { return src.Epoch() == 3 })
	bad := spec(v1alpha1.EvidenceRoleNone)
	bad.Rules[0].Arguments = []v1alpha1.ArgumentConstraint{{Name: "broken", Expression: "args.amount <<>> 1"}}
	svc.answer(governing(4, bad), nil)
	until(t, "the compile error", func() bool { return src.Status().Reason == "CompileError" })
	expectRefused(t, src, ef.EFPolicyUnavailable)

	// Back, then an authoritative refusal of the request itself.
	svc.answer(governing(5, spec(v1alpha1.EvidenceRoleNone)), nil)
	until(t, "epoch 5", func() bool { return src.Epoch() == 5 })
	svc.answer(nil, fmt.Errorf("%w: HTTP 401", review.ErrPolicyRefused))
	until(t, "the refusal", func() bool { return !src.Ready() })
	expectRefused(t, src, ef.EFPolicyUnavailable)

	// Back, then an answer that does not decode.
	svc.answer(governing(6, spec(v1alpha1.EvidenceRoleNone)), nil)
	until(t, "epoch 6", func() bool { return src.Epoch() == 6 })
	svc.answer(nil, fmt.Errorf("%w: %w", review.ErrUnavailable, review.ErrBadReview))
	until(t, "the undecodable answer", func() bool { return !src.Ready() })
	expectRefused(t, src, ef.EFPolicyUnavailable)
}

func TestSourceSinkMismatch(t *testing.T) {
	svc := newService()
	src := start(t, svc, "sink-b")
	svc.answer(governing(1, spec(v1alpha1.EvidenceRoleNone)), nil)
	until(t, "the answer", func() bool { return src.Status().Reason == "SinkMismatch" })
	expectRefused(t, src, ef.EF040)
}

func TestNewRequiresClient(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Fatal("accepted no client")
	}
}
