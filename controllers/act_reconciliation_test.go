package controllers_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/controllers"
	"github.com/actgate/actgate/internal/jcs"
	reconclient "github.com/actgate/actgate/internal/reconcile"
)

// The behaviours of the test reconciliation endpoint.
type mode int

const (
	answerUnsigned       mode = iota // no MAC: cannot be authenticated
	answerWrongKey                   // MAC under another key: cannot be authenticated
	answerOtherOperation             // authenticated, names another operation ID
	answerStale                      // authenticated, observed long before the freshness window
	answerHangUp                     // the connection is closed without an answer
	answerExecuted                   // authenticated, matching, fresh: EXECUTED
	answerFailed                     // authenticated, matching, fresh: FAILED
)

var (
	macKey   = []byte("test-response-mac-key-0123456789abcdef")
	otherKey = []byte("not-the-response-mac-key-0123456789abcd")
)

// reconEndpoint is a TLS reconciliation endpoint on the harness's fake clock.
type reconEndpoint struct {
	srv     *httptest.Server
	mode    atomic.Int32
	calls   atomic.Int32
	mu      sync.Mutex
	queries []reconclient.Query
	auth    []string
	body    []byte // the last answer body served
}

func newReconEndpoint(t *testing.T, h *harness, freshness time.Duration) *reconEndpoint {
	e := &reconEndpoint{}
	e.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.calls.Add(1)
		raw, _ := io.ReadAll(r.Body)
		q, err := reconclient.ParseQuery(raw)
		if err != nil {
			t.Errorf("reconciliation endpoint got a malformed query: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		e.mu.Lock()
		e.queries = append(e.queries, q)
		e.auth = append(e.auth, r.Header.Get("Authorization"))
		e.mu.Unlock()

		a := reconclient.Answer{Query: q, Outcome: reconclient.OutcomeExecuted, ObservedAt: h.clock.Now()}
		key := macKey
		switch mode(e.mode.Load()) {
		case answerWrongKey:
			key = otherKey
		case answerOtherOperation:
			a.OperationID = q.OperationID + "-other"
		case answerStale:
			a.ObservedAt = h.clock.Now().Add(-2 * freshness)
		case answerHangUp:
			conn, _, _ := w.(http.Hijacker).Hijack()
			_ = conn.Close()
			return
		case answerFailed:
			a.Outcome = reconclient.OutcomeFailed
		}
		body, err := reconclient.EncodeAnswer(a)
		if err != nil {
			t.Errorf("EncodeAnswer: %v", err)
			return
		}
		e.mu.Lock()
		e.body = body
		e.mu.Unlock()
		if mode(e.mode.Load()) != answerUnsigned {
			w.Header().Set(reconclient.SignatureHeader, reconclient.Sign(key, body))
		}
		_, _ = w.Write(body)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *reconEndpoint) caPEM() string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: e.srv.Certificate().Raw}))
}

// toolServer counts every request: the upstream tool must never be called by reconciliation.
func toolServer(t *testing.T) (*httptest.Server, *atomic.Int32) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, "the tool must not be called", http.StatusTeapot)
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

// reconcilablePolicy creates a policy whose server is tool and whose reconciliation endpoint is
// e, with the Secret holding the token, the response MAC key and e's CA.
func (h *harness) reconcilablePolicy(t *testing.T, name string, tool *httptest.Server, e *reconEndpoint) {
	t.Helper()
	tp := newPolicy(name, tool.URL+"/mcp")
	tp.Spec.Servers[0].Reconciliation = &v1alpha1.ReconciliationEndpoint{
		URL:                  e.srv.URL + "/operations",
		CredentialsSecretRef: &v1alpha1.SecretKeyRef{Name: name + "-reconcile", Key: "token"},
	}
	h.create(t, secret(name+"-reconcile", map[string]string{
		"token": "reconcile-token", controllers.SecretKeyResponseMAC: string(macKey), controllers.SecretKeyCA: e.caPEM(),
	}), tp)
	h.waitPolicy(t, name, "True/Compiled", "True/Enforcing", 1)
}

func indeterminate(op string) v1alpha1.ActStatus {
	return v1alpha1.ActStatus{
		Decision: v1alpha1.ActDecisionAllowed, State: v1alpha1.ActStateIndeterminate, OperationID: op,
		AuthorityRef: &v1alpha1.LocalObjectReference{Name: "authority-" + op},
	}
}

// waitAttempt waits until the act records attempts attempts with lastResult want.
func (h *harness) waitAttempt(t *testing.T, name string, attempts int32, want v1alpha1.ReconciliationResult) *v1alpha1.Act {
	t.Helper()
	var act *v1alpha1.Act
	eventually(t, 20*time.Second, func() error {
		var err error
		if act, err = h.getAct(t, name); err != nil {
			return err
		}
		rec := act.Status.Reconciliation
		if rec == nil {
			return fmt.Errorf("no reconciliation recorded")
		}
		if err := expect("attempts", rec.Attempts, attempts); err != nil {
			return err
		}
		return expect("lastResult", rec.LastResult, want)
	})
	return act
}

