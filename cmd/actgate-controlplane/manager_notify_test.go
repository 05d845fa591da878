package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/test/envtest"
	"github.com/actgate/actgate/test/testutil"
	"github.com/actgate/actgate/test/testutil/smtpd"
)

// TestManagerNotifyFlags: the webhook URL comes from the flag or a file (a mounted Secret);
// bad combinations and URLs are usage errors that never echo a URL read from a file.
func TestManagerNotifyFlags(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("url", "https://hooks.slack.com/services/T0/B0/secret-path-91\n")
	plain := write("plain", "http://hooks.example/secret-path-92")
	cases := []struct {
		name  string
		flags notifyFlags
		want  string // "" = off, "!" = error
	}{
		{"off", notifyFlags{}, ""},
		{"flag", notifyFlags{webhookURL: "https://hooks.example/x"}, "https://hooks.example/x"},
		{"file, trimmed", notifyFlags{webhookURLFile: good}, "https://hooks.slack.com/services/T0/B0/secret-path-91"},
		{"both", notifyFlags{webhookURL: "https://hooks.example/x", webhookURLFile: good}, "!"},
		{"missing file", notifyFlags{webhookURLFile: filepath.Join(dir, "nope")}, "!"},
		{"http to a remote host in the file", notifyFlags{webhookURLFile: plain}, "!"},
		{"http to a remote host", notifyFlags{webhookURL: "http://hooks.example/x"}, "!"},
		{"format without a webhook", notifyFlags{webhookFormat: "teams"}, "!"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.flags.webhook()
			if c.want == "!" {
				if err == nil {
					t.Fatalf("accepted: %q", got)
				}
				if strings.Contains(err.Error(), "secret-path") {
					t.Errorf("the error echoes the URL from the file: %v", err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

// TestManagerNotifyEmailFlags: the e-mail flags need --notify-smtp-addr, a sender and a way to
// find addresses; bad files and values are usage errors.
func TestManagerNotifyEmailFlags(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	recipients := write("recipients", "oidc:alice@example.com alice@example.com\n")
	badRecipients := write("bad-recipients", "alice\n")
	auth := write("auth", "user\npass\n")
	badAuth := write("bad-auth", "user-only")
	mail := notifyFlags{smtpAddr: "smtp.example:587", smtpFrom: "actgate@example.com", emailStripPrefix: "oidc:"}
	with := func(f func(n *notifyFlags)) notifyFlags { n := mail; f(&n); return n }
	cases := []struct {
		name  string
		flags notifyFlags
		ok    bool
	}{
		{"off", notifyFlags{}, true},
		{"mail by prefix", mail, true},
		{"mail by file, with auth and a link", with(func(n *notifyFlags) {
			n.emailStripPrefix, n.emailRecipientsFile, n.smtpAuthFile, n.consoleURL = "", recipients, auth, "https://approve.example/"
		}), true},
		{"webhook formats", notifyFlags{webhookURL: "https://outlook.example/hook", webhookFormat: "teams"}, true},
		{"unknown format", notifyFlags{webhookURL: "https://outlook.example/hook", webhookFormat: "msteams"}, false},
		{"format without a webhook", notifyFlags{webhookFormat: "teams"}, false},
		{"smtp flag without an address", notifyFlags{smtpFrom: "actgate@example.com"}, false},
		{"no sender", with(func(n *notifyFlags) { n.smtpFrom = "" }), false},
		{"sender with a name", with(func(n *notifyFlags) { n.smtpFrom = "Bot <actgate@example.com>" }), false},
		{"no recipients", with(func(n *notifyFlags) { n.emailStripPrefix = "" }), false},
		{"bad recipients file", with(func(n *notifyFlags) { n.emailRecipientsFile = badRecipients }), false},
		{"bad auth file", with(func(n *notifyFlags) { n.smtpAuthFile = badAuth }), false},
		{"missing CA file", with(func(n *notifyFlags) { n.smtpCAFile = filepath.Join(dir, "nope") }), false},
		{"address without port", with(func(n *notifyFlags) { n.smtpAddr = "smtp.example" }), false},
		{"console URL alone", notifyFlags{consoleURL: "https://approve.example/"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := c.flags.options()
			if (err == nil) != c.ok {
				t.Fatalf("err %v, want ok %v", err, c.ok)
			}
			if err != nil && (strings.Contains(err.Error(), "user-only") || !strings.HasPrefix(err.Error(), "USAGE")) {
				t.Errorf("error %q: not a usage error, or it echoes a credential", err)
			}
		})
	}
}

// TestManagerAnnouncesByMailAndWebhook runs `actgate-controlplane manager` against a real API
// server with a Teams webhook (a loopback receiver) and e-mail (a loopback SMTP server with
// STARTTLS): a pending BindingMoment is announced exactly once by each, both carrying the
// #moment-namespace/name link and neither the envelope's option label; the Announced condition
// says Delivered and actgate_notifications_total counts both.
func TestManagerAnnouncesByMailAndWebhook(t *testing.T) {
	env := envtest.Start(t)
	ns := env.Namespace(t)
	probe, metrics := testutil.FreeAddr(t), testutil.FreeAddr(t)
	var mu sync.Mutex
	var hooks [][]byte
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		hooks = append(hooks, b)
		mu.Unlock()
	}))
	t.Cleanup(recv.Close)
	mailer := smtpd.Start(t, smtpd.Options{Users: map[string]string{"actgate": "pw-31"}})
	auth := testutil.WriteFile(t, t.TempDir(), "smtp-auth", []byte("actgate\npw-31\n"))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr bytes.Buffer
	done := make(chan error, 1)
	go func() {
		root := newRootCmd(streams{in: strings.NewReader(""), out: io.Discard, err: &stderr})
		root.SetArgs([]string{"manager", "--kubeconfig", env.Kubeconfig, "--health-probe-bind-address", probe,
			"--metrics-bind-address", metrics, "--console-url", "https://approve.example/",
			"--notify-webhook-url", recv.URL, "--notify-webhook-format", "teams",
			"--notify-smtp-addr", mailer.Addr(), "--notify-smtp-from", "actgate@example.com", "--notify-smtp-ca-file", mailer.CAFile(),
			"--notify-smtp-auth-file", auth, "--notify-email-strip-prefix", "oidc:"})
		done <- root.ExecuteContext(ctx)
	}()
	waitHTTP(t, done, "http://"+probe+"/readyz", "ok")

	const optionSecret = "IBAN-DE00-OPTION-4471"
	bm := &v1alpha1.BindingMoment{
		ObjectMeta: metav1.ObjectMeta{Name: "pay-acme", Namespace: ns},
		Spec: v1alpha1.BindingMomentSpec{
			Envelope:       `{"synopsis":"Pay 500.00 to ACME","question":{"options":[{"label":"Pay to ` + optionSecret + `"}]}}`,
			EnvelopeDigest: v1alpha1.Digest("sha256:" + strings.Repeat("3", 64)),
			Synopsis:       "Pay 500.00 to ACME", Principal: "oidc:alice@example.com",
			ActRef: v1alpha1.LocalObjectReference{Name: "no-act"}, ExpiresAt: metav1.NewTime(time.Now().Add(time.Hour)),
		},
	}
	if err := env.Client.Create(ctx, bm); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := &v1alpha1.BindingMoment{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "pay-acme"}, got); err == nil {
			if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.BindingMomentAnnouncedCondition); c != nil && c.Reason != v1alpha1.BindingMomentAnnouncingReason {
				if c.Reason != v1alpha1.BindingMomentDeliveredReason {
					t.Fatalf("Announced %s/%s: %s", c.Status, c.Reason, c.Message)
				}
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the moment was not announced; stderr:\n%s", stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A later change to the moment (a resync) announces nothing again.
	got := &v1alpha1.BindingMoment{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "pay-acme"}, got); err != nil {
		t.Fatal(err)
	}
	got.Labels = map[string]string{"poke": "1"}
	if err := env.Client.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)

	link := "https://approve.example/#moment-" + ns + "/pay-acme"
	mails := mailer.Mails()
	mu.Lock()
	defer mu.Unlock()
	if len(hooks) != 1 || len(mails) != 1 {
		t.Fatalf("%d webhook requests and %d mails, want 1 and 1", len(hooks), len(mails))
	}
	if mails[0].To[0] != "alice@example.com" || !mails[0].TLS || mails[0].AuthUser != "actgate" {
		t.Errorf("mail to %v, TLS %v, auth %q", mails[0].To, mails[0].TLS, mails[0].AuthUser)
	}
	for what, b := range map[string][]byte{"webhook": hooks[0], "mail": mails[0].Data} {
		if !bytes.Contains(b, []byte(link)) || !bytes.Contains(b, []byte("Pay 500.00 to ACME")) {
			t.Errorf("%s lacks the link %s or the synopsis:\n%s", what, link, b)
		}
		if bytes.Contains(b, []byte(optionSecret)) || bytes.Contains(b, []byte("question")) {
			t.Errorf("%s carries the envelope's option:\n%s", what, b)
		}
	}
	if !bytes.Contains(hooks[0], []byte(`"type":"message"`)) || !bytes.Contains(hooks[0], []byte("Action.OpenUrl")) {
		t.Errorf("the webhook body is not the Teams message:\n%s", hooks[0])
	}
	waitHTTP(t, done, "http://"+metrics+"/metrics", `actgate_notifications_total{result="delivered"} 2`)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("manager: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the manager did not stop")
	}
}
