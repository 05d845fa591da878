package review

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/anchor"
)

// PostAnchor asks the service to anchor cp, a checkpoint of the receipt log whose PEM public
// key is publicKeyPEM, in the calling pod's ReceiptAnchor. It is an anchor.PostFunc.
//
// nil means the anchor holds cp (ReasonAnchored or ReasonAnchorUnchanged). A refusal (HTTP 4xx
// but 408 and 429) wraps anchor.ErrRefused and names the reason; anything else (no answer, 5xx,
// an answer that does not decode, an answer of another review protocol level) wraps
// ErrUnavailable and is worth retrying.
func (c *Client) PostAnchor(ctx context.Context, publicKeyPEM string, cp v1alpha1.AnchoredCheckpoint) error {
	if c == nil || c.HTTP == nil || c.URL == "" || c.Token == nil {
		return fmt.Errorf("%w: client not configured", ErrUnavailable)
	}
	body, err := json.Marshal(AnchorRequest{
		TypeMeta:  metav1.TypeMeta{APIVersion: APIVersion, Kind: AnchorKind},
		PublicKey: publicKeyPEM, Checkpoint: cp,
	})
	if err != nil {
		return fmt.Errorf("%w: encoding the anchor request: %v", ErrUnavailable, err)
	}
	token, err := c.Token()
	if err != nil {
		return fmt.Errorf("%w: token: %v", ErrUnavailable, err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(c.URL, "/")+AnchorPath, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	hreq.Header.Set("Authorization", "Bearer "+token)
	SetLevel(hreq.Header, Level)
	resp, err := c.HTTP.Do(hreq)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnchorBytes))
	if err != nil {
		return fmt.Errorf("%w: reading the answer: %w", ErrUnavailable, err)
	}
	var st metav1.Status
	if err := json.Unmarshal(data, &st); err != nil || st.Kind != "Status" {
		return fmt.Errorf("%w: HTTP %d: the answer is not a Status", ErrUnavailable, resp.StatusCode)
	}
	reason := Reason(st.Reason)
	if err := c.levels.observe(resp.Header, reason); err != nil {
		return fmt.Errorf("HTTP %d: %w", resp.StatusCode, err)
	}
	switch {
	case resp.StatusCode == http.StatusOK && (reason == ReasonAnchored || reason == ReasonAnchorUnchanged):
		return nil
	case resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusRequestTimeout && resp.StatusCode != http.StatusTooManyRequests:
		return fmt.Errorf("%w: HTTP %d %s: %s", anchor.ErrRefused, resp.StatusCode, clip(string(reason)), clip(st.Message))
	}
	return fmt.Errorf("%w: HTTP %d %s", ErrUnavailable, resp.StatusCode, clip(string(reason)))
}