// staysIndeterminate asserts, for a while and across a reconcile the test triggers, that the act
// stays INDETERMINATE with attempts attempts and that the endpoint is asked no more: without the
// clock reaching the backoff, nothing is asked again.
func (h *harness) staysIndeterminate(t *testing.T, name string, attempts int32, e *reconEndpoint) {
	t.Helper()
	act, err := h.getAct(t, name)
	if err != nil {
		t.Fatal(err)
	}
	h.poke(t, act)
	calls := e.calls.Load()
	consistently(t, 2*time.Second, func() error {
		act, err := h.getAct(t, name)
		if err != nil {
			return err
		}
		if err := expect("state", act.Status.State, v1alpha1.ActStateIndeterminate); err != nil {
			return err
		}
		if err := expect("evidenceDigest", act.Status.Reconciliation.EvidenceDigest, ""); err != nil {
			return err
		}
		if err := expect("Settled", condition(act.Status.Conditions, v1alpha1.ActSettledCondition), "False/Indeterminate"); err != nil {
			return err
		}
		if err := expect("attempts", act.Status.Reconciliation.Attempts, attempts); err != nil {
			return err
		}
		return expect("endpoint calls", e.calls.Load(), calls)
	})
}

// TestIndeterminateReconciliation takes one INDETERMINATE act through every refusal and then
// an authenticated EXECUTED answer (action-evidence-boundary, "Perform Authenticated
// Reconciliation": missing, stale, conflicting, unauthenticated or action-mismatched
// observations MUST leave the operation INDETERMINATE), in the manner of cert-manager's
// stalled-request recovery test: a fake clock moves the backoff along and, after each refusal,
// the act is shown to stay as it is.
func TestIndeterminateReconciliation(t *testing.T) {
	const backoff, freshness = time.Minute, 5 * time.Minute
	h := start(t, settings{backoff: backoff, maxBackoff: 8 * backoff, freshness: freshness})
	tool, toolCalls := toolServer(t)
	e := newReconEndpoint(t, h, freshness)
	h.reconcilablePolicy(t, "payments", tool, e)

	e.mode.Store(int32(answerUnsigned))
	h.createAct(t, newAct("pay-1", "payments"), indeterminate("op-pay-1"))

	steps := []struct {
		mode   mode
		result v1alpha1.ReconciliationResult
		event  string
		note   string
	}{
		{answerUnsigned, v1alpha1.ReconciliationUnauthenticated, "ReconciliationUnauthenticated", "signature"},
		{answerWrongKey, v1alpha1.ReconciliationUnauthenticated, "ReconciliationUnauthenticated", "does not verify"},
		{answerOtherOperation, v1alpha1.ReconciliationMismatch, "ReconciliationMismatch", "reconciliation_binding_mismatch"},
		{answerStale, v1alpha1.ReconciliationNoEvidence, "ReconciliationStale", "reconciliation_stale"},
		{answerHangUp, v1alpha1.ReconciliationUnreachable, "ReconciliationUnreachable", "op-pay-1"},
	}
	for i, st := range steps {
		attempt := int32(i + 1)
		t.Run(st.event+"/"+string(st.result), func(t *testing.T) {
			e.mode.Store(int32(st.mode))
			if i > 0 {
				// The next attempt is due one backoff (doubling each time) after the last.
				h.clock.Step(backoff << (i - 1))
				act, _ := h.getAct(t, "pay-1")
				h.poke(t, act)
			}
			h.waitAttempt(t, "pay-1", attempt, st.result)
			h.waitEvent(t, "pay-1", st.event, corev1.EventTypeWarning, st.note)
			h.staysIndeterminate(t, "pay-1", attempt, e)
		})
		if t.Failed() {
			return
		}
	}

	t.Run("authenticated EXECUTED", func(t *testing.T) {
		e.mode.Store(int32(answerExecuted))
		h.clock.Step(backoff << (len(steps) - 1))
		act, _ := h.getAct(t, "pay-1")
		h.poke(t, act)
		act = h.waitAttempt(t, "pay-1", int32(len(steps)+1), v1alpha1.ReconciliationExecuted)
		e.mu.Lock()
		wantEvidence := jcs.Digest(mustCanonical(t, e.body))
		e.mu.Unlock()
		if act.Status.State != v1alpha1.ActStateExecuted || string(act.Status.Reconciliation.EvidenceDigest) != wantEvidence {
			t.Fatalf("state %s evidence %s, want EXECUTED %s", act.Status.State, act.Status.Reconciliation.EvidenceDigest, wantEvidence)
		}
		if got := condition(act.Status.Conditions, v1alpha1.ActSettledCondition); got != "True/Executed" {
			t.Fatalf("Settled = %s", got)
		}
		h.waitEvent(t, "pay-1", controllers.EventReconciledExecuted, corev1.EventTypeNormal, wantEvidence)

		// Settled: nothing is asked again, however much time passes.
		calls := e.calls.Load()
		h.clock.Step(time.Hour)
		h.poke(t, act)
		consistently(t, 2*time.Second, func() error {
			act, err := h.getAct(t, "pay-1")
			if err != nil {
				return err
			}
			if err := expect("state", act.Status.State, v1alpha1.ActStateExecuted); err != nil {
				return err
			}
			return expect("endpoint calls", e.calls.Load(), calls)
		})
	})

	// Every query named the act's operation exactly and carried the bearer token.
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.queries) != len(steps)+1 {
		t.Errorf("endpoint saw %d queries, want %d", len(e.queries), len(steps)+1)
	}
	nonces := map[string]bool{}
	for i, q := range e.queries {
		if q.OperationID != "op-pay-1" || q.ActionDigest != string(digestAction) || q.Tool != "send_payment" || q.Server != "payments" {
			t.Errorf("query %d = %+v", i, q)
		}
		if e.auth[i] != "Bearer reconcile-token" {
			t.Errorf("query %d Authorization = %q", i, e.auth[i])
		}
		if nonces[q.Nonce] {
			t.Errorf("query %d reused a nonce", i)
		}
		nonces[q.Nonce] = true
	}
	// Reconciliation observes; it never invokes the tool.
	if n := toolCalls.Load(); n != 0 {
		t.Fatalf("the upstream tool was called %d times", n)
	}
}

