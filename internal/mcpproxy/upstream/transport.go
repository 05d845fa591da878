package upstream

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/actgate/actgate/internal/tracing"
)

// Origin is scheme://host[:port] of u, lowercased, without the scheme's default port.
func Origin(u *url.URL) string {
	scheme, host := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname())
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	port := u.Port()
	if port == "" || (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		return scheme + "://" + host
	}
	return scheme + "://" + host + ":" + port
}

// Transport adds the upstream credential to every proxy→upstream request and reports
// the HTTP status of each request to the attempt in its context, if any.
type Transport struct {
	Base       http.RoundTripper
	Credential func(ctx context.Context) (string, error)
	// Rejected, when set, is told the token an answer of HTTP 401 refused, so that a token
	// source drops it rather than presenting it again (upstreamauth.Source.Invalidate).
	Rejected func(token string)
	Origin   string // the only origin the credential is presented to
	Trace    bool   // propagate the request context's W3C trace context (traceparent)
}

// CredentialError is the failure to obtain the credential for an upstream request: the
// request was not sent.
type CredentialError struct{ Err error }

func (e *CredentialError) Error() string { return "mcpproxy: upstream credential: " + e.Err.Error() }
func (e *CredentialError) Unwrap() error { return e.Err }

// CredentialFailed reports whether err comes from a request that was not sent for lack of its
// credential.
func CredentialFailed(err error) bool {
	var ce *CredentialError
	return errors.As(err, &ce)
}

// RoundTrip sends r through Base, with the credential and the trace context added where they
// apply.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	var tok string
	if t.Credential != nil && Origin(r.URL) == t.Origin {
		var err error
		if tok, err = t.Credential(r.Context()); err != nil {
			if r.Body != nil {
				_ = r.Body.Close()
			}
			if a, ok := r.Context().Value(attemptKey{}).(*Attempt); ok {
				a.credential.Store(true)
			}
			return nil, &CredentialError{Err: err}
		}
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+tok)
	}
	if t.Trace && trace.SpanContextFromContext(r.Context()).IsValid() {
		if t.Credential == nil || Origin(r.URL) != t.Origin {
			r = r.Clone(r.Context()) // not cloned above
		}
		tracing.Inject(r.Context(), r.Header)
	}
	resp, err := t.Base.RoundTrip(r)
	if tok != "" && t.Rejected != nil && resp != nil && resp.StatusCode == http.StatusUnauthorized {
		t.Rejected(tok)
	}
	observeInit(r, resp)
	if a, ok := r.Context().Value(attemptKey{}).(*Attempt); ok && resp != nil && r.Method == http.MethodPost {
		a.status.Store(int32(resp.StatusCode))
	}
	return resp, err
}

// Client is an HTTP client on t that never follows a redirect: the destination the
// authority binds (Config.URL) is the only one contacted, so a 3xx answer is returned as it
// is, and Classify records it FAILED (RedirectStatus).
func Client(t http.RoundTripper) *http.Client {
	return &http.Client{Transport: t, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// CloseIdleConnections closes the base's idle connections, if it keeps any.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.Base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
