package gateconfig

import (
	"errors"
	"strings"
	"testing"
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
