package notify

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/textproto"
	"os"
	"sort"
	"strings"
	"time"
	"unicode"
)

// Limits of the e-mail notifier's files.
const (
	// MaxRecipientsFileBytes bounds a recipients file.
	MaxRecipientsFileBytes = 1 << 20
	// MaxAuthFileBytes bounds an SMTP credentials file.
	MaxAuthFileBytes = 4 << 10
	// maxSubjectRunes bounds the synopsis in a Subject line.
	maxSubjectRunes = 120
)

// Sentinel errors of the e-mail notifier.
var (
	// ErrNoSTARTTLS: the SMTP server does not offer STARTTLS; nothing was sent (the
	// announcement names principals and moments and the credentials go over it: never in clear).
	ErrNoSTARTTLS = errors.New("notify: the SMTP server does not offer STARTTLS")
	// ErrAuthFile: the SMTP credentials file could not be read or parsed (nothing was sent).
	ErrAuthFile = errors.New("notify: SMTP credentials file")
	// ErrRecipients: a recipients file could not be read or parsed, or a principal has no
	// address (nothing was sent to that principal).
	ErrRecipients = errors.New("notify: e-mail recipients")
)

// Email configures the e-mail notifier: every announcement is mailed to the address of each
// principal the moment names, one message per principal, over SMTP with STARTTLS (always
// required), with AUTH PLAIN when AuthFile is set. A mail carries the synopsis, the agent, the
// tool and class, the expiry, the envelope digest and the link — never the options and never a
// tool argument, whatever a webhook's IncludeCalls says (envelope-04 §8.4).
type Email struct {
	// Addr is the SMTP server, host:port (submission, usually port 587).
	Addr string
	// ServerName is the name the server's certificate must carry; default Addr's host.
	ServerName string
	// CAFile is a PEM bundle of the CAs that may sign the server's certificate; default the
	// system roots.
	CAFile string
	// AuthFile holds the AUTH PLAIN credentials: the username on the first line, the password
	// on the second (ParseAuth); read for every delivery so it can be rotated in place. Empty:
	// no AUTH.
	AuthFile string
	// From is the sender's address (a bare addr-spec, for example actgate@example.com).
	From string
	// Recipients maps a principal to its address.
	Recipients map[string]string
	// RecipientsFile holds more "PRINCIPAL ADDRESS" lines (ParseRecipients), read for every
	// delivery; its entries win over Recipients.
	RecipientsFile string
	// StripPrefix, when set, derives the address of a principal that no mapping names: a
	// principal "PREFIX" + address (for example "oidc:alice@example.com" with "oidc:") is
	// mailed at that address. A principal without the prefix, or whose rest is not a bare
	// address, gets no mail.
	StripPrefix string
	// HTML adds a text/html alternative to the text/plain body.
	HTML bool
	// Hello is the name sent in EHLO; default "localhost".
	Hello string
}

// emailer is a validated Email.
type emailer struct {
	Email
	host  string
	roots *x509.CertPool
}

func newEmailer(e Email) (*emailer, error) {
	host, port, err := net.SplitHostPort(e.Addr)
	if err != nil || host == "" || port == "" {
		return nil, fmt.Errorf("addr %q: want host:port", e.Addr)
	}
	if err := ValidateAddress(e.From); err != nil {
		return nil, fmt.Errorf("from: %w", err)
	}
	if len(e.Recipients) == 0 && e.RecipientsFile == "" && e.StripPrefix == "" {
		return nil, errors.New("no recipients: set a recipients map or file, or a prefix to strip")
	}
	for p, a := range e.Recipients {
		if err := validPrincipal(p); err != nil {
			return nil, fmt.Errorf("recipients: %w", err)
		}
		if err := ValidateAddress(a); err != nil {
			return nil, fmt.Errorf("recipients[%q]: %w", p, err)
		}
	}
	if e.RecipientsFile != "" {
		if _, err := readRecipients(e.RecipientsFile); err != nil {
			return nil, err
		}
	}
	if e.AuthFile != "" {
		if _, _, err := readAuth(e.AuthFile); err != nil {
			return nil, err
		}
	}
	if strings.ContainsFunc(e.Hello, func(r rune) bool { return r <= ' ' || r > '~' }) {
		return nil, errors.New("hello: not a plain host name")
	}
	m := &emailer{Email: e, host: host}
	if m.ServerName == "" {
		m.ServerName = host
	}
	if e.CAFile != "" {
		pem, err := os.ReadFile(e.CAFile)
		if err != nil {
			return nil, fmt.Errorf("CA file: %w", err)
		}
		m.roots = x509.NewCertPool()
		if !m.roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s: no PEM certificate", e.CAFile)
		}
	}
	return m, nil
}

