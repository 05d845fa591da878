package reconcile

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestAsk(t *testing.T) {
	var seen []Query
	e := newEndpoint(t, func(w http.ResponseWriter, q Query) {
		seen = append(seen, q)
		signed(t, w, testKey, answerFor(q, OutcomeExecuted, t0))
	})
	c := &Client{}
	for range 2 {
		a, err := c.Ask(context.Background(), e.ep(testKey), testQuery())
		if err != nil {
			t.Fatalf("Ask: %v", err)
		}
		if a.Outcome != OutcomeExecuted || a.OperationID != "op-0001" || !a.ObservedAt.Equal(t0) || a.EvidenceDigest == "" {
			t.Fatalf("Ask = %+v", a)
		}
	}
	if got := e.auth.Load(); got != "Bearer "+testToken {
		t.Fatalf("Authorization = %q", got)
	}
	if len(seen) != 2 || seen[0].Nonce == seen[1].Nonce || !isNonce(seen[0].Nonce) {
		t.Fatalf("nonces not fresh per query: %+v", seen)
	}
	q := seen[0]
	q.Nonce = ""
	if q != testQuery() {
		t.Fatalf("endpoint saw %+v", q)
	}
}

func TestAskRefusals(t *testing.T) {
	answer := func(key []byte, mutate func(*Answer)) func(http.ResponseWriter, Query) {
		return func(w http.ResponseWriter, q Query) {
			a := answerFor(q, OutcomeExecuted, t0)
			if mutate != nil {
				mutate(&a)
			}
			signed(t, w, key, a)
		}
	}
	for _, tc := range []struct {
		name    string
		respond func(http.ResponseWriter, Query)
		want    error
	}{
		{"no signature", func(w http.ResponseWriter, q Query) {
			_, _ = w.Write(mustEncode(t, answerFor(q, OutcomeExecuted, t0)))
		}, ErrUnauthenticated},
		{"signed with another key", answer(otherKey, nil), ErrUnauthenticated},
		{"signature over another body", func(w http.ResponseWriter, q Query) {
			good := mustEncode(t, answerFor(q, OutcomeFailed, t0))
			w.Header().Set(SignatureHeader, Sign(testKey, good))
			_, _ = w.Write(mustEncode(t, answerFor(q, OutcomeExecuted, t0)))
		}, ErrUnauthenticated},
		{"replayed nonce", answer(testKey, func(a *Answer) { a.Nonce = nonceA }), ErrReplayed},
		{"malformed but signed", func(w http.ResponseWriter, q Query) {
			b := []byte(`{"outcome":"EXECUTED"}`)
			w.Header().Set(SignatureHeader, Sign(testKey, b))
			_, _ = w.Write(b)
		}, ErrMalformed},
		{"server error", func(w http.ResponseWriter, q Query) {
			http.Error(w, "boom", http.StatusInternalServerError)
		}, ErrUnreachable},
		{"token refused", func(w http.ResponseWriter, q Query) {
			http.Error(w, "no", http.StatusUnauthorized)
		}, ErrUnreachable},
		{"too large", func(w http.ResponseWriter, q Query) {
			b := []byte(strings.Repeat(" ", MaxAnswerBytes+1))
			w.Header().Set(SignatureHeader, Sign(testKey, b))
			_, _ = w.Write(b)
		}, ErrUnreachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEndpoint(t, tc.respond)
			a, err := (&Client{}).Ask(context.Background(), e.ep(testKey), testQuery())
			if !errors.Is(err, tc.want) {
				t.Fatalf("Ask = %+v, %v; want %v", a, err, tc.want)
			}
			if e.calls.Load() != 1 {
				t.Fatalf("endpoint called %d times, want 1", e.calls.Load())
			}
		})
	}
}

func TestAskTLS(t *testing.T) {
	e := newEndpoint(t, func(w http.ResponseWriter, q Query) { signed(t, w, testKey, answerFor(q, OutcomeExecuted, t0)) })
	ep := e.ep(testKey)
	ep.RootCAs = x509.NewCertPool() // trusts nothing: the server cannot be authenticated
	if _, err := (&Client{}).Ask(context.Background(), ep, testQuery()); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("untrusted certificate: %v, want ErrUnauthenticated", err)
	}
	if e.calls.Load() != 0 {
		t.Fatalf("the query reached a server that was not authenticated")
	}
}

func TestAskUnreachable(t *testing.T) {
	e := newEndpoint(t, func(w http.ResponseWriter, q Query) {})
	ep := e.ep(testKey)
	e.srv.Close()
	if _, err := (&Client{}).Ask(context.Background(), ep, testQuery()); !errors.Is(err, ErrUnreachable) || CodeOf(err) != CodeUnreachable {
		t.Fatalf("closed server: %v, want ErrUnreachable", err)
	}
}

func TestAskDoesNotFollowRedirects(t *testing.T) {
	target := newEndpoint(t, func(w http.ResponseWriter, q Query) { signed(t, w, testKey, answerFor(q, OutcomeExecuted, t0)) })
	e := newEndpoint(t, func(w http.ResponseWriter, q Query) {
		w.Header().Set("Location", target.srv.URL)
		w.WriteHeader(http.StatusTemporaryRedirect)
	})
	if _, err := (&Client{}).Ask(context.Background(), e.ep(testKey), testQuery()); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("redirect: %v, want ErrUnreachable", err)
	}
	if target.calls.Load() != 0 {
		t.Fatalf("the bearer token followed a redirect")
	}
}

func TestAskConfig(t *testing.T) {
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("plain http endpoint was called")
	}))
	defer plain.Close()
	good := Endpoint{URL: "https://example.invalid/ops", Token: testToken, MACKey: testKey}
	for _, tc := range []struct {
		name   string
		mutate func(*Endpoint)
	}{
		{"plain http", func(e *Endpoint) { e.URL = plain.URL }},
		{"relative url", func(e *Endpoint) { e.URL = "/ops" }},
		{"other scheme", func(e *Endpoint) { e.URL = "ftp://example.invalid/" }},
		{"no token", func(e *Endpoint) { e.Token = "" }},
		{"short mac key", func(e *Endpoint) { e.MACKey = testKey[:31] }},
		{"no mac key", func(e *Endpoint) { e.MACKey = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep := good
			tc.mutate(&ep)
			if _, err := (&Client{}).Ask(context.Background(), ep, testQuery()); !errors.Is(err, ErrConfig) {
				t.Fatalf("Ask = %v, want ErrConfig", err)
			}
			if _, ok := Classify(errors.Join(ErrConfig)); ok {
				t.Fatalf("ErrConfig classified as a finding")
			}
		})
	}
}

func TestAskAllowHTTP(t *testing.T) {
	var srvKey = testKey
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		q, err := ParseQuery(body)
		if err != nil {
			t.Errorf("ParseQuery: %v", err)
		}
		signed(t, w, srvKey, answerFor(q, OutcomeFailed, t0))
	}))
	defer plain.Close()
	a, err := (&Client{AllowHTTP: true}).Ask(context.Background(), Endpoint{URL: plain.URL, Token: testToken, MACKey: testKey}, testQuery())
	if err != nil || a.Outcome != OutcomeFailed {
		t.Fatalf("AllowHTTP: %+v, %v", a, err)
	}
}
