package review

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actgate/actgate/internal/agentoauth"
	"github.com/actgate/actgate/internal/fileutil"
	"github.com/actgate/actgate/internal/tracing"
)

// ErrUnavailable wraps every error of Client.Do: the service could not be asked or its answer
// could not be read. The caller denies (docs/architecture.md "Fail closed").
var ErrUnavailable = errors.New("review: authority service unavailable")

// Client asks the authority service. Its zero value is not usable; set URL, HTTP and Token.
type Client struct {
	// URL is the service's base URL, e.g. https://actgate-authority.actgate-system.svc:8443.
	URL string
	// HTTP is the client; its transport carries the TLS configuration trusting the service's
	// CA. Timeouts come from the context passed to Do.
	HTTP *http.Client
	// Token returns the bearer token to present: the pod's projected service-account token,
	// read anew on each call because the kubelet rotates it (see TokenFile).
	Token func() (string, error)
	// TracerProvider records a span per review and propagates its W3C trace context to the
	// service (traceparent header). Optional: nil is tracing off.
	TracerProvider trace.TracerProvider

	// levels is the service's level as its last answer stated it (level.go).
	levels levels
}

// LevelStatus is what the last answer of the service said of its review protocol level: a
// sidecar reports LevelStatus.Problem as not ready (diag.AuthorityTooOld, diag.SidecarTooOld).
func (c *Client) LevelStatus() LevelStatus { return c.levels.status() }

// TokenFile returns a Token function reading a projected service-account token file.
func TokenFile(path string) func() (string, error) {
	return func() (string, error) { return fileutil.ReadToken(path) }
}

// NewUID returns a random request uid.
func NewUID() types.UID {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (Go 1.24+)
	return types.UID(hex.EncodeToString(b[:]))
}

// Do sends req (a new uid is set when it has none) and returns the service's response. A
// response is returned whatever the HTTP status, as long as it decodes and answers this uid; a
// response that came with a status other than 200 is never allowed. Anything else is an error
// wrapping ErrUnavailable; so is an answer of a service older than MinServiceLevel
// (ErrServiceTooOld) or one refusing this sidecar's level (ErrSidecarRefused), which is not
// returned.
func (c *Client) Do(ctx context.Context, req Request) (*Response, error) {
	if c == nil || c.HTTP == nil || c.URL == "" || c.Token == nil {
		return nil, fmt.Errorf("%w: client not configured", ErrUnavailable)
	}
	if req.UID == "" {
		req.UID = NewUID()
	}
	ctx, span := tracing.Start(ctx, tracing.TracerOf(c.TracerProvider), "actgate.review.request", trace.SpanKindClient)
	defer span.End()
	if span.IsRecording() {
		span.SetAttributes(tracing.AttrOperation.String(string(req.Operation)))
	}
	body, err := json.Marshal(ActReview{TypeMeta: metav1.TypeMeta{APIVersion: APIVersion, Kind: Kind}, Request: &req})
	if err != nil {
		return nil, fmt.Errorf("%w: encoding the review: %v", ErrUnavailable, err)
	}
	hreq, err := c.post(ctx, Path, body)
	if err != nil {
		return nil, err
	}
	tracing.Inject(ctx, hreq.Header)
	resp, err := c.HTTP.Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxReviewBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: reading the response: %w", ErrUnavailable, err)
	}
	r, err := DecodeResponse(data, req.UID)
	if err != nil {
		return nil, fmt.Errorf("%w: HTTP %d: %w", ErrUnavailable, resp.StatusCode, err)
	}
	if err := c.levels.observe(resp.Header, r.Reason); err != nil {
		return nil, fmt.Errorf("HTTP %d: %w", resp.StatusCode, err)
	}
	if hreq.Header.Get(AgentTokenHeader) != "" {
		if st := c.levels.status(); st.Level < LevelAgentToken {
			return nil, fmt.Errorf("HTTP %d: %w (level %d does not verify the agent's token; level %d does)",
				resp.StatusCode, ErrServiceTooOld, st.Level, LevelAgentToken)
		}
	}
	if resp.StatusCode != http.StatusOK {
		r.Allowed = false
	}
	if span.IsRecording() {
		span.SetAttributes(tracing.AttrAllowed.Bool(r.Allowed), tracing.AttrDecision.String(string(r.Decision)), tracing.AttrCode.String(string(r.Code)))
	}
	return r, nil
}

// post is a POST of body (JSON) to the service's path with the pod's current token and the
// review protocol level; an error is ErrUnavailable.
func (c *Client) post(ctx context.Context, path string, body []byte) (*http.Request, error) {
	token, err := c.Token()
	if err != nil {
		return nil, fmt.Errorf("%w: token: %v", ErrUnavailable, err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(c.URL, "/")+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	hreq.Header.Set("Authorization", "Bearer "+token)
	if agent := agentoauth.TokenFrom(ctx); agent != "" {
		hreq.Header.Set(AgentTokenHeader, agent)
	}
	SetLevel(hreq.Header, Level)
	return hreq, nil
}