// ValidateAddress accepts a bare ASCII addr-spec (local@domain), without a display name,
// angle brackets, comments or any control character.
func ValidateAddress(s string) error {
	if s == "" {
		return errors.New("empty address")
	}
	for _, r := range s {
		if r <= ' ' || r > '~' {
			return errors.New("not a bare ASCII address")
		}
	}
	a, err := mail.ParseAddress(s)
	if err != nil {
		return fmt.Errorf("not an address: %w", err)
	}
	if a.Name != "" || a.Address != s || !strings.Contains(s, "@") {
		return errors.New("not a bare address (local@domain)")
	}
	return nil
}

func validPrincipal(p string) error {
	if p == "" || strings.ContainsFunc(p, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		return fmt.Errorf("principal %q: empty or with spaces or control characters", p)
	}
	return nil
}

// ParseRecipients parses a recipients file: one "PRINCIPAL ADDRESS" pair a line, separated by
// white space; blank lines and lines starting with '#' are ignored; a principal may appear once.
// Errors name the line, never an address.
func ParseRecipients(data []byte) (map[string]string, error) {
	if len(data) > MaxRecipientsFileBytes {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrRecipients, MaxRecipientsFileBytes)
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), MaxRecipientsFileBytes)
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		f := strings.Fields(s)
		if len(f) != 2 {
			return nil, fmt.Errorf("%w: line %d is not \"PRINCIPAL ADDRESS\"", ErrRecipients, line)
		}
		if err := validPrincipal(f[0]); err != nil {
			return nil, fmt.Errorf("%w: line %d: invalid principal", ErrRecipients, line)
		}
		if err := ValidateAddress(f[1]); err != nil {
			return nil, fmt.Errorf("%w: line %d: %w", ErrRecipients, line, err)
		}
		if _, dup := out[f[0]]; dup {
			return nil, fmt.Errorf("%w: line %d: principal listed twice", ErrRecipients, line)
		}
		out[f[0]] = f[1]
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRecipients, err)
	}
	return out, nil
}

func readRecipients(path string) (map[string]string, error) {
	data, err := readBounded(path, MaxRecipientsFileBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRecipients, err)
	}
	return ParseRecipients(data)
}

// ParseAuth parses an SMTP credentials file: the username on the first line and the password
// on the second, an optional final line break, nothing else. Errors never include either.
func ParseAuth(data []byte) (user, password string, err error) {
	if len(data) > MaxAuthFileBytes {
		return "", "", fmt.Errorf("%w: larger than %d bytes", ErrAuthFile, MaxAuthFileBytes)
	}
	s := strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
	lines := strings.Split(s, "\n")
	if len(lines) != 2 {
		return "", "", fmt.Errorf("%w: want two lines (username, password), got %d", ErrAuthFile, len(lines))
	}
	user, password = strings.TrimSuffix(lines[0], "\r"), lines[1]
	switch {
	case user == "" || password == "":
		return "", "", fmt.Errorf("%w: empty username or password", ErrAuthFile)
	case strings.ContainsAny(user+password, "\x00\r"):
		return "", "", fmt.Errorf("%w: a control character in the username or password", ErrAuthFile)
	}
	return user, password, nil
}

func readAuth(path string) (string, string, error) {
	data, err := readBounded(path, MaxAuthFileBytes)
	if err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrAuthFile, err)
	}
	return ParseAuth(data)
}

// readBounded reads at most limit+1 bytes of path (the parser refuses more).
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, limit+1))
}

