package notify

import (
	"bytes"
	"context"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/actgate/actgate/test/testutil/smtpd"
)

// emailOptions configures only e-mail to srv, with the CA of its certificate.
func emailOptions(t *testing.T, s *sleeps, srv *smtpd.Server, e Email) Options {
	o := testOptions(s)
	o.ConsoleURL = "https://approve.example/"
	e.Addr, e.CAFile = srv.Addr(), srv.CAFile()
	if e.From == "" {
		e.From = "actgate@example.com"
	}
	o.Email = &e
	return o
}

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// decodedText returns every text part of a raw message, transfer encoding undone.
func decodedText(t *testing.T, raw []byte) (header mail.Header, parts map[string]string) {
	t.Helper()
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("not an RFC 5322 message: %v\n%s", err, raw)
	}
	parts = map[string]string{}
	ct, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil {
		t.Fatal(err)
	}
	decode := func(r io.Reader, cte string) string {
		if strings.EqualFold(cte, "quoted-printable") {
			r = quotedprintable.NewReader(r)
		}
		b, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if !strings.HasPrefix(ct, "multipart/") {
		parts[ct] = decode(msg.Body, msg.Header.Get("Content-Transfer-Encoding"))
		return msg.Header, parts
	}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	for {
		p, err := mr.NextRawPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		pct, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type"))
		parts[pct] = decode(p, p.Header.Get("Content-Transfer-Encoding"))
	}
	return msg.Header, parts
}

// TestEmailDelivered: an announcement reaches a loopback SMTP server over STARTTLS with AUTH
// PLAIN from the credentials file, one message per principal at the mapped or prefix-stripped
// address, carrying the synopsis, digest and #moment-namespace/name link and, although a
// webhook opted into the calls, no argument value or call anywhere in the raw or decoded
// message.
func TestEmailDelivered(t *testing.T) {
	srv := smtpd.Start(t, smtpd.Options{Users: map[string]string{"actgate": "s3cret-pw"}})
	hook := newReceiver(t)
	var s sleeps
	o := emailOptions(t, &s, srv, Email{
		AuthFile:    writeTemp(t, "auth", "actgate\ns3cret-pw\n"),
		Recipients:  map[string]string{"bob": "bob@example.org"},
		StripPrefix: "oidc:", HTML: true,
	})
	o.Webhooks = []Webhook{{URL: hook.srv.URL, IncludeCalls: true}}
	reg := prometheus.NewRegistry()
	o.Registerer = reg
	n := newNotifier(t, o)
	m := formatMoment()
	m.Principals = []string{"oidc:alice@example.com", "bob"}
	if err := n.Deliver(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(hook.requests()[0].body, []byte(secretArg)) {
		t.Fatal("the includeCalls webhook did not get the calls: the test would prove nothing")
	}
	mails := srv.Mails()
	if len(mails) != 2 {
		t.Fatalf("%d mails, want 2", len(mails))
	}
	got := map[string]bool{}
	for _, ml := range mails {
		if len(ml.To) != 1 || !ml.TLS || ml.AuthUser != "actgate" || ml.From != "actgate@example.com" {
			t.Errorf("mail to %v, TLS %v, auth %q, from %q", ml.To, ml.TLS, ml.AuthUser, ml.From)
		}
		got[ml.To[0]] = true
		hdr, parts := decodedText(t, ml.Data)
		if hdr.Get("To") != "<"+ml.To[0]+">" {
			t.Errorf("To header %q for RCPT %s", hdr.Get("To"), ml.To[0])
		}
		if subj, _ := new(mime.WordDecoder).DecodeHeader(hdr.Get("Subject")); !strings.Contains(subj, m.Synopsis) {
			t.Errorf("Subject %q", subj)
		}
		if len(parts) != 2 || parts["text/plain"] == "" || parts["text/html"] == "" {
			t.Fatalf("parts %v", parts)
		}
		for ct, p := range parts {
			for _, want := range []string{clusterLink, m.Synopsis, m.EnvelopeDigest, "FINANCIAL", "bank/send_payment", "agent-1", "2026-11-29T18:15:00Z"} {
				if !strings.Contains(p, want) {
					t.Errorf("%s part lacks %q:\n%s", ct, want, p)
				}
			}
		}
		all := string(ml.Data) + parts["text/plain"] + parts["text/html"]
		assertNoCalls(t, "mail", []byte(all))
	}
	if !got["alice@example.com"] || !got["bob@example.org"] {
		t.Errorf("recipients %v", got)
	}
	if st := n.Stats(); st.Delivered != 3 || st.Failed != 0 {
		t.Errorf("stats %+v, want 3 delivered (webhook and two mails)", st)
	}
	if v := counterValue(t, reg, "actgate_notifications_total", "delivered"); v != 3 {
		t.Errorf("actgate_notifications_total{result=delivered} %v", v)
	}
}

// counterValue reads one result's count of a counter from reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != 1 {
				t.Errorf("%s has labels %v: the series kept only result", name, m.GetLabel())
			}
			if m.GetLabel()[0].GetValue() == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}

