package notify

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// MaxHeaderFileBytes bounds a headers file.
const MaxHeaderFileBytes = 64 << 10

// Webhook is one receiver of announcements.
type Webhook struct {
	// URL receives a POST of the JSON body. http or https; https unless the host is loopback
	// (ValidateURL).
	URL string
	// HeadersFrom is a file of "Name: value" lines added to every request (for example
	// "Authorization: Bearer …"), read for every delivery so it can be rotated in place.
	// Blank lines and lines starting with '#' are ignored. The values are never logged.
	HeadersFrom string
	// Format is the body's shape: FormatSlack (""), FormatTeams or FormatGeneric.
	Format Format
	// IncludeCalls sends this webhook, beside the announcement, the exact call each option of
	// the moment runs (tool, server and arguments, policy masks applied). Off by default:
	// announcements carry no argument values. Set it only for a receiver that is the
	// principal's own surface (a direct message to the principal, not a shared channel).
	IncludeCalls bool
}

// Sentinel errors of a delivery; errors.Is tells a caller why a webhook did not take it.
var (
	// ErrRejected: the receiver answered a 4xx other than 429 (not retried), or a 3xx.
	ErrRejected = errors.New("notify: rejected by the receiver")
	// ErrGaveUp: every attempt failed with a retryable error (network, 5xx, 429).
	ErrGaveUp = errors.New("notify: gave up after the last attempt")
	// ErrHeaders: the headers file could not be read or parsed (nothing was sent).
	ErrHeaders = errors.New("notify: headers file")
)

// ValidateURL accepts an absolute http(s) URL with a host, no user info and no fragment; http
// only when the host is a loopback address or "localhost" (the announcement names principals
// and moments and may carry a bearer token: it does not cross a network in clear).
func ValidateURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("not a URL: %w", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("scheme %q: only http and https", u.Scheme)
	case u.Host == "" || u.Hostname() == "":
		return errors.New("no host")
	case u.User != nil:
		return errors.New("user info in the URL: put credentials in a headers file")
	case u.Fragment != "":
		return errors.New("a fragment is never sent: remove it")
	case u.Scheme == "http" && !isLoopback(u.Hostname()):
		return fmt.Errorf("http to %q: https is required unless the host is loopback", u.Hostname())
	}
	return nil
}

// validateConsoleURL accepts an absolute http(s) URL template (the link is only shown, never
// fetched, so http to a non-loopback host is allowed: a cluster console may sit behind a proxy
// the operator chose).
func validateConsoleURL(raw string) error {
	u, err := url.Parse(strings.ReplaceAll(raw, "{id}", "x"))
	if err != nil {
		return fmt.Errorf("not a URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("must be an absolute http(s) URL")
	}
	if u.User != nil {
		return errors.New("user info in the URL")
	}
	return nil
}

// ValidateConsoleURL is the check New applies to Options.ConsoleURL.
func ValidateConsoleURL(raw string) error { return validateConsoleURL(raw) }

// ConsoleLink renders the console URL template for a moment id: "{id}" is replaced by the
// path-escaped id; without "{id}", "#moment-" and the id are appended as a fragment (escaped
// as a fragment: a cluster moment's "namespace/name" keeps its "/", the page's anchor
// "moment-namespace/name", docs/operations.md). "" when tmpl is "".
func ConsoleLink(tmpl, id string) string {
	if tmpl == "" {
		return ""
	}
	if strings.Contains(tmpl, "{id}") {
		return strings.ReplaceAll(tmpl, "{id}", url.PathEscape(id))
	}
	return tmpl + "#" + (&url.URL{Fragment: "moment-" + id}).EscapedFragment()
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "?"
	}
	return u.Host
}

// readHeaders reads a headers file.
func readHeaders(path string) (http.Header, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrHeaders, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxHeaderFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrHeaders, path, err)
	}
	return ParseHeaders(data)
}

