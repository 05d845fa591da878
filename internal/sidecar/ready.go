package sidecar

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/actgate/actgate/internal/policysource"
	"github.com/actgate/actgate/internal/review"
)

// ReadyPath answers 200 when the sidecar can decide and forward: it holds its pod's current
// policy (policysource) and every upstream accepts a TCP connection. With ?check=policy only
// the policy is checked: the startup probe, which holds the agent back until the sidecar can
// decide, without tying the pod's start to an upstream's. The kubelet reaches these through
// `actgate sidecar probe`, run in the sidecar's container (an exec probe), because the
// listener is on loopback only and an HTTP probe would be sent to the pod's IP.
const ReadyPath = "/readyz"

// Upstream reachability is checked with a TCP connect, at most once per upstreamCheckTTL per
// upstream, each bounded by upstreamDialTimeout.
const (
	upstreamCheckTTL    = 5 * time.Second
	upstreamDialTimeout = time.Second
)

// readiness answers ReadyPath.
type readiness struct {
	policy    *policysource.Source
	upstreams []Upstream
	dial      func(ctx context.Context, network, addr string) (net.Conn, error)
	now       func() time.Time

	mu      sync.Mutex
	checked map[string]upstreamCheck // by upstream name
}

type upstreamCheck struct {
	at  time.Time
	err string // "" reachable
}

func newReadiness(src *policysource.Source, ups []Upstream) *readiness {
	d := &net.Dialer{Timeout: upstreamDialTimeout}
	return &readiness{policy: src, upstreams: ups, dial: d.DialContext, now: time.Now, checked: map[string]upstreamCheck{}}
}

// readyBody is ReadyPath's answer: booleans, names and reasons, never a credential or a URL's
// user info.
type readyBody struct {
	Ready     bool              `json:"ready"`
	Policy    string            `json:"policy,omitempty"`
	Epoch     int64             `json:"epoch,omitempty"`
	Reason    string            `json:"reason,omitempty"`
	Upstreams map[string]string `json:"upstreams,omitempty"` // name → "ok" or why not
}

func (rd *readiness) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	st := rd.policy.Status()
	body := readyBody{Ready: st.Ready, Policy: st.Policy, Epoch: st.Epoch, Reason: st.Reason}
	if r.URL.Query().Get("check") != "policy" {
		body.Upstreams = map[string]string{}
		for _, u := range rd.upstreams {
			why := rd.upstream(r.Context(), u)
			if why == "" {
				body.Upstreams[u.Name] = "ok"
				continue
			}
			body.Upstreams[u.Name] = why
			body.Ready = false
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if !body.Ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(body)
}

// upstream returns "" when u accepted a TCP connection recently, else why not.
func (rd *readiness) upstream(ctx context.Context, u Upstream) string {
	now := rd.now()
	rd.mu.Lock()
	c, ok := rd.checked[u.Name]
	rd.mu.Unlock()
	if ok && now.Sub(c.at) < upstreamCheckTTL {
		return c.err
	}
	why := ""
	addr, err := hostPort(u.URL)
	if err != nil {
		why = "bad URL"
	} else {
		ctx, cancel := context.WithTimeout(ctx, upstreamDialTimeout)
		conn, err := rd.dial(ctx, "tcp", addr)
		cancel()
		if err != nil {
			why = "unreachable"
		} else {
			_ = conn.Close()
		}
	}
	rd.mu.Lock()
	rd.checked[u.Name] = upstreamCheck{at: now, err: why}
	rd.mu.Unlock()
	return why
}

// hostPort is the TCP address of an http(s) URL, with the scheme's default port.
func hostPort(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	port := u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	return net.JoinHostPort(u.Hostname(), port), nil
}

// newPolicySource is the sidecar's policy source when Config.PolicySource is nil: it follows
// the authority service through the same client, CA and token as the reviews.
func newPolicySource(cfg Config, c *review.Client) (*policysource.Source, error) {
	return policysource.New(policysource.Options{Client: c, SinkID: cfg.SinkID, Log: cfg.Log.WithName("policy")})
}