// TestEmailNoSTARTTLS: a server that does not offer STARTTLS gets no MAIL command: nothing is
// sent, the failure is counted once (not retried) and logged.
func TestEmailNoSTARTTLS(t *testing.T) {
	srv := smtpd.Start(t, smtpd.Options{NoSTARTTLS: true})
	var s sleeps
	o := emailOptions(t, &s, srv, Email{StripPrefix: "oidc:"})
	var mu sync.Mutex
	var logs strings.Builder
	o.Log = funcr.New(func(_, args string) { mu.Lock(); logs.WriteString(args + "\n"); mu.Unlock() }, funcr.Options{})
	n := newNotifier(t, o)
	m := testMoment()
	m.Principals = []string{"oidc:alice@example.com"}
	err := n.Deliver(context.Background(), m)
	if !errors.Is(err, ErrNoSTARTTLS) {
		t.Fatalf("err %v, want ErrNoSTARTTLS", err)
	}
	if srv.Sessions() != 1 || srv.MailCommands() != 0 || len(srv.Mails()) != 0 {
		t.Errorf("sessions %d, MAIL commands %d, mails %d: want 1, 0, 0", srv.Sessions(), srv.MailCommands(), len(srv.Mails()))
	}
	if st := n.Stats(); st.Failed != 1 || st.Delivered != 0 || st.Attempts != 1 || len(s.all()) != 0 {
		t.Errorf("stats %+v, sleeps %v: want one failure, one attempt, no retry", st, s.all())
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), "Announcement by e-mail failed") || !strings.Contains(logs.String(), "STARTTLS") ||
		strings.Contains(logs.String(), "alice@example.com\"") && !strings.Contains(logs.String(), "oidc:alice@example.com") {
		t.Errorf("log:\n%s", logs.String())
	}
}

// TestEmailRefusals: a certificate no configured CA signed, refused credentials and a
// principal without an address each send nothing and count a failure; only a transient
// failure is retried.
func TestEmailRefusals(t *testing.T) {
	m := testMoment()
	m.Principals = []string{"oidc:alice@example.com"}
	t.Run("untrusted certificate", func(t *testing.T) {
		srv := smtpd.Start(t, smtpd.Options{})
		var s sleeps
		o := emailOptions(t, &s, srv, Email{StripPrefix: "oidc:"})
		o.Email.CAFile = smtpd.Start(t, smtpd.Options{}).CAFile() // another run's CA
		n := newNotifier(t, o)
		if err := n.Deliver(context.Background(), m); err == nil || srv.MailCommands() != 0 || n.Stats().Attempts != 1 {
			t.Errorf("err %v, MAIL commands %d, attempts %d", err, srv.MailCommands(), n.Stats().Attempts)
		}
	})
	t.Run("wrong password", func(t *testing.T) {
		srv := smtpd.Start(t, smtpd.Options{Users: map[string]string{"actgate": "right"}})
		var s sleeps
		n := newNotifier(t, emailOptions(t, &s, srv, Email{StripPrefix: "oidc:", AuthFile: writeTemp(t, "auth", "actgate\nwrong")}))
		err := n.Deliver(context.Background(), m)
		if err == nil || strings.Contains(err.Error(), "wrong") || len(srv.Mails()) != 0 || n.Stats().Attempts != 1 {
			t.Errorf("err %v, mails %d, attempts %d", err, len(srv.Mails()), n.Stats().Attempts)
		}
	})
	t.Run("no address", func(t *testing.T) {
		srv := smtpd.Start(t, smtpd.Options{})
		var s sleeps
		n := newNotifier(t, emailOptions(t, &s, srv, Email{StripPrefix: "oidc:"}))
		mm := m
		mm.Principals = []string{"system:serviceaccount:x:y", "oidc:Alice <alice@example.com>"}
		err := n.Deliver(context.Background(), mm)
		if !errors.Is(err, ErrRecipients) || srv.Sessions() != 0 || n.Stats().Failed != 2 {
			t.Errorf("err %v, sessions %d, stats %+v", err, srv.Sessions(), n.Stats())
		}
	})
	t.Run("no principal", func(t *testing.T) {
		srv := smtpd.Start(t, smtpd.Options{})
		var s sleeps
		n := newNotifier(t, emailOptions(t, &s, srv, Email{StripPrefix: "oidc:"}))
		mm := m
		mm.Principals = nil
		if err := n.Deliver(context.Background(), mm); !errors.Is(err, ErrRecipients) || srv.Sessions() != 0 || n.Stats().Failed != 1 {
			t.Errorf("err %v, sessions %d, stats %+v", err, srv.Sessions(), n.Stats())
		}
	})
	t.Run("server down is retried", func(t *testing.T) {
		srv := smtpd.Start(t, smtpd.Options{})
		var s sleeps
		o := emailOptions(t, &s, srv, Email{StripPrefix: "oidc:"})
		o.Email.Addr = "127.0.0.1:1"
		n := newNotifier(t, o)
		if err := n.Deliver(context.Background(), m); !errors.Is(err, ErrGaveUp) || n.Stats().Attempts != 4 || len(s.all()) != 3 {
			t.Errorf("err %v, attempts %d, sleeps %v", err, n.Stats().Attempts, s.all())
		}
	})
}