// ParseHeaders parses "Name: value" lines. Errors name the line, never its value.
func ParseHeaders(data []byte) (http.Header, error) {
	if len(data) > MaxHeaderFileBytes {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrHeaders, MaxHeaderFileBytes)
	}
	h := http.Header{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), MaxHeaderFileBytes)
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		name, value, ok := strings.Cut(s, ":")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		switch {
		case !ok || name == "":
			return nil, fmt.Errorf("%w: line %d is not \"Name: value\"", ErrHeaders, line)
		case !validHeaderName(name):
			return nil, fmt.Errorf("%w: line %d: invalid header name", ErrHeaders, line)
		case strings.ContainsAny(value, "\r\n\x00"):
			return nil, fmt.Errorf("%w: line %d: invalid header value", ErrHeaders, line)
		}
		switch http.CanonicalHeaderKey(name) {
		case "Host", "Content-Length", "Content-Type", "Transfer-Encoding", "Connection":
			return nil, fmt.Errorf("%w: line %d: header %s is set by the notifier", ErrHeaders, line, http.CanonicalHeaderKey(name))
		}
		h.Add(name, value)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrHeaders, err)
	}
	return h, nil
}

func validHeaderName(s string) bool {
	for _, r := range s {
		if r > 0x7e || r <= ' ' || strings.ContainsRune("\"(),/:;<=>?@[\\]{}", r) {
			return false
		}
	}
	return true
}

// post delivers body to w with retries; it returns the number of attempts made.
func (n *Notifier) post(ctx context.Context, w Webhook, body []byte) (int, error) {
	return n.retrying(ctx, func(ctx context.Context) (time.Duration, bool, error) {
		var hdr http.Header
		if w.HeadersFrom != "" {
			h, err := readHeaders(w.HeadersFrom)
			if err != nil {
				return 0, false, err
			}
			hdr = h
		}
		return n.attempt(ctx, w.URL, hdr, body)
	})
}

// backoff is min(MaxBackoff, BaseBackoff·2^(attempt-1)).
func (n *Notifier) backoff(attempt int) time.Duration {
	d := n.opts.BaseBackoff
	for i := 1; i < attempt; i++ {
		d *= 2
		if d >= n.opts.MaxBackoff {
			return n.opts.MaxBackoff
		}
	}
	return min(d, n.opts.MaxBackoff)
}

// attempt sends one request. It returns the wait a Retry-After asked for (0 for none), whether
// the failure is worth retrying, and the failure.
func (n *Notifier) attempt(ctx context.Context, target string, hdr http.Header, body []byte) (time.Duration, bool, error) {
	n.attempts.Add(1)
	ctx, cancel := context.WithTimeout(ctx, n.opts.AttemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return 0, false, fmt.Errorf("%w: %w", ErrRejected, err)
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := n.opts.Client.Do(req)
	if err != nil {
		return 0, true, fmt.Errorf("post: %w", netErr(err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		return 0, false, nil
	case code == http.StatusTooManyRequests || code >= 500:
		return n.retryAfter(resp.Header.Get("Retry-After")), true, fmt.Errorf("status %d", code)
	default:
		return 0, false, fmt.Errorf("%w: status %d", ErrRejected, code)
	}
}

// netErr keeps the kind of a transport error without the request URL (which may carry a
// secret path, as Slack incoming-webhook URLs do).
func netErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		var ne net.Error
		if errors.As(ue.Err, &ne) && ne.Timeout() {
			return fmt.Errorf("timeout: %w", context.DeadlineExceeded)
		}
		var oe *net.OpError
		if errors.As(ue.Err, &oe) {
			return fmt.Errorf("%s: %w", oe.Op, oe.Err)
		}
		return ue.Err
	}
	return err
}

// retryAfter parses a Retry-After header (delay-seconds or an HTTP date, RFC 9110 §10.2.3),
// capped at MaxRetryAfter; 0 when absent or unparsable (the backoff applies).
func (n *Notifier) retryAfter(v string) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0
		}
		if secs > int64(n.opts.MaxRetryAfter/time.Second) {
			return n.opts.MaxRetryAfter
		}
		d = time.Duration(secs) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(n.opts.Now())
	} else {
		return 0
	}
	if d <= 0 {
		return 0
	}
	return min(d, n.opts.MaxRetryAfter)
}
