package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/actgate/actgate/internal/envelope"
)

// Core is the page and the resolution handling every front door shares: the loopback console
// (Console, admitted by its URL key) and the in-cluster approval service (internal/approval,
// admitted by an OpenID Connect session). It renders the moments a Door's backend lists —
// WYSIWYA "Runs (verified by actgate)" blocks, masks, the four resolutions of envelope-04 §7.3,
// discarded envelopes as diagnostics — and handles a resolution POST: the form read strictly,
// the door's anti-CSRF token, the moment found again, its calls checked against its options'
// digests, the envelope digest the page showed, then the write through the backend. Which
// request may reach it (Host, Origin, who is signed in) is the door's to check first.
type Core struct {
	page    *template.Template
	static  http.Handler
	now     func() time.Time
	timeout time.Duration
	log     logr.Logger
}

// CoreOptions configure a Core.
type CoreOptions struct {
	// Now is the clock (expiry shown on the page). Nil: time.Now.
	Now func() time.Time
	// Timeout bounds each backend call. Zero: 30 s.
	Timeout time.Duration
	// Log receives one line per resolution, with the moment id, the kind and the envelope
	// digest; never an answer's text.
	Log logr.Logger
}

// Door is what a front door established for one request: the backend that lists and resolves
// as the person admitted, what the header says, and the anti-CSRF token of the page.
type Door struct {
	// Backend lists and resolves moments as the person. Required.
	Backend Backend
	// Principal is who resolves, shown in the header; Surface names where the moments live.
	Principal, Surface string
	// CSRFToken is put into every form of the page; CheckCSRF reports whether a POSTed token
	// is one the door issued to this person. Both required.
	CSRFToken string
	CheckCSRF func(token string) bool
	// Footer is the page's footer line.
	Footer string
	// SignOut shows a sign-out button in the header (a POST to "signout" carrying the token).
	SignOut bool
	// BeforeResolve, when set, is called with the moment as the backend holds it now, after
	// every check and before anything is written. It returns false when it has answered the
	// request itself (e.g. sent the person to sign in again): nothing is written then.
	BeforeResolve func(w http.ResponseWriter, r *http.Request, m Moment) bool
}

// NewCore returns a Core for o.
func NewCore(o CoreOptions) (*Core, error) {
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
	return &Core{page: page, static: http.StripPrefix(pathStatic, http.FileServerFS(static)), now: o.Now, timeout: o.Timeout, log: o.Log}, nil
}

// Static serves the page's stylesheet and script under /static/; they hold nothing secret.
func (c *Core) Static() http.Handler { return c.static }

// StaticPath is the path prefix Static answers.
const StaticPath = pathStatic

// Page answers a GET of the page: the moments d's backend lists.
func (c *Core) Page(w http.ResponseWriter, r *http.Request, d *Door) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	c.render(r.Context(), w, d, http.StatusOK, nil)
}

// SecurityHeaders forbid everything the page does not need: no script or style but its own,
// no framing (clickjacking a decision), no referrer beyond itself, no caching of a decision
// page. Every response of every door carries them.
func SecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "+
		"form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	// same-origin, not no-referrer: under no-referrer a browser sends "Origin: null" on the
	// page's own form POSTs, which the doors' origin checks must refuse.
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
func (c *Core) render(ctx context.Context, w http.ResponseWriter, d *Door, status int, o *outcome) {
	data := pageData{Principal: safeLine(d.Principal), Surface: safeLine(d.Surface), Token: d.CSRFToken, MaxAnswer: envelope.MaxAnswerRunes,
		Outcome: o, Footer: d.Footer, SignOut: d.SignOut}
	lctx, cancel := context.WithTimeout(ctx, c.timeout)
	ms, err := d.Backend.List(lctx)
	cancel()
	if err != nil {
		c.log.Error(err, "Listing binding moments failed")
		data.ListError = safeLine(err.Error())
		if status == http.StatusOK {
			status = http.StatusBadGateway
		}
	}
	now := c.now()
	for _, m := range ms {
		data.Moments = append(data.Moments, viewOf(m, now))
	}
	var b strings.Builder
	if err := c.page.Execute(&b, data); err != nil {
		c.log.Error(err, "Rendering the console page failed")
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

// ReadForm reads a POSTed form strictly: at most maxFormBytes, every field given once (a
// repeated field is not a choice the page offered). It answers the request itself and
// returns false on bad input.
func ReadForm(w http.ResponseWriter, r *http.Request) bool {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "refused: unreadable or oversized form", http.StatusBadRequest)
		return false
	}
	for k, v := range r.PostForm {
		if len(v) != 1 {
			http.Error(w, fmt.Sprintf("refused: the form repeats %q", safeLine(k)), http.StatusBadRequest)
			return false
		}
	}
	return true
}

