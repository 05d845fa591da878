package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"strconv"
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

// Console is the web console's HTTP handler. Serve it on a listener from Listen.
type Console struct {
	o      Options
	page   *template.Template
	static http.Handler
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
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Timeout <= 0 {
		o.Timeout = defaultTimeout
	}
	page, err := parsePage()
	if err != nil {
		return nil, err
	}
	static, err := fs.Sub(assets, "static")
	if err != nil {
		return nil, err
	}
	c := &Console{o: o, page: page, static: http.StripPrefix(pathStatic, http.FileServerFS(static)), csrfKey: make([]byte, 32), nonce: randomNonce}
	if _, err := rand.Read(c.csrfKey); err != nil {
		return nil, fmt.Errorf("console: CSRF key: %w", err)
	}
	return c, nil
}

// ServeHTTP implements http.Handler.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w.Header())
	if !loopbackHost(r.Host) {
		// DNS rebinding: a page on another origin whose name now resolves to 127.0.0.1.
		http.Error(w, "the console answers on its loopback address only", http.StatusMisdirectedRequest)
		return
	}
	if strings.HasPrefix(r.URL.Path, pathStatic) && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		c.static.ServeHTTP(w, r) // the stylesheet and script hold nothing secret
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
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		c.render(r.Context(), w, http.StatusOK, nil)
	case pathResolve:
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		c.resolve(w, r)
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

// securityHeaders forbid everything the page does not need: no script or style but its own,
// no framing (clickjacking a decision), no referrer beyond itself, no caching of a decision page.
func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "+
		"form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	// same-origin, not no-referrer: under no-referrer a browser sends "Origin: null" on the
	// page's own form POSTs, which sameOrigin must refuse.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
}

// Outcome statuses shown in the banner after a POST (data-outcome).
const (
	outcomeResolved = "resolved"
	outcomeRefused  = "refused"
	outcomeUnknown  = "unknown"
)

// outcome is the banner after a resolution attempt.
type outcome struct {
	Status  string
	Message string
}

