package sidecar

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/actgate/actgate/internal/diag"
	"github.com/actgate/actgate/internal/policysource"
	"github.com/actgate/actgate/internal/review"
)

// ReadyPath answers 200 when the sidecar can decide and forward: it holds its pod's current
// policy (policysource) and every upstream accepts a connection (for https, a TLS handshake
// that verifies with the system roots and the upstream CA). With ?check=policy only the policy
// is checked: the startup probe, which holds the agent back until the sidecar can decide,
// without tying the pod's start to an upstream's. The kubelet reaches these through `actgate
// sidecar probe`, run in the sidecar's container (an exec probe), because the listener is on
// loopback only and an HTTP probe would be sent to the pod's IP. A not-ready answer lists its
// problems with stable reason codes (internal/diag); the probe prints them, so the kubelet's
// probe-failure Event on the pod carries them too.
const ReadyPath = "/readyz"

// Upstream reachability is checked with a TCP connect (https: and a TLS handshake), at most once
// per upstreamCheckTTL per upstream, each bounded by upstreamDialTimeout.
const (
	upstreamCheckTTL    = 5 * time.Second
	upstreamDialTimeout = time.Second
)

// readiness answers ReadyPath.
type readiness struct {
	policy    *policysource.Source
	upstreams []Upstream
	tls       *tls.Config // for https upstreams: system roots plus the upstream CA
	dial      func(ctx context.Context, network, addr string) (net.Conn, error)
	now       func() time.Time
	// level is what the authority service's last answer said of its review protocol level
	// (review.Client.LevelStatus; level.go). Optional: nil checks no level.
	level func() review.LevelStatus

	mu      sync.Mutex
	checked map[string]upstreamCheck // by upstream name
}

type upstreamCheck struct {
	at     time.Time
	reason string // "" reachable, else a diag reason
	detail string
}

func newReadiness(src *policysource.Source, ups []Upstream, tlsCfg *tls.Config) *readiness {
	d := &net.Dialer{Timeout: upstreamDialTimeout}
	return &readiness{policy: src, upstreams: ups, tls: tlsCfg, dial: d.DialContext, now: time.Now, checked: map[string]upstreamCheck{}}
}

// readyBody is ReadyPath's answer: booleans, names, reason codes and sentences, never a
// credential or a URL's user info.
type readyBody struct {
	Ready     bool              `json:"ready"`
	Policy    string            `json:"policy,omitempty"`
	Epoch     int64             `json:"epoch,omitempty"`
	Reason    string            `json:"reason,omitempty"`
	Authority string            `json:"authority,omitempty"` // the last request to the service failed: why
	Upstreams map[string]string `json:"upstreams,omitempty"` // name → "ok" or a diag reason
	Problems  []diag.Problem    `json:"problems,omitempty"`
}

// check is the readiness answer; upstreams are checked unless policyOnly.
func (rd *readiness) check(ctx context.Context, policyOnly bool) readyBody {
	st := rd.policy.Status()
	body := readyBody{Ready: st.Ready, Policy: st.Policy, Epoch: st.Epoch, Reason: st.Reason, Authority: st.Authority}
	if !st.Ready {
		body.Problems = append(body.Problems, policyProblem(st))
	}
	levelBad, levelOK := rd.levelProblem()
	if st.Authority != "" && (rd.level == nil || !isLevelReason(st.Authority)) {
		// The policy held (if any) is kept while the service is unreachable; say so either way.
		msg := fmt.Sprintf("the last request to the authority service failed: %s", clipDetail(st.AuthorityDetail))
		if !st.AuthoritySince.IsZero() {
			msg += fmt.Sprintf(" (failing for %s)", rd.now().Sub(st.AuthoritySince).Round(time.Second))
		}
		body.Problems = append(body.Problems, diag.New(st.Authority, "authority", msg))
	}
	if !levelOK {
		// Not ready, whatever policy is held: no protected call can get authority.
		body.Ready, body.Authority = false, levelBad.Reason
		body.Problems = append(body.Problems, levelBad)
	}
	if policyOnly {
		return body
	}
	body.Upstreams = map[string]string{}
	for _, u := range rd.upstreams {
		c := rd.upstream(ctx, u)
		if c.reason == "" {
			body.Upstreams[u.Name] = "ok"
			continue
		}
		body.Upstreams[u.Name] = c.reason
		body.Problems = append(body.Problems, diag.New(c.reason, u.Name, fmt.Sprintf("upstream %q: %s", u.Name, c.detail)))
		body.Ready = false
	}
	return body
}

// policyProblem is why no policy is held.
func policyProblem(st policysource.Status) diag.Problem {
	p := diag.New(st.Reason, "policy", st.Message)
	if p.Fix == "" {
		p.Fix = "check the ToolPolicy selecting this pod: kubectl get toolpolicies -n NAMESPACE (Accepted and Ready True, reason Enforcing); " +
			"kubectl actgate doctor -n NAMESPACE POD"
	}
	return p
}

func (rd *readiness) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body := rd.check(r.Context(), r.URL.Query().Get("check") == "policy")
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if !body.Ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(body)
}

// upstream checks u, or returns the check made less than upstreamCheckTTL ago.
func (rd *readiness) upstream(ctx context.Context, u Upstream) upstreamCheck {
	now := rd.now()
	rd.mu.Lock()
	c, ok := rd.checked[u.Name]
	rd.mu.Unlock()
	if ok && now.Sub(c.at) < upstreamCheckTTL {
		return c
	}
	c = rd.reach(ctx, u)
	c.at = now
	rd.mu.Lock()
	rd.checked[u.Name] = c
	rd.mu.Unlock()
	return c
}

// reach connects to u: TCP, and for https a TLS handshake verified as the proxy verifies it.
func (rd *readiness) reach(ctx context.Context, u Upstream) upstreamCheck {
	pu, err := url.Parse(u.URL)
	if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Hostname() == "" {
		return upstreamCheck{reason: diag.UpstreamBadURL, detail: "the URL is not an http(s) URL"}
	}
	addr, _ := hostPort(u.URL)
	ctx, cancel := context.WithTimeout(ctx, upstreamDialTimeout)
	defer cancel()
	conn, err := rd.dial(ctx, "tcp", addr)
	if err != nil {
		return upstreamCheck{reason: diag.UpstreamUnreachable, detail: fmt.Sprintf("no connection to %s: %s", addr, clipDetail(err.Error()))}
	}
	defer conn.Close()
	if pu.Scheme != "https" {
		return upstreamCheck{}
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if rd.tls != nil {
		cfg = rd.tls.Clone()
	}
	cfg.ServerName = pu.Hostname()
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		if diag.TLSFailure(err) {
			return upstreamCheck{reason: diag.UpstreamTLSFailure, detail: fmt.Sprintf("TLS with %s: %s", addr, clipDetail(err.Error()))}
		}
		return upstreamCheck{reason: diag.UpstreamUnreachable, detail: fmt.Sprintf("TLS with %s did not complete: %s", addr, clipDetail(err.Error()))}
	}
	return upstreamCheck{}
}

// clipDetail bounds an error's text in an answer or a log line.
func clipDetail(s string) string {
	const maxDetail = 300
	if len(s) > maxDetail {
		return s[:maxDetail] + "…"
	}
	return s
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
