package reconcile

import (
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

var (
	testKey   = []byte("0123456789abcdef0123456789abcdef")
	otherKey  = []byte("fedcba9876543210fedcba9876543210")
	testToken = "reconcile-token"
	t0        = time.Date(2026, 11, 29, 15, 0, 0, 0, time.UTC)
)

const (
	digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	digestB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	nonceA  = "00112233445566778899aabbccddeeff"
)

func testQuery() Query {
	return Query{OperationID: "op-0001", ActionDigest: digestA, Tool: "send_payment", Server: "payments"}
}

// answerFor echoes q with an outcome observed at t.
func answerFor(q Query, o Outcome, t time.Time) Answer {
	return Answer{Query: q, Outcome: o, ObservedAt: t}
}

func mustEncode(t testing.TB, a Answer) []byte {
	t.Helper()
	b, err := EncodeAnswer(a)
	if err != nil {
		t.Fatalf("EncodeAnswer: %v", err)
	}
	return b
}

// endpoint is a TLS reconciliation endpoint whose answer is made by respond from the parsed
// query; it counts requests and records the last Authorization header.
type endpoint struct {
	srv   *httptest.Server
	calls atomic.Int32
	auth  atomic.Value
}

func newEndpoint(t *testing.T, respond func(w http.ResponseWriter, q Query)) *endpoint {
	t.Helper()
	e := &endpoint{}
	e.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.calls.Add(1)
		e.auth.Store(r.Header.Get("Authorization"))
		body, _ := io.ReadAll(r.Body)
		q, err := ParseQuery(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		respond(w, q)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *endpoint) ep(key []byte) Endpoint {
	pool := x509.NewCertPool()
	pool.AddCert(e.srv.Certificate())
	return Endpoint{URL: e.srv.URL + "/operations", Token: testToken, MACKey: key, RootCAs: pool}
}

// signed writes a as a 200 answer signed with key.
func signed(t testing.TB, w http.ResponseWriter, key []byte, a Answer) {
	b := mustEncode(t, a)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(SignatureHeader, Sign(key, b))
	_, _ = w.Write(b)
}