func TestReconciliationFailedAndNotConfigured(t *testing.T) {
	h := start(t, settings{backoff: time.Minute})
	tool, toolCalls := toolServer(t)
	e := newReconEndpoint(t, h, 5*time.Minute)
	h.reconcilablePolicy(t, "payments", tool, e)

	t.Run("authenticated FAILED", func(t *testing.T) {
		e.mode.Store(int32(answerFailed))
		h.createAct(t, newAct("refund-1", "payments"), indeterminate("op-refund-1"))
		act := h.waitAttempt(t, "refund-1", 1, v1alpha1.ReconciliationFailed)
		if act.Status.State != v1alpha1.ActStateFailed || act.Status.Reconciliation.EvidenceDigest == "" {
			t.Fatalf("state %s evidence %q", act.Status.State, act.Status.Reconciliation.EvidenceDigest)
		}
		if got := condition(act.Status.Conditions, v1alpha1.ActSettledCondition); got != "True/Failed" {
			t.Fatalf("Settled = %s", got)
		}
		h.waitEvent(t, "refund-1", controllers.EventReconciledFailed, corev1.EventTypeNormal, "FAILED")
	})

	t.Run("no reconciliation endpoint", func(t *testing.T) {
		h.create(t, newPolicy("plain", tool.URL+"/mcp"))
		h.createAct(t, newAct("plain-1", "plain"), indeterminate("op-plain-1"))
		h.waitEvent(t, "plain-1", controllers.EventReconciliationNotConfigured, corev1.EventTypeWarning, "declares no reconciliation endpoint")
		calls := e.calls.Load()
		consistently(t, 2*time.Second, func() error {
			act, err := h.getAct(t, "plain-1")
			if err != nil {
				return err
			}
			if act.Status.Reconciliation != nil {
				return fmt.Errorf("reconciliation recorded without a query: %+v", act.Status.Reconciliation)
			}
			if c := meta.FindStatusCondition(act.Status.Conditions, v1alpha1.ActSettledCondition); c == nil || c.Reason != v1alpha1.ActIndeterminateReason {
				return fmt.Errorf("Settled = %+v", c)
			}
			return expect("endpoint calls", e.calls.Load(), calls)
		})
	})

	t.Run("untrusted endpoint certificate", func(t *testing.T) {
		// The Secret's CA does not sign the endpoint's certificate: the server is not
		// authenticated and nothing it would say is heard.
		tp := newPolicy("untrusted", tool.URL+"/mcp")
		tp.Spec.Servers[0].Reconciliation = &v1alpha1.ReconciliationEndpoint{
			URL: e.srv.URL + "/operations", CredentialsSecretRef: &v1alpha1.SecretKeyRef{Name: "untrusted-reconcile", Key: "token"},
		}
		h.create(t, secret("untrusted-reconcile", map[string]string{
			"token": "t", controllers.SecretKeyResponseMAC: string(macKey),
			controllers.SecretKeyCA: selfSignedPEM(t),
		}), tp)
		calls := e.calls.Load()
		h.createAct(t, newAct("untrusted-1", "untrusted"), indeterminate("op-untrusted-1"))
		h.waitAttempt(t, "untrusted-1", 1, v1alpha1.ReconciliationUnauthenticated)
		h.waitEvent(t, "untrusted-1", "ReconciliationUnauthenticated", corev1.EventTypeWarning, "certificate")
		if e.calls.Load() != calls {
			t.Fatalf("the query reached an endpoint whose certificate did not verify")
		}
	})

	if n := toolCalls.Load(); n != 0 {
		t.Fatalf("the upstream tool was called %d times", n)
	}
}

func mustCanonical(t *testing.T, b []byte) []byte {
	t.Helper()
	c, err := jcs.Canonicalize(b, jcs.Full)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// selfSignedPEM returns a fresh self-signed CA certificate that signs nothing the test serves
// (every httptest TLS server shares one built-in certificate, so another server is no use).
func selfSignedPEM(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "untrusted test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}
