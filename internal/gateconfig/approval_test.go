package gateconfig

import (
	"strings"
	"testing"
	"time"
)

// TestApprovalSection: the approval section's defaults and resolved paths, and one clear
// error per bad field.
func TestApprovalSection(t *testing.T) {
	good := minimal + `approval:
  listen: 0.0.0.0:8443
  externalURL: https://gate.example:8443
  issuer: https://idp.example
  clientID: actgate-gate
  clientSecretFile: secret
  stepUpMaxAge: 2m
`
	c, err := Parse([]byte(good), "/etc/actgate")
	if err != nil {
		t.Fatal(err)
	}
	a := c.Approval
	if a.PrincipalClaim != "email" || a.ClientSecretFile != "/etc/actgate/secret" {
		t.Errorf("approval %+v", a)
	}
	if s, st := a.Lifetimes(); s != 0 || st != 2*time.Minute {
		t.Errorf("lifetimes %v %v", s, st)
	}
	for field, line := range map[string]string{
		"approval.listen":          "  listen: nowhere",
		"approval.externalURL":     "  externalURL: http://gate.example",
		"approval.issuer":          "  issuer: http://idp.example",
		"approval.stepUpMaxAge":    "  stepUpMaxAge: 48h",
		"approval.tlsCertFile":     "  tlsCertFile: cert.pem",
		"approval.principalClaim":  "  principalClaim: a b",
		"approval.sessionLifetime": "  sessionLifetime: soon",
	} {
		key := strings.Fields(line)[0]
		doc := good
		if strings.Contains(doc, "\n  "+key+" ") {
			lines := strings.Split(doc, "\n")
			for i, l := range lines {
				if strings.HasPrefix(l, "  "+key+" ") {
					lines[i] = line
				}
			}
			doc = strings.Join(lines, "\n")
		} else {
			doc += line + "\n"
		}
		_, err := Parse([]byte(doc), "/etc/actgate")
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v", field, err)
		}
	}
	if _, err := Parse([]byte(strings.Replace(good, "  clientID: actgate-gate\n", "", 1)), "/etc/actgate"); err == nil || !strings.Contains(err.Error(), "approval.clientID") {
		t.Errorf("no clientID: %v", err)
	}
	// http is allowed to a loopback host only.
	if _, err := Parse([]byte(strings.Replace(good, "https://gate.example:8443", "http://127.0.0.1:8443", 1)), "/etc/actgate"); err != nil {
		t.Errorf("http to loopback: %v", err)
	}
}

// TestApprovalLinksAnnouncements: with an approval section and no notifications.consoleURL,
// announcements link to the approval page (its #moment-ID opens the moment after sign-in); a
// configured consoleURL is kept.
func TestApprovalLinksAnnouncements(t *testing.T) {
	approval := `approval:
  listen: 127.0.0.1:8443
  externalURL: https://gate.example:8443
  issuer: https://idp.example
  clientID: actgate-gate
`
	hooks := `notifications:
  webhooks:
  - url: https://hooks.example/a
`
	for _, tc := range []struct{ doc, want string }{
		{minimal + approval + hooks, "https://gate.example:8443/"},
		{minimal + approval + hooks + "  consoleURL: https://console.example/\n", "https://console.example/"},
		{minimal + hooks, ""},
	} {
		c, err := Parse([]byte(tc.doc), "/etc/actgate")
		if err != nil {
			t.Fatal(err)
		}
		if o, ok := c.NotifierOptions(); !ok || o.ConsoleURL != tc.want {
			t.Errorf("ConsoleURL %q (ok %v), want %q", o.ConsoleURL, ok, tc.want)
		}
	}
}