// recipientsOf maps each principal to an address; missing lists the principals that have none.
func (e *emailer) recipientsOf(principals []string) (to map[string]string, missing []string, err error) {
	table := e.Recipients
	if e.RecipientsFile != "" {
		file, err := readRecipients(e.RecipientsFile)
		if err != nil {
			return nil, nil, err
		}
		table = make(map[string]string, len(e.Recipients)+len(file))
		for p, a := range e.Recipients {
			table[p] = a
		}
		for p, a := range file {
			table[p] = a
		}
	}
	to = map[string]string{}
	for _, p := range principals {
		if a, ok := table[p]; ok {
			to[p] = a
			continue
		}
		if rest, ok := strings.CutPrefix(p, e.StripPrefix); ok && e.StripPrefix != "" && ValidateAddress(rest) == nil {
			to[p] = rest
			continue
		}
		missing = append(missing, p)
	}
	return to, missing, nil
}

// mailText is the text/plain body: what tells the principal a decision waits and where.
func mailText(m Moment, link string) string {
	var b strings.Builder
	b.WriteString("A decision waits for you in actgate.\n\n")
	b.WriteString(plainLine(orDash(strings.TrimSpace(m.Synopsis))) + "\n\n")
	for _, f := range mailFacts(m) {
		fmt.Fprintf(&b, "%s: %s\n", f[0], plainLine(f[1]))
	}
	if link != "" {
		b.WriteString("\nOpen the moment to see the exact call and decide there:\n" + link + "\n")
	}
	b.WriteString("\nThis message carries no options and cannot approve or reject anything: the decision is taken only on the moment's page.\n")
	return b.String()
}

var mailHTML = template.Must(template.New("mail").Parse(`<!DOCTYPE html>
<html><body>
<p>A decision waits for you in actgate.</p>
<p><strong>{{.Synopsis}}</strong></p>
<table>{{range .Facts}}<tr><th align="left">{{index . 0}}</th><td>{{index . 1}}</td></tr>{{end}}</table>
{{with .Link}}<p><a href="{{.}}">Open the moment to see the exact call and decide there</a><br>{{.}}</p>{{end}}
<p>This message carries no options and cannot approve or reject anything: the decision is taken only on the moment's page.</p>
</body></html>
`))

