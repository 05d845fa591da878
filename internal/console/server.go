package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/actgate/actgate/internal/envelope"
)

//go:embed templates/*.tmpl static/*
var assets embed.FS

// Form fields of a resolution POST.
const (
	fieldToken    = "token"
	fieldMoment   = "moment"
	fieldEnvelope = "envelope"
	fieldChoice   = "choice"
	fieldAnswer   = "answer"
)

// Paths the console answers. The page and the resolution POST live under the console's key
// (/KEY/ and /KEY/resolve: Console.URL); the root is a keyless landing page and the static
// files hold nothing secret.
const (
	pathRoot    = "/"
	pathPage    = "/"
	pathResolve = "/resolve"
	pathStatic  = "/static/"
)

// maxFormBytes bounds a resolution POST: an answer of envelope.MaxResolutionBytes plus the
// form's other fields and its encoding overhead.
const maxFormBytes = 4*envelope.MaxResolutionBytes + 4096

// defaultTimeout bounds one backend call.
const defaultTimeout = 30 * time.Second

// Options configure a Console.
type Options struct {
	// Backend lists and resolves moments as the principal. Required.
	Backend Backend
	// Principal is who the console resolves as, shown in the header.
	Principal string
	// Surface names where the moments live ("actgate serve at http://127.0.0.1:8443",
	// "namespace payments"), shown in the header.
	Surface string
	// Token is the console's key: the first path segment of the URL it prints (/KEY/), which
	// every request but the landing page and the static files must carry. It is never put in a
	// cookie (cookies are not isolated by port, so any other listener on the machine's
	// loopback would receive it) and never used as the anti-CSRF token. Empty: 32 random
	// bytes, hex. Tests may fix it.
	Token string
	// Now is the clock (expiry shown on the page). Nil: time.Now.
	Now func() time.Time
	// Timeout bounds each backend call. Zero: 30 s.
	Timeout time.Duration
	// Log receives one line per resolution, with the moment id, the kind and the envelope
	// digest; never an answer's text.
	Log logr.Logger
}

// Console is the web console's HTTP handler: the loopback front door of Core, which admits a
// request by the console's URL key. Serve it on a listener from Listen.
type Console struct {
	o    Options
	core *Core
	// csrfKey signs the per-page anti-CSRF tokens (csrfToken); it never leaves the process.
	csrfKey []byte
	// nonce returns a page's anti-CSRF nonce (random; tests fix it).
	nonce func() string
}

// New returns a Console for o.
func New(o Options) (*Console, error) {
	if o.Backend == nil {
		return nil, errors.New("console: no backend")
	}
	if o.Token == "" {
		var b [32]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("console: token: %w", err)
		}
		o.Token = hex.EncodeToString(b[:])
	}
	core, err := NewCore(CoreOptions{Now: o.Now, Timeout: o.Timeout, Log: o.Log})
	if err != nil {
		return nil, err
	}
	c := &Console{o: o, core: core, csrfKey: make([]byte, 32), nonce: randomNonce}
	if _, err := rand.Read(c.csrfKey); err != nil {
		return nil, fmt.Errorf("console: CSRF key: %w", err)
	}
	return c, nil
}

// door is the Door of one admitted request: the console's backend and principal, and a fresh
// anti-CSRF token.
func (c *Console) door() *Door {
	return &Door{Backend: c.o.Backend, Principal: c.o.Principal, Surface: c.o.Surface, CSRFToken: c.csrfToken(), CheckCSRF: c.checkCSRF,
		Footer: "actgate console · loopback only · every resolution names the envelope digest shown (envelope-04 §7.3)"}
}