// Resolve handles a resolution POST whose origin the door has checked: it checks the door's
// token, rebuilds the §7.3 resolution from the form against the moment as the backend holds
// it now, and writes it through the backend.
func (c *Core) Resolve(w http.ResponseWriter, r *http.Request, d *Door) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if !ReadForm(w, r) {
		return
	}
	if d.CheckCSRF == nil || !d.CheckCSRF(r.PostForm.Get(fieldToken)) {
		http.Error(w, "refused: the form does not carry this page's token (reload the page)", http.StatusForbidden)
		return
	}
	id := r.PostForm.Get(fieldMoment)
	res, err := resolutionOf(r.PostForm)
	if err != nil {
		c.render(r.Context(), w, d, http.StatusBadRequest, &outcome{outcomeRefused, err.Error()})
		return
	}
	raw, m, err := c.check(r.Context(), d, id, res)
	if err != nil {
		c.render(r.Context(), w, d, http.StatusConflict, &outcome{outcomeRefused, safeLine(err.Error())})
		return
	}
	if d.BeforeResolve != nil && !d.BeforeResolve(w, r, *m) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), c.timeout)
	got, err := d.Backend.Resolve(ctx, id, raw)
	cancel()
	log := c.log.WithValues("moment", safeLine(id), "kind", res.Kind, "envelope", res.EnvelopeDigest)
	switch {
	case errors.Is(err, ErrRefused):
		// The banner already says "Refused"; show the refuser's own words.
		msg := safeLine(strings.TrimPrefix(err.Error(), ErrRefused.Error()+": "))
		log.Info("Resolution refused", "reason", msg)
		c.render(r.Context(), w, d, http.StatusConflict, &outcome{outcomeRefused, msg})
	case err != nil:
		log.Error(err, "Resolution not confirmed")
		c.render(r.Context(), w, d, http.StatusBadGateway, &outcome{outcomeUnknown,
			"whether the resolution was written is unknown: " + safeLine(err.Error()) + ". Reload to see whether the moment is still pending."})
	default:
		log.Info("Binding moment resolved")
		msg := got.Message
		if msg == "" {
			msg = fmt.Sprintf("%s resolved: %s", id, got.Kind)
		}
		c.render(r.Context(), w, d, http.StatusOK, &outcome{outcomeResolved, safeLine(msg)})
	}
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
// holds now; it returns the resolution's wire form (envelope-04 §7.3) and the moment. A
// moment that is no longer pending, whose envelope was discarded, or that names another
// envelope than the page showed is refused here: nothing is sent.
func (c *Core) check(ctx context.Context, d *Door, id string, res envelope.Resolution) ([]byte, *Moment, error) {
	lctx, cancel := context.WithTimeout(ctx, c.timeout)
	ms, err := d.Backend.List(lctx)
	cancel()
	if err != nil {
		return nil, nil, fmt.Errorf("the moments could not be read, so nothing was written: %w", err)
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
		return nil, nil, fmt.Errorf("%s is no longer pending for you (resolved, expired or removed); nothing was written", id)
	case m.Envelope == nil:
		return nil, nil, fmt.Errorf("%s carries a malformed envelope, which offers no decision (envelope-04 §9.3); nothing was written", id)
	case envelope.CheckCalls(m.Envelope, m.Calls) != nil:
		return nil, nil, fmt.Errorf("%s does not carry the calls its options authorise, so it offers no decision; nothing was written", id)
	case m.Envelope.Digest() != res.EnvelopeDigest:
		return nil, nil, fmt.Errorf("%s now names another envelope than the page showed (envelope-04 §12.5); reload and decide again; nothing was written", id)
	// A hatch whose slot-8 boolean is false is not offered, so it is not a resolution the
	// principal could have chosen (§5.8, §9.1).
	case res.Kind == envelope.KindAnswer && !m.Envelope.Hatches().FreeText:
		return nil, nil, fmt.Errorf("%s closes the answer hatch (free_text is false); nothing was written", id)
	case res.Kind == envelope.KindQuestion && !m.Envelope.Hatches().Dialogue:
		return nil, nil, fmt.Errorf("%s closes the question hatch (dialogue is false); nothing was written", id)
	}
	raw, err := json.Marshal(res)
	if err != nil {
		return nil, nil, err
	}
	parsed, err := envelope.ParseResolution(raw)
	if err == nil {
		err = envelope.Verify(m.Envelope, parsed)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("not a valid resolution: %s", problemsLine(envelope.ProblemsOf(err), err))
	}
	return raw, m, nil
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