func mailFacts(m Moment) [][2]string {
	what := m.Tool
	if m.Server != "" {
		what = m.Server + "/" + m.Tool
	}
	f := [][2]string{
		{"Principal", orDash(strings.Join(m.Principals, ", "))},
		{"Agent", orDash(m.Agent)},
		{"Tool", orDash(what)},
		{"Class", orDash(m.Class)},
		{"Moment", m.ID},
		{"Envelope digest", m.EnvelopeDigest},
	}
	if !m.Expires.IsZero() {
		f = append(f, [2]string{"Expires", m.Expires.UTC().Format(time.RFC3339)})
	}
	return f
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// plainLine replaces control characters (line breaks included) with spaces.
func plainLine(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

// Message is the raw RFC 5322 message announcing m to the address to; it never holds m.Calls.
func (e *emailer) Message(m Moment, link, to string, now time.Time) ([]byte, error) {
	m.Calls = nil // a mail never carries a call, whatever a webhook opted into (envelope-04 §8.4)
	subject := "Decision needed: " + plainLine(strings.TrimSpace(m.Synopsis))
	if r := []rune(subject); len(r) > maxSubjectRunes {
		subject = string(r[:maxSubjectRunes-1]) + "…"
	}
	var id [12]byte
	_, _ = rand.Read(id[:])
	var hdr bytes.Buffer
	fmt.Fprintf(&hdr, "From: %s\r\n", (&mail.Address{Address: e.From}).String())
	fmt.Fprintf(&hdr, "To: %s\r\n", (&mail.Address{Address: to}).String())
	fmt.Fprintf(&hdr, "Subject: %s\r\n", mime.QEncoding.Encode("utf-8", subject))
	fmt.Fprintf(&hdr, "Date: %s\r\n", now.UTC().Format(time.RFC1123Z))
	fmt.Fprintf(&hdr, "Message-ID: <%s.actgate@%s>\r\n", hex.EncodeToString(id[:]), domainOf(e.From))
	hdr.WriteString("MIME-Version: 1.0\r\nAuto-Submitted: auto-generated\r\n")

	text := mailText(m, link)
	if !e.HTML {
		hdr.WriteString("Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n")
		if err := writeQP(&hdr, text); err != nil {
			return nil, err
		}
		return hdr.Bytes(), nil
	}
	var html bytes.Buffer
	if err := mailHTML.Execute(&html, struct {
		Synopsis, Link string
		Facts          [][2]string
	}{orDash(strings.TrimSpace(m.Synopsis)), link, mailFacts(m)}); err != nil {
		return nil, err
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fmt.Fprintf(&hdr, "Content-Type: multipart/alternative; boundary=%q\r\n\r\n", mw.Boundary())
	for _, p := range []struct{ ctype, content string }{{"text/plain; charset=utf-8", text}, {"text/html; charset=utf-8", html.String()}} {
		w, err := mw.CreatePart(textproto.MIMEHeader{"Content-Type": {p.ctype}, "Content-Transfer-Encoding": {"quoted-printable"}})
		if err != nil {
			return nil, err
		}
		if err := writeQP(w, p.content); err != nil {
			return nil, err
		}
	}
	if err := mw.Close(); err != nil {
		return nil, err
	}
	hdr.Write(body.Bytes())
	return hdr.Bytes(), nil
}

func writeQP(w io.Writer, s string) error {
	q := quotedprintable.NewWriter(w)
	if _, err := io.WriteString(q, strings.ReplaceAll(s, "\n", "\r\n")); err != nil {
		return err
	}
	return q.Close()
}

func domainOf(addr string) string {
	_, d, _ := strings.Cut(addr, "@")
	return d
}

// mail delivers the announcement of m by e-mail to every principal it names, with retries per
// message; it reports each outcome through count and returns the failures.
func (n *Notifier) mail(ctx context.Context, m Moment, link string) error {
	e := n.email
	to, missing, err := e.recipientsOf(m.Principals)
	if err != nil {
		n.count(ResultFailed, max(1, len(m.Principals)))
		n.opts.Log.Info("Announcement by e-mail failed", "moment", m.ID, "envelopeDigest", m.EnvelopeDigest, "error", err.Error())
		return fmt.Errorf("e-mail: %w", err)
	}
	var errs []error
	if len(m.Principals) == 0 {
		n.count(ResultFailed, 1)
		n.opts.Log.Info("Announcement by e-mail failed: the moment names no principal", "moment", m.ID, "envelopeDigest", m.EnvelopeDigest)
		return fmt.Errorf("e-mail: %w: the moment names no principal", ErrRecipients)
	}
	for _, p := range missing {
		n.count(ResultFailed, 1)
		n.opts.Log.Info("Announcement by e-mail failed: no address for the principal", "moment", m.ID, "envelopeDigest", m.EnvelopeDigest, "principal", p)
		errs = append(errs, fmt.Errorf("e-mail to principal %q: %w: no address", p, ErrRecipients))
	}
	principals := make([]string, 0, len(to))
	for p := range to {
		principals = append(principals, p)
	}
	sort.Strings(principals)
	for _, p := range principals {
		msg, err := e.Message(m, link, to[p], n.opts.Now())
		if err != nil {
			n.count(ResultFailed, 1)
			errs = append(errs, fmt.Errorf("e-mail to principal %q: %w", p, err))
			continue
		}
		attempts, err := n.retrying(ctx, func(ctx context.Context) (time.Duration, bool, error) {
			err := n.sendMail(ctx, to[p], msg)
			return 0, retryableSMTP(err), err
		})
		if err != nil {
			n.count(ResultFailed, 1)
			n.opts.Log.Info("Announcement by e-mail failed", "moment", m.ID, "envelopeDigest", m.EnvelopeDigest,
				"principal", p, "server", e.Addr, "attempts", attempts, "error", err.Error())
			errs = append(errs, fmt.Errorf("e-mail to principal %q via %s: %w", p, e.Addr, err))
			continue
		}
		n.count(ResultDelivered, 1)
		n.opts.Log.V(1).Info("Announcement mailed", "moment", m.ID, "envelopeDigest", m.EnvelopeDigest, "principal", p, "server", e.Addr, "attempts", attempts)
	}
	return errors.Join(errs...)
}
