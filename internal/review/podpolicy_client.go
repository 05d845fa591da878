package review

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ErrPolicyRefused wraps the error of Client.PodPolicy when the service answered that it
// serves this caller no policy at all (HTTP 4xx: not authenticated, a bad query): unlike
// ErrUnavailable, the answer is authoritative, and the caller holds no policy after it.
var ErrPolicyRefused = errors.New("review: the authority service refused the pod policy request")

// PodPolicy asks the service for the PodPolicy of the calling pod. With watch > 0 it is a long
// poll: the service answers when the answer's version is not version, or after watch (rounded
// up to whole seconds, at most MaxPolicyWatchSeconds) with the unchanged answer. The context
// should allow the watch plus the round trip.
//
// Errors wrap ErrUnavailable (the service could not be asked, answered 5xx, its answer does
// not decode, or it is of another review protocol level: ErrServiceTooOld, ErrSidecarRefused)
// or ErrPolicyRefused (a 4xx refusal).
func (c *Client) PodPolicy(ctx context.Context, version string, watch time.Duration) (*PodPolicy, error) {
	if c == nil || c.HTTP == nil || c.URL == "" || c.Token == nil {
		return nil, fmt.Errorf("%w: client not configured", ErrUnavailable)
	}
	q := url.Values{}
	if watch > 0 {
		secs := min(int((watch+time.Second-1)/time.Second), MaxPolicyWatchSeconds)
		q.Set(PolicyWatchParam, "true")
		q.Set(PolicyVersionParam, version)
		q.Set(PolicyTimeoutParam, strconv.Itoa(secs))
	}
	u := strings.TrimSuffix(c.URL, "/") + PolicyPath
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	token, err := c.Token()
	if err != nil {
		return nil, fmt.Errorf("%w: token: %v", ErrUnavailable, err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	hreq.Header.Set("Accept", "application/json")
	hreq.Header.Set("Authorization", "Bearer "+token)
	SetLevel(hreq.Header, Level)
	resp, err := c.HTTP.Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxPolicyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: reading the pod policy: %w", ErrUnavailable, err)
	}
	if resp.StatusCode != http.StatusOK {
		var st struct {
			Kind    string `json:"kind"`
			Reason  string `json:"reason"`
			Message string `json:"message"`
		}
		if json.Unmarshal(data, &st) == nil && st.Kind == "Status" {
			if err := c.levels.observe(resp.Header, Reason(st.Reason)); err != nil {
				return nil, fmt.Errorf("HTTP %d: %w", resp.StatusCode, err)
			}
		}
		detail := fmt.Sprintf("HTTP %d %s", resp.StatusCode, clip(st.Reason))
		if resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusRequestTimeout && resp.StatusCode != http.StatusTooManyRequests {
			return nil, fmt.Errorf("%w: %s", ErrPolicyRefused, detail)
		}
		return nil, fmt.Errorf("%w: %s", ErrUnavailable, detail)
	}
	p, err := DecodePodPolicy(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if err := c.levels.observe(resp.Header, ""); err != nil {
		return nil, err
	}
	return p, nil
}
