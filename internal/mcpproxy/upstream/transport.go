package upstream

import (
	"context"
	"fmt"
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
	Origin     string // the only origin the credential is presented to
	Trace      bool   // propagate the request context's W3C trace context (traceparent)
}

// RoundTrip sends r through Base, with the credential and the trace context added where they
// apply.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.Credential != nil && Origin(r.URL) == t.Origin {
		tok, err := t.Credential(r.Context())
		if err != nil {
			if r.Body != nil {
				_ = r.Body.Close()
			}
			return nil, fmt.Errorf("mcpproxy: upstream credential: %w", err)
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
