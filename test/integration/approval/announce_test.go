package approval_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/actgate/actgate/controllers"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/notify"
	"github.com/actgate/actgate/test/testutil/smtpd"
)

// announcements are the deliveries of the cluster's announcer (controllers.BindingMomentAnnouncer,
// as `actgate-controlplane manager` runs it with --notify-webhook-url, --notify-smtp-addr and
// --console-url set to the approval service, docs/operations.md "Notifications: Slack, Teams and
// e-mail") to a loopback Slack-format webhook receiver and a loopback SMTP server of the test's own.
type announcements struct {
	mailer *smtpd.Server
	mu     sync.Mutex
	hooks  [][]byte
}

// startAnnouncer runs a manager with the announcer in r's namespace, announcing to a webhook
// receiver and by e-mail (STARTTLS with the server's CA; oidc:alice@example.com is mailed at
// alice@example.com) with the approval service's URL as the link. The returned function stops
// the manager (t's cleanup too).
func startAnnouncer(t *testing.T, r *rig) (*announcements, func()) {
	t.Helper()
	a := &announcements{mailer: smtpd.Start(t, smtpd.Options{})}
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
		a.mu.Lock()
		a.hooks = append(a.hooks, b)
		a.mu.Unlock()
	}))
	t.Cleanup(recv.Close)
	n, err := notify.New(notify.Options{
		Webhooks:   []notify.Webhook{{URL: recv.URL, Format: notify.FormatSlack}},
		Email:      &notify.Email{Addr: a.mailer.Addr(), CAFile: a.mailer.CAFile(), From: "actgate@example.com", StripPrefix: "oidc:"},
		ConsoleURL: r.external + "/", AttemptTimeout: 10 * time.Second, Log: testr.New(t),
	})
	must(t, err)
	mgr, err := ctrl.NewManager(r.env.Env.Config, ctrl.Options{
		Scheme:                 r.env.Env.Scheme,
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{r.ns: {}}, ByObject: controllers.CacheByObject()},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	must(t, err)
	must(t, (&controllers.BindingMomentAnnouncer{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Notifier: n, Clock: clock.RealClock{},
	}).SetupWithManager(mgr))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("announcer's manager: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("the announcer's manager did not stop")
			}
		})
	}
	t.Cleanup(stop)
	return a, stop
}

// delivered is one moment's announcement as the principal and the channel received it.
type delivered struct {
	// link is the only URL in the mail's decoded text.
	link string
	// mailText is the decoded subject and text body; hookStrings the webhook body's JSON strings.
	mailText    string
	mailTo      []string
	mailTLS     bool
	hookStrings []string
	// mails and hooks count the deliveries naming the moment.
	mails, hooks int
}

var linkRE = regexp.MustCompile(`https?://[^\s<>"]+`)

// wait returns the announcement of moment id once both the mail and the webhook body naming it
// arrived, failing t after timeout.
func (a *announcements) wait(t *testing.T, id string, timeout time.Duration) delivered {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var d delivered
		var problems []string
		for _, m := range a.mailer.Mails() {
			text, err := mailText(m.Data)
			if err != nil {
				problems = append(problems, err.Error())
				continue
			}
			if !strings.Contains(text, "\nMoment: "+id+"\n") {
				continue
			}
			d.mails++
			d.mailText, d.mailTo, d.mailTLS = text, m.To, m.TLS
			if links := linkRE.FindAllString(text, -1); len(links) == 1 {
				d.link = links[0]
			} else {
				problems = append(problems, fmt.Sprintf("the mail carries %d links: %q", len(links), links))
			}
		}
		a.mu.Lock()
		hooks := append([][]byte(nil), a.hooks...)
		a.mu.Unlock()
		for _, b := range hooks {
			var v any
			if err := json.Unmarshal(b, &v); err != nil {
				problems = append(problems, fmt.Sprintf("a webhook body is not JSON: %v", err))
				continue
			}
			s := jsonStrings(v)
			if slices.Contains(s, "*Moment*\n"+id) {
				d.hooks++
				d.hookStrings = s
			}
		}
		if d.mails > 0 && d.hooks > 0 && d.link != "" {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("moment %s: %d mails and %d webhook bodies after %v (%d mails, %d bodies in all); %s",
				id, d.mails, d.hooks, timeout, len(a.mailer.Mails()), len(hooks), strings.Join(problems, "; "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// mailText decodes a raw message as a mail reader would: the subject (RFC 2047) and the
// text/plain body, quoted-printable or base64 decoded, found in a multipart/alternative too.
func mailText(raw []byte) (string, error) {
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return "", fmt.Errorf("a mail does not parse: %w", err)
	}
	subject, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	if err != nil {
		return "", fmt.Errorf("a mail's subject: %w", err)
	}
	body, err := textPart(msg.Header.Get("Content-Type"), msg.Header.Get("Content-Transfer-Encoding"), msg.Body)
	if err != nil {
		return "", err
	}
	return strings.ReplaceAll("Subject: "+subject+"\n\n"+body, "\r\n", "\n"), nil
}

func textPart(ctype, cte string, r io.Reader) (string, error) {
	media, params, err := mime.ParseMediaType(ctype)
	if err != nil {
		return "", fmt.Errorf("a mail's Content-Type %q: %w", ctype, err)
	}
	if strings.HasPrefix(media, "multipart/") {
		mr := multipart.NewReader(r, params["boundary"])
		for {
			p, err := mr.NextRawPart()
			if err != nil {
				return "", fmt.Errorf("a mail has no text/plain part: %w", err)
			}
			if s, err := textPart(p.Header.Get("Content-Type"), p.Header.Get("Content-Transfer-Encoding"), p); err == nil {
				return s, nil
			}
		}
	}
	if media != "text/plain" {
		return "", fmt.Errorf("a mail part is %s", media)
	}
	switch strings.ToLower(cte) {
	case "quoted-printable":
		r = quotedprintable.NewReader(r)
	case "", "7bit", "8bit":
	default:
		return "", fmt.Errorf("a mail part's transfer encoding %q", cte)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return "", fmt.Errorf("a mail's body: %w", err)
	}
	return string(b), nil
}

// jsonStrings lists every string value in v, depth first.
func jsonStrings(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			out = append(out, jsonStrings(e)...)
		}
		return out
	case map[string]any:
		var out []string
		for _, e := range x {
			out = append(out, jsonStrings(e)...)
		}
		return out
	}
	return nil
}

// undisclosed are what an announcement must never carry (envelope-04 §8.4): the labels of e's
// options and every string argument value of the calls they run.
func undisclosed(t *testing.T, e *envelope.Envelope, calls []envelope.Call) []string {
	t.Helper()
	var out []string
	for i := range e.NumOptions() {
		o, _ := e.Option(i)
		out = append(out, o.Label)
	}
	for _, c := range calls {
		var args map[string]any
		must(t, json.Unmarshal(c.Args, &args))
		for _, v := range args {
			if s, ok := v.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}