// ServeHTTP implements http.Handler.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	SecurityHeaders(w.Header())
	if !loopbackHost(r.Host) {
		// DNS rebinding: a page on another origin whose name now resolves to 127.0.0.1.
		http.Error(w, "the console answers on its loopback address only", http.StatusMisdirectedRequest)
		return
	}
	if strings.HasPrefix(r.URL.Path, pathStatic) && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		c.core.Static().ServeHTTP(w, r) // the stylesheet and script hold nothing secret
		return
	}
	if r.URL.Path == pathRoot {
		c.landing(w, r)
		return
	}
	rest, ok := c.authorized(r)
	if !ok {
		http.Error(w, "open the URL the console command printed (it carries this console's key)", http.StatusUnauthorized)
		return
	}
	switch rest {
	case pathPage:
		c.core.Page(w, r, c.door())
	case pathResolve:
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if err := sameOrigin(r); err != nil {
			http.Error(w, "refused: "+err.Error(), http.StatusForbidden)
			return
		}
		c.core.Resolve(w, r, c.door())
	default:
		http.NotFound(w, r)
	}
}

// URL is the address to open for a console listening on ln: the page under the console's key.
func (c *Console) URL(ln net.Listener) string {
	return "http://" + ln.Addr().String() + "/" + url.PathEscape(c.o.Token) + "/"
}

// authorized admits a request whose path begins with the console's key (/KEY/...), and
// returns the rest of the path ("/" or "/resolve"). The key travels only in the request line:
// no cookie carries it, so a listener on another loopback port that the principal's browser
// visits receives nothing of it (cookies are scoped by host, not port), and the page's
// Referrer-Policy keeps it from other origins.
func (c *Console) authorized(r *http.Request) (string, bool) {
	p := r.URL.EscapedPath()
	if !strings.HasPrefix(p, "/") {
		return "", false
	}
	key, rest, ok := strings.Cut(p[1:], "/")
	if !ok || subtle.ConstantTimeCompare([]byte(key), []byte(url.PathEscape(c.o.Token))) != 1 {
		return "", false
	}
	return "/" + rest, true
}

// landing answers the keyless root: a page holding nothing secret that says where the console
// is. Its script (static/console.js) sends a browser that opened this console's URL before, in
// this origin, on to the page with the key it kept in localStorage, which browsers isolate by
// origin (port included), so that an announcement's link to http://127.0.0.1:PORT/#moment-ID
// opens the moment.
func (c *Console) landing(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, landingPage)
}

const landingPage = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="referrer" content="same-origin">
<title>actgate console</title><link rel="stylesheet" href="/static/console.css">
<script src="/static/console.js"></script></head>
<body><main><p data-testid="landing">Open the URL that <code>actgate console</code> printed: it carries this console's key.</p></main></body></html>
`

// randomNonce is a page's anti-CSRF nonce: 16 random bytes, hex.
func randomNonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// csrfToken is the anti-CSRF token of a page: its nonce and the nonce's HMAC under the
// console's CSRF key, which is not the console's key and never leaves the process. A POST must
// carry a token the console signed (checkCSRF), besides a same-origin Origin.
func (c *Console) csrfToken() string {
	n := c.nonce()
	return n + "." + c.csrfMAC(n)
}

func (c *Console) csrfMAC(nonce string) string {
	m := hmac.New(sha256.New, c.csrfKey)
	m.Write([]byte("actgate-console-csrf\x00" + nonce))
	return hex.EncodeToString(m.Sum(nil))
}

// checkCSRF reports whether tok is a token csrfToken made.
func (c *Console) checkCSRF(tok string) bool {
	nonce, mac, ok := strings.Cut(tok, ".")
	if !ok || len(nonce) != 32 {
		return false
	}
	return hmac.Equal([]byte(mac), []byte(c.csrfMAC(nonce)))
}

// sameOrigin requires an Origin header naming the console itself (the Host it was reached
// at, which ServeHTTP already checked is loopback). Browsers send Origin on every POST, so
// a missing one is refused too.
func sameOrigin(r *http.Request) error {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return errors.New("a POST without an Origin header")
	}
	if origin != "http://"+r.Host {
		return fmt.Errorf("a POST from origin %q, not from this console", safeLine(origin))
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return fmt.Errorf("a %s POST", safeLine(site))
	}
	return nil
}
