package review

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/tooldef"
)

// ToolPinPath is where a sidecar POSTs what it saw of a pinned tool's definition: the first
// definition of a tool its rule pins on first use, or a changed definition (docs/api.md
// "Pinned tool definitions"). The service records it in the governing ToolPolicy's status.
const ToolPinPath = "/v1alpha1/toolpins"

// ToolPinKind is the kind of a tool pin report and of its answer.
const (
	ToolPinKind       = "ToolPinReport"
	ToolPinAnswerKind = "ToolPinAnswer"
)

// MaxToolPinBytes bounds a tool pin report and its answer.
const MaxToolPinBytes = 8 << 10

// ToolPinReport is the body of a POST to ToolPinPath.
type ToolPinReport struct {
	metav1.TypeMeta `json:",inline"`
	// Server is the governing policy's spec.servers name whose upstream listed the tool.
	Server string `json:"server"`
	// Tool is the tool's name.
	Tool string `json:"tool"`
	// SHA256 is the digest of the definition listed (internal/tooldef).
	SHA256 string `json:"sha256"`
	// Members are the definition's member digests.
	Members map[string]string `json:"members,omitempty"`
	// Changed: the definition is not the accepted one (recorded in status.toolChanges, and an
	// Event); otherwise it is a first use (recorded in status.toolPins unless one is).
	Changed bool `json:"changed,omitempty"`
}

// ToolPinAnswer is the service's answer: the reason and, on 200, the pin the policy's status
// holds for the tool now (for a first use: the first one recorded, maybe another sidecar's).
type ToolPinAnswer struct {
	metav1.TypeMeta `json:",inline"`
	Reason          Reason                    `json:"reason"`
	Message         string                    `json:"message,omitempty"`
	Pin             *v1alpha1.RecordedToolPin `json:"pin,omitempty"`
}

// Reasons of the tool pin endpoint.
const (
	// ReasonToolPinRecorded (200): the first use is recorded; Pin is it.
	ReasonToolPinRecorded Reason = "ToolPinRecorded"
	// ReasonToolPinExists (200): a pin was already recorded for the tool; Pin is it.
	ReasonToolPinExists Reason = "ToolPinExists"
	// ReasonToolChangeRecorded (200): the changed definition is recorded for acceptance.
	ReasonToolChangeRecorded Reason = "ToolChangeRecorded"
	// ReasonToolNotPinned (409): the governing policy does not pin the tool on that server
	// (for a first use: not on first use, or it lists a digest).
	ReasonToolNotPinned Reason = "ToolNotPinned"
	// ReasonToolPinsFull (409): the policy's status holds as many pins (or changes) as it may.
	ReasonToolPinsFull Reason = "ToolPinsFull"
)

// ErrToolPinRefused wraps the service's 4xx refusals of a tool pin report.
var ErrToolPinRefused = errors.New("review: the authority service refused the tool pin report")

// reportName is the API's server and tool name shapes (spec.servers[].name; a tool name).
var (
	reportServer = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	reportTool   = regexp.MustCompile(`^[A-Za-z0-9_.:/-]{1,128}$`)
)

// DecodeToolPinReport decodes a report strictly (unknown or duplicate members refused, at most
// MaxToolPinBytes) and checks it: kind and apiVersion, a server name of at most 63 characters,
// a tool name of at most 128 of [A-Za-z0-9_.:/-], 64 lowercase hex digits of digest, members
// only of the digested ones. Errors are a *FieldError.
func DecodeToolPinReport(body []byte) (*ToolPinReport, error) {
	if len(body) > MaxToolPinBytes {
		return nil, bad("$", "body of %d bytes exceeds %d", len(body), MaxToolPinBytes)
	}
	var r ToolPinReport
	if err := decodeStrict(body, &r); err != nil {
		return nil, err
	}
	switch {
	case r.APIVersion != APIVersion || r.Kind != ToolPinKind:
		return nil, bad("kind", "must be %s of %s", ToolPinKind, APIVersion)
	case len(r.Server) > 63 || !reportServer.MatchString(r.Server):
		return nil, bad("server", "must be a DNS label")
	case !reportTool.MatchString(r.Tool):
		return nil, bad("tool", "must be 1-128 characters of [A-Za-z0-9_.:/-]")
	case !tooldef.IsDigest(r.SHA256):
		return nil, bad("sha256", "must be 64 lowercase hex digits")
	}
	known := map[string]bool{}
	for _, m := range tooldef.Members {
		known[m] = true
	}
	for m, d := range r.Members {
		if !known[m] || !tooldef.IsDigest(d) {
			return nil, bad("members", "only digests (64 lowercase hex digits) of %s", strings.Join(tooldef.Members, ", "))
		}
	}
	return &r, nil
}

// ReportToolPin POSTs r (its TypeMeta is set here) and returns the pin the policy holds for the
// tool after a first use (nil after a change). A 4xx refusal wraps ErrToolPinRefused; no
// answer, a 5xx or an answer that does not decode wraps ErrUnavailable.
func (c *Client) ReportToolPin(ctx context.Context, r ToolPinReport) (*v1alpha1.RecordedToolPin, error) {
	if c == nil || c.HTTP == nil || c.URL == "" || c.Token == nil {
		return nil, fmt.Errorf("%w: client not configured", ErrUnavailable)
	}
	r.TypeMeta = metav1.TypeMeta{APIVersion: APIVersion, Kind: ToolPinKind}
	body, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("%w: encoding the report: %v", ErrUnavailable, err)
	}
	hreq, err := c.post(ctx, ToolPinPath, body)
	if err != nil {
		return nil, err
	}
	resp, err := c.HTTP.Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxToolPinBytes))
	if err != nil {
		return nil, fmt.Errorf("%w: reading the answer: %w", ErrUnavailable, err)
	}
	var a ToolPinAnswer
	if err := json.Unmarshal(data, &a); err != nil || a.Kind != ToolPinAnswerKind {
		return nil, fmt.Errorf("%w: HTTP %d: the answer is not a %s", ErrUnavailable, resp.StatusCode, ToolPinAnswerKind)
	}
	if err := c.levels.observe(resp.Header, a.Reason); err != nil {
		return nil, fmt.Errorf("HTTP %d: %w", resp.StatusCode, err)
	}
	switch {
	case resp.StatusCode == http.StatusOK && r.Changed && a.Reason == ReasonToolChangeRecorded:
		return nil, nil
	case resp.StatusCode == http.StatusOK && !r.Changed && (a.Reason == ReasonToolPinRecorded || a.Reason == ReasonToolPinExists) &&
		a.Pin != nil && tooldef.IsDigest(a.Pin.SHA256) && a.Pin.Server == r.Server && a.Pin.Tool == r.Tool:
		return a.Pin, nil
	case resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusRequestTimeout && resp.StatusCode != http.StatusTooManyRequests:
		return nil, fmt.Errorf("%w: HTTP %d %s: %s", ErrToolPinRefused, resp.StatusCode, clip(string(a.Reason)), clip(a.Message))
	}
	return nil, fmt.Errorf("%w: HTTP %d %s", ErrUnavailable, resp.StatusCode, clip(string(a.Reason)))
}