// TestEmailRecipientsFile: the file is read per delivery and wins over the map.
func TestEmailRecipientsFile(t *testing.T) {
	srv := smtpd.Start(t, smtpd.Options{})
	file := writeTemp(t, "recipients", "# principal address\nalice alice@corp.example\n")
	var s sleeps
	n := newNotifier(t, emailOptions(t, &s, srv, Email{RecipientsFile: file, Recipients: map[string]string{"alice": "old@example.com"}}))
	m := testMoment()
	m.Principals = []string{"alice"}
	if err := n.Deliver(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("alice alice@new.example\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := n.Deliver(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	mails := srv.Mails()
	if len(mails) != 2 || mails[0].To[0] != "alice@corp.example" || mails[1].To[0] != "alice@new.example" {
		t.Errorf("mails %+v", mails)
	}
}

func TestEmailOptionsRefused(t *testing.T) {
	ok := Email{Addr: "smtp.example:587", From: "a@example.com", StripPrefix: "oidc:"}
	cases := map[string]func(e *Email){
		"no port":                  func(e *Email) { e.Addr = "smtp.example" },
		"from with a name":         func(e *Email) { e.From = "Bot <a@example.com>" },
		"from with CRLF":           func(e *Email) { e.From = "a@example.com\r\nBcc: x@example.com" },
		"no recipients":            func(e *Email) { e.StripPrefix = "" },
		"bad mapped address":       func(e *Email) { e.Recipients = map[string]string{"bob": "bob"} },
		"principal with space":     func(e *Email) { e.Recipients = map[string]string{"b b": "b@example.com"} },
		"missing recipients file":  func(e *Email) { e.RecipientsFile = "/nonexistent/recipients" },
		"missing auth file":        func(e *Email) { e.AuthFile = "/nonexistent/auth" },
		"CA file without PEM":      func(e *Email) { e.CAFile = writeTemp(t, "ca", "not pem") },
		"hello with a line break":  func(e *Email) { e.Hello = "x\r\nMAIL FROM:<a@b>" },
		"recipients file is wrong": func(e *Email) { e.RecipientsFile = writeTemp(t, "r", "alice\n") },
	}
	for name, mut := range cases {
		t.Run(name, func(t *testing.T) {
			e := ok
			mut(&e)
			if _, err := New(Options{Email: &e}); err == nil {
				t.Error("accepted")
			}
		})
	}
	if _, err := New(Options{Email: &ok}); err != nil {
		t.Errorf("refused a good config: %v", err)
	}
}

// TestMessageHeaders: a synopsis with line breaks and non-ASCII text stays inside one encoded
// Subject; nothing the agent wrote becomes a header.
func TestMessageHeaders(t *testing.T) {
	e, err := newEmailer(Email{Addr: "smtp.example:587", From: "actgate@example.com", StripPrefix: "oidc:"})
	if err != nil {
		t.Fatal(err)
	}
	m := testMoment()
	m.Synopsis = "Zahlung prüfen\r\nBcc: eve@example.com\r\n\r\ninjected body " + strings.Repeat("x", 300)
	raw, err := e.Message(m, clusterLink, "alice@example.com", t0)
	if err != nil {
		t.Fatal(err)
	}
	hdr, parts := decodedText(t, raw)
	if hdr.Get("Bcc") != "" || len(hdr) != 9 {
		t.Errorf("headers %v", hdr)
	}
	subj, err := new(mime.WordDecoder).DecodeHeader(hdr.Get("Subject"))
	if err != nil || !strings.HasPrefix(subj, "Decision needed: Zahlung prüfen  Bcc: eve@example.com") || len([]rune(subj)) > maxSubjectRunes {
		t.Errorf("Subject %q, %v", subj, err)
	}
	if !strings.Contains(parts["text/plain"], clusterLink) {
		t.Errorf("text part lacks the link:\n%s", parts["text/plain"])
	}
}

func TestParseRecipients(t *testing.T) {
	cases := []struct {
		name, in string
		want     map[string]string
	}{
		{"pairs", "alice alice@example.com\n  oidc:bob@example.com\tbob@corp.example  \r\n", map[string]string{"alice": "alice@example.com", "oidc:bob@example.com": "bob@corp.example"}},
		{"comments and blanks", "# who\n\nalice a@example.com\n", map[string]string{"alice": "a@example.com"}},
		{"empty", "", map[string]string{}},
		{"one field", "alice\n", nil},
		{"three fields", "alice a@example.com b@example.com\n", nil},
		{"display name", "alice Alice<a@example.com>\n", nil},
		{"no at", "alice alice\n", nil},
		{"non-ASCII address", "alice ä@example.com\n", nil},
		{"twice", "alice a@example.com\nalice b@example.com\n", nil},
		{"control in principal", "al\x01ice a@example.com\n", nil},
		{"too large", strings.Repeat("#", MaxRecipientsFileBytes+1), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseRecipients([]byte(c.in))
			if c.want == nil {
				if !errors.Is(err, ErrRecipients) {
					t.Fatalf("got %v, %v; want ErrRecipients", got, err)
				}
				if strings.Contains(err.Error(), "example.com") {
					t.Errorf("the error echoes an address: %v", err)
				}
				return
			}
			if err != nil || len(got) != len(c.want) {
				t.Fatalf("got %v, %v; want %v", got, err, c.want)
			}
			for k, v := range c.want {
				if got[k] != v {
					t.Errorf("%s → %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

func TestParseAuth(t *testing.T) {
	cases := []struct{ in, user, pass string }{
		{"u\np", "u", "p"},
		{"u\np\n", "u", "p"},
		{"u\r\np w:x\r\n", "u", "p w:x"},
		{"u\np\n\n", "", ""},
		{"u", "", ""},
		{"\np", "", ""},
		{"u\n", "", ""},
		{"u\np\nq", "", ""},
		{"u\x00\np", "", ""},
		{strings.Repeat("u", MaxAuthFileBytes) + "\np", "", ""},
	}
	for _, c := range cases {
		u, p, err := ParseAuth([]byte(c.in))
		if c.user == "" {
			if !errors.Is(err, ErrAuthFile) {
				t.Errorf("ParseAuth(%q) = %q, %q, %v; want ErrAuthFile", c.in, u, p, err)
			}
			continue
		}
		if err != nil || u != c.user || p != c.pass {
			t.Errorf("ParseAuth(%q) = %q, %q, %v", c.in, u, p, err)
		}
	}
}

// FuzzParseRecipients: bad bytes give ErrRecipients, never a panic; every accepted address is
// a bare address and every principal free of white space.
func FuzzParseRecipients(f *testing.F) {
	for _, s := range []string{"alice a@example.com\n", "# c\n\nb b@x.example", "a", "a b c", "a <a@b>", "a a@b\na c@d", "\xff a@b"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := ParseRecipients(data)
		if err != nil {
			if !errors.Is(err, ErrRecipients) {
				t.Fatalf("error %v is not ErrRecipients", err)
			}
			return
		}
		for p, a := range got {
			if validPrincipal(p) != nil || ValidateAddress(a) != nil {
				t.Fatalf("accepted %q → %q", p, a)
			}
		}
	})
}

// FuzzParseAuth: bad bytes give ErrAuthFile, never a panic, and the error never holds the
// file's content.
func FuzzParseAuth(f *testing.F) {
	for _, s := range []string{"u\np\n", "u\r\np", "", "\n", "u\np\nx", "u\x00\np"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		u, p, err := ParseAuth(data)
		if err != nil {
			if !errors.Is(err, ErrAuthFile) {
				t.Fatalf("error %v is not ErrAuthFile", err)
			}
			return
		}
		if u == "" || p == "" || strings.ContainsAny(u, "\n\r\x00") || strings.ContainsAny(p, "\n\r\x00") {
			t.Fatalf("accepted %q, %q", u, p)
		}
	})
}
