package gateconfig

import (
	"errors"
	"strings"
	"testing"

	"github.com/actgate/actgate/internal/notify"
)

func TestNotifications(t *testing.T) {
	doc := minimal + `notifications:
  consoleURL: "http://127.0.0.1:8788/console?moment={id}"
  webhooks:
  - url: https://hooks.slack.com/services/T0/B0/xyz
    headersFrom: hook.headers
  - url: http://127.0.0.1:9999/hook
`
	c, err := Parse([]byte(doc), "/etc/actgate")
	if err != nil {
		t.Fatal(err)
	}
	o, ok := c.NotifierOptions()
	if !ok || len(o.Webhooks) != 2 || o.ConsoleURL != "http://127.0.0.1:8788/console?moment={id}" {
		t.Fatalf("NotifierOptions() = %+v, %v", o, ok)
	}
	if o.Webhooks[0].HeadersFrom != "/etc/actgate/hook.headers" || o.Webhooks[1].HeadersFrom != "" {
		t.Errorf("headersFrom not resolved against the file's directory: %+v", o.Webhooks)
	}
	c, err = Parse([]byte(minimal), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.NotifierOptions(); ok {
		t.Error("notifications enabled without the section")
	}
}

// TestEmailNotifications: the email section and webhook formats reach the notifier's options,
// the files resolved against the config file's directory.
func TestEmailNotifications(t *testing.T) {
	doc := minimal + `notifications:
  consoleURL: https://approve.example/
  webhooks:
  - url: https://outlook.example/hook
    format: teams
  email:
    addr: smtp.example:587
    from: actgate@example.com
    caFile: smtp-ca.pem
    authFile: /run/secrets/smtp-auth
    recipients:
      oidc:bob@example.com: bob@corp.example
    recipientsFile: recipients
    stripPrefix: "oidc:"
    html: true
`
	c, err := Parse([]byte(doc), "/etc/actgate")
	if err != nil {
		t.Fatal(err)
	}
	o, ok := c.NotifierOptions()
	if !ok || len(o.Webhooks) != 1 || o.Webhooks[0].Format != notify.FormatTeams || o.Email == nil {
		t.Fatalf("NotifierOptions() = %+v, %v", o, ok)
	}
	e := o.Email
	if e.Addr != "smtp.example:587" || e.From != "actgate@example.com" || e.CAFile != "/etc/actgate/smtp-ca.pem" || e.AuthFile != "/run/secrets/smtp-auth" ||
		e.RecipientsFile != "/etc/actgate/recipients" || e.StripPrefix != "oidc:" || !e.HTML || e.Recipients["oidc:bob@example.com"] != "bob@corp.example" {
		t.Errorf("email %+v", e)
	}
	c, err = Parse([]byte(minimal+"notifications:\n  email: {addr: 'smtp.example:587', from: a@example.com, stripPrefix: 'oidc:'}\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := c.NotifierOptions(); !ok || o.Email == nil || len(o.Webhooks) != 0 {
		t.Errorf("e-mail alone: %+v, %v", o, ok)
	}
}

// TestBadNotifications: every refusal names its field.
func TestBadNotifications(t *testing.T) {
	cases := []struct{ name, section, field string }{
		{"no webhooks", "notifications:\n  webhooks: []\n", "notifications.webhooks"},
		{"http to a remote host", "notifications:\n  webhooks:\n  - url: http://hooks.example/x\n", "notifications.webhooks[0].url"},
		{"not http", "notifications:\n  webhooks:\n  - url: file:///etc/passwd\n", "notifications.webhooks[0].url"},
		{"missing url", "notifications:\n  webhooks:\n  - headersFrom: h\n", "notifications.webhooks[0].url"},
		{"duplicate", "notifications:\n  webhooks:\n  - url: https://h.example/x\n  - url: https://h.example/x\n", "notifications.webhooks[1].url"},
		{"relative console URL", "notifications:\n  consoleURL: console/{id}\n  webhooks:\n  - url: https://h.example/x\n", "notifications.consoleURL"},
		{"unknown field", "notifications:\n  webhooks:\n  - url: https://h.example/x\n    token: abc\n", "token"},
		{"unknown format", "notifications:\n  webhooks:\n  - url: https://h.example/x\n    format: msteams\n", "notifications.webhooks[0].format"},
		{"email without addr", "notifications:\n  email: {from: a@example.com, stripPrefix: 'oidc:'}\n", "notifications.email.addr"},
		{"email addr without port", "notifications:\n  email: {addr: smtp.example, from: a@example.com, stripPrefix: 'oidc:'}\n", "notifications.email.addr"},
		{"email from with a name", "notifications:\n  email: {addr: 'h:25', from: 'Bot <a@example.com>', stripPrefix: 'oidc:'}\n", "notifications.email.from"},
		{"email without recipients", "notifications:\n  email: {addr: 'h:25', from: a@example.com}\n", "notifications.email"},
		{"email bad recipient", "notifications:\n  email: {addr: 'h:25', from: a@example.com, recipients: {bob: 'bob'}}\n", `notifications.email.recipients["bob"]`},
		{"email unknown field", "notifications:\n  email: {addr: 'h:25', from: a@example.com, stripPrefix: x, password: p}\n", "password"},
		{"email insecure", "notifications:\n  email: {addr: 'h:25', from: a@example.com, stripPrefix: x, startTLS: false}\n", "startTLS"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(minimal+c.section), "")
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.field) {
				t.Fatalf("err %v, want ErrConfig naming %s", err, c.field)
			}
		})
	}
}
