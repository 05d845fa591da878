package reconcile_test

import (
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/actgate/actgate/internal/reconcile"
)

// An endpoint answers a query by echoing it with its finding and signing the exact body; the
// controller's side asks, then judges the answer against the act.
func Example() {
	macKey := []byte("a shared response MAC key, 32+ bytes long")
	observed := time.Date(2026, 11, 29, 15, 0, 0, 0, time.UTC)

	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		body, _ := io.ReadAll(r.Body)
		q, err := reconcile.ParseQuery(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		answer, _ := reconcile.EncodeAnswer(reconcile.Answer{Query: q, Outcome: reconcile.OutcomeExecuted, ObservedAt: observed})
		w.Header().Set(reconcile.SignatureHeader, reconcile.Sign(macKey, answer))
		_, _ = w.Write(answer)
	}))
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())

	q := reconcile.Query{
		OperationID:  "op-0001",
		ActionDigest: "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		Tool:         "send_payment",
		Server:       "payments",
	}
	ep := reconcile.Endpoint{URL: srv.URL + "/operations", Token: "s3cret", MACKey: macKey, RootCAs: roots}
	a, err := (&reconcile.Client{}).Ask(context.Background(), ep, q)
	if err != nil {
		fmt.Println(err)
		return
	}
	exp := reconcile.Expectation{Query: q, Agent: "system:serviceaccount:shop:agent", SinkID: "billing-sink", NotBefore: observed.Add(-time.Minute)}
	v, _ := reconcile.Judge(exp, a, 5*time.Minute, observed.Add(time.Minute))
	fmt.Println(v.Finding, v.State, v.Finding.Result())
	// Output: Executed EXECUTED Executed
}