// render lists the moments and writes the page with status and the banner o (nil: none).
func (c *Console) render(ctx context.Context, w http.ResponseWriter, status int, o *outcome) {
	data := pageData{Principal: safeLine(c.o.Principal), Surface: safeLine(c.o.Surface), Token: c.csrfToken(), MaxAnswer: envelope.MaxAnswerRunes, Outcome: o}
	lctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	ms, err := c.o.Backend.List(lctx)
	cancel()
	if err != nil {
		c.o.Log.Error(err, "Listing binding moments failed")
		data.ListError = safeLine(err.Error())
		if status == http.StatusOK {
			status = http.StatusBadGateway
		}
	}
	now := c.o.Now()
	for _, m := range ms {
		data.Moments = append(data.Moments, viewOf(m, now))
	}
	var b strings.Builder
	if err := c.page.Execute(&b, data); err != nil {
		c.o.Log.Error(err, "Rendering the console page failed")
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

// resolve handles a resolution POST: it checks origin and token, rebuilds the §7.3
// resolution from the form against the moment as the backend holds it now, and writes it
// through the backend.
func (c *Console) resolve(w http.ResponseWriter, r *http.Request) {
	if err := sameOrigin(r); err != nil {
		http.Error(w, "refused: "+err.Error(), http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "refused: unreadable or oversized form", http.StatusBadRequest)
		return
	}
	// Every field is given once: a repeated field is not a choice the page offered.
	for k, v := range r.PostForm {
		if len(v) != 1 {
			http.Error(w, fmt.Sprintf("refused: the form repeats %q", safeLine(k)), http.StatusBadRequest)
			return
		}
	}
	if !c.checkCSRF(r.PostForm.Get(fieldToken)) {
		http.Error(w, "refused: the form does not carry this console's token (reload the page)", http.StatusForbidden)
		return
	}
	id := r.PostForm.Get(fieldMoment)
	res, err := resolutionOf(r.PostForm)
	if err != nil {
		c.render(r.Context(), w, http.StatusBadRequest, &outcome{outcomeRefused, err.Error()})
		return
	}
	raw, err := c.check(r.Context(), id, res)
	if err != nil {
		c.render(r.Context(), w, http.StatusConflict, &outcome{outcomeRefused, safeLine(err.Error())})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), c.o.Timeout)
	got, err := c.o.Backend.Resolve(ctx, id, raw)
	cancel()
	log := c.o.Log.WithValues("moment", id, "kind", res.Kind, "envelope", res.EnvelopeDigest)
	switch {
	case errors.Is(err, ErrRefused):
		// The banner already says "Refused"; show the refuser's own words.
		msg := safeLine(strings.TrimPrefix(err.Error(), ErrRefused.Error()+": "))
		log.Info("Resolution refused", "reason", msg)
		c.render(r.Context(), w, http.StatusConflict, &outcome{outcomeRefused, msg})
	case err != nil:
		log.Error(err, "Resolution not confirmed")
		c.render(r.Context(), w, http.StatusBadGateway, &outcome{outcomeUnknown,
			"whether the resolution was written is unknown: " + safeLine(err.Error()) + ". Reload to see whether the moment is still pending."})
	default:
		log.Info("Binding moment resolved")
		msg := got.Message
		if msg == "" {
			msg = fmt.Sprintf("%s resolved: %s", id, got.Kind)
		}
		c.render(r.Context(), w, http.StatusOK, &outcome{outcomeResolved, safeLine(msg)})
	}
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

// resolutionOf reads the choice of a resolution form. The envelope digest is the one the
// page showed, so the resolution names the envelope the principal saw (§7.3, §12.5).
func resolutionOf(f map[string][]string) (envelope.Resolution, error) {
	get := func(k string) string {
		if v := f[k]; len(v) == 1 {
			return v[0]
		}
		return ""
	}
	res := envelope.Resolution{EnvelopeDigest: get(fieldEnvelope)}
	choice := get(fieldChoice)
	switch {
	case strings.HasPrefix(choice, "option:"):
		n, err := strconv.Atoi(strings.TrimPrefix(choice, "option:"))
		if err != nil || n < 0 || n >= envelope.MaxOptions {
			return res, fmt.Errorf("no such option")
		}
		res.Kind, res.OptionIdx = envelope.KindOption, n
	case choice == string(envelope.KindAnswer):
		// HTML forms send line breaks as CRLF (HTML §4.10.21.8); the answer is LF text.
		res.Kind, res.Answer = envelope.KindAnswer, strings.ReplaceAll(get(fieldAnswer), "\r\n", "\n")
		if strings.TrimSpace(res.Answer) == "" {
			return res, errors.New("the answer is empty: write your answer, or choose another resolution")
		}
	case choice == string(envelope.KindQuestion):
		res.Kind = envelope.KindQuestion
	case choice == string(envelope.KindDeclined):
		res.Kind = envelope.KindDeclined
	default:
		return res, errors.New("no resolution chosen")
	}
	return res, nil
}

// check finds moment id among the pending moments, and checks res against the envelope it
// holds now; it returns the resolution's wire form (envelope-04 §7.3). A moment that is no
// longer pending, whose envelope was discarded, or that names another envelope than the page
// showed is refused here: nothing is sent.
func (c *Console) check(ctx context.Context, id string, res envelope.Resolution) ([]byte, error) {
	lctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	ms, err := c.o.Backend.List(lctx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("the moments could not be read, so nothing was written: %w", err)
	}
	var m *Moment
	for i := range ms {
		if ms[i].ID == id {
			m = &ms[i]
			break
		}
	}
	switch {
	case m == nil:
		return nil, fmt.Errorf("%s is no longer pending for you (resolved, expired or removed); nothing was written", id)
	case m.Envelope == nil:
		return nil, fmt.Errorf("%s carries a malformed envelope, which offers no decision (envelope-04 §9.3); nothing was written", id)
	case envelope.CheckCalls(m.Envelope, m.Calls) != nil:
		return nil, fmt.Errorf("%s does not carry the calls its options authorise, so it offers no decision; nothing was written", id)
	case m.Envelope.Digest() != res.EnvelopeDigest:
		return nil, fmt.Errorf("%s now names another envelope than the page showed (envelope-04 §12.5); reload and decide again; nothing was written", id)
	// A hatch whose slot-8 boolean is false is not offered, so it is not a resolution the
	// principal could have chosen (§5.8, §9.1).
	case res.Kind == envelope.KindAnswer && !m.Envelope.Hatches().FreeText:
		return nil, fmt.Errorf("%s closes the answer hatch (free_text is false); nothing was written", id)
	case res.Kind == envelope.KindQuestion && !m.Envelope.Hatches().Dialogue:
		return nil, fmt.Errorf("%s closes the question hatch (dialogue is false); nothing was written", id)
	}
	raw, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	parsed, err := envelope.ParseResolution(raw)
	if err == nil {
		err = envelope.Verify(m.Envelope, parsed)
	}
	if err != nil {
		return nil, fmt.Errorf("not a valid resolution: %s", problemsLine(envelope.ProblemsOf(err), err))
	}
	return raw, nil
}

func problemsLine(ps []envelope.Problem, err error) string {
	if len(ps) == 0 {
		return err.Error()
	}
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, "; ")
}
