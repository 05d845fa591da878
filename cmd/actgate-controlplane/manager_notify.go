package main

import (
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/actgate/actgate/controllers"
	"github.com/actgate/actgate/internal/notify"
)

// notifyFlags announce pending BindingMoments (controllers.BindingMomentAnnouncer) to a webhook
// in the Slack, Teams or generic format and, with --notify-smtp-addr, by e-mail to the
// principal (docs/operations.md "Notifications: Slack, Teams and e-mail").
type notifyFlags struct {
	webhookURL, webhookURLFile, headersFile, consoleURL, webhookFormat string

	smtpAddr, smtpServerName, smtpFrom, smtpAuthFile, smtpCAFile string
	emailRecipientsFile, emailStripPrefix                        string
	emailHTML                                                    bool
}

func (n *notifyFlags) register(f *pflag.FlagSet) {
	f.StringVar(&n.webhookURL, "notify-webhook-url", "", "announce every pending BindingMoment once to this webhook (https, or http to loopback)")
	f.StringVar(&n.webhookURLFile, "notify-webhook-url-file", "",
		"file holding the webhook URL (a mounted Secret: a Slack or Teams webhook URL is a credential); instead of --notify-webhook-url")
	f.StringVar(&n.headersFile, "notify-headers-file", "", `file of "Name: value" lines sent with every announcement (e.g. Authorization), read per delivery, never logged`)
	f.StringVar(&n.webhookFormat, "notify-webhook-format", "", "the webhook's body: slack (default), teams (an Adaptive Card message) or generic (plain JSON)")
	f.StringVar(&n.consoleURL, "console-url", "",
		`link in announcements (the approval service's URL): "{id}" becomes the moment's namespace/name; without it "#moment-NAMESPACE/NAME" is appended (default: no link)`)
	f.StringVar(&n.smtpAddr, "notify-smtp-addr", "",
		"mail every announcement to the principal through this SMTP server, host:port (STARTTLS is required)")
	f.StringVar(&n.smtpServerName, "notify-smtp-server-name", "", "name the SMTP server's certificate must carry (default: the host of --notify-smtp-addr)")
	f.StringVar(&n.smtpFrom, "notify-smtp-from", "", "sender address of announcement mails (a bare address)")
	f.StringVar(&n.smtpAuthFile, "notify-smtp-auth-file", "",
		"file with the SMTP AUTH PLAIN username (first line) and password (second line), read per delivery (default: no AUTH)")
	f.StringVar(&n.smtpCAFile, "notify-smtp-ca-file", "", "PEM file of the CAs that may sign the SMTP server's certificate (default: the system roots)")
	f.StringVar(&n.emailRecipientsFile, "notify-email-recipients-file", "", `file of "PRINCIPAL ADDRESS" lines mapping principals to e-mail addresses, read per delivery`)
	f.StringVar(&n.emailStripPrefix, "notify-email-strip-prefix", "",
		`a principal "PREFIX"+address (e.g. "oidc:" for oidc:alice@example.com) that no recipients line names is mailed at that address`)
	f.BoolVar(&n.emailHTML, "notify-email-html", false, "add a simple HTML part to announcement mails")
}

// webhook returns the configured webhook URL ("" when there is none).
func (n notifyFlags) webhook() (string, error) {
	switch {
	case n.webhookURL != "" && n.webhookURLFile != "":
		return "", usageError("--notify-webhook-url and --notify-webhook-url-file are exclusive")
	case n.webhookURLFile != "":
		b, err := os.ReadFile(n.webhookURLFile)
		if err != nil {
			return "", usageError("--notify-webhook-url-file: %v", err)
		}
		u := strings.TrimSpace(string(b))
		if err := notify.ValidateURL(u); err != nil {
			// The file's content is a credential: the error names the file, not the URL.
			return "", usageError("--notify-webhook-url-file %s: %v", n.webhookURLFile, err)
		}
		return u, nil
	case n.webhookURL != "":
		if err := notify.ValidateURL(n.webhookURL); err != nil {
			return "", usageError("--notify-webhook-url: %v", err)
		}
		return n.webhookURL, nil
	}
	if n.headersFile != "" || n.webhookFormat != "" {
		return "", usageError("--notify-headers-file and --notify-webhook-format need --notify-webhook-url or --notify-webhook-url-file")
	}
	return "", nil
}

// email returns the e-mail notifier's configuration (nil without --notify-smtp-addr).
func (n notifyFlags) email() (*notify.Email, error) {
	if n.smtpAddr == "" {
		if n.smtpServerName != "" || n.smtpFrom != "" || n.smtpAuthFile != "" || n.smtpCAFile != "" ||
			n.emailRecipientsFile != "" || n.emailStripPrefix != "" || n.emailHTML {
			return nil, usageError("the --notify-smtp-* and --notify-email-* flags need --notify-smtp-addr")
		}
		return nil, nil
	}
	if n.smtpFrom == "" {
		return nil, usageError("--notify-smtp-addr needs --notify-smtp-from")
	}
	if n.emailRecipientsFile == "" && n.emailStripPrefix == "" {
		return nil, usageError("--notify-smtp-addr needs --notify-email-recipients-file or --notify-email-strip-prefix")
	}
	return &notify.Email{
		Addr: n.smtpAddr, ServerName: n.smtpServerName, From: n.smtpFrom, AuthFile: n.smtpAuthFile, CAFile: n.smtpCAFile,
		RecipientsFile: n.emailRecipientsFile, StripPrefix: n.emailStripPrefix, HTML: n.emailHTML,
	}, nil
}

// options returns the notifier's options; ok is false when notifications are off. Every
// problem, files included (the notifier reads them once here), is a usage error.
func (n notifyFlags) options() (opts notify.Options, ok bool, err error) {
	url, err := n.webhook()
	if err != nil {
		return opts, false, err
	}
	email, err := n.email()
	if err != nil {
		return opts, false, err
	}
	if url == "" && email == nil {
		if n.consoleURL != "" {
			return opts, false, usageError("--console-url needs a webhook (--notify-webhook-url, --notify-webhook-url-file) or --notify-smtp-addr")
		}
		return opts, false, nil
	}
	if url != "" {
		f, err := notify.ParseFormat(n.webhookFormat)
		if err != nil {
			return opts, false, usageError("--notify-webhook-format: %v", err)
		}
		if n.headersFile != "" {
			if _, err := os.Stat(n.headersFile); err != nil {
				return opts, false, usageError("--notify-headers-file: %v", err)
			}
		}
		opts.Webhooks = []notify.Webhook{{URL: url, HeadersFrom: n.headersFile, Format: f}}
	}
	if n.consoleURL != "" {
		if err := notify.ValidateConsoleURL(n.consoleURL); err != nil {
			return opts, false, usageError("--console-url: %v", err)
		}
	}
	opts.Email, opts.ConsoleURL, opts.AttemptTimeout = email, n.consoleURL, 10*time.Second
	if _, err := notify.New(opts); err != nil {
		// notify's errors name files and fields, never a webhook URL or a credential.
		return opts, false, usageError("notifications: %v", strings.TrimPrefix(err.Error(), "notify: "))
	}
	return opts, true, nil
}

// setupAnnouncer registers the BindingMoment announcer when a webhook or e-mail is configured;
// the notifier's counter actgate_notifications_total{result} goes on reg.
func setupAnnouncer(mgr ctrl.Manager, n notifyFlags, clk clock.PassiveClock, reg prometheus.Registerer, log logr.Logger) error {
	opts, ok, err := n.options()
	if err != nil || !ok {
		return err
	}
	opts.Registerer, opts.Log = reg, log.WithName("notify")
	notifier, err := notify.New(opts)
	if err != nil {
		return managerFailed("notifications: %v", err)
	}
	if err := (&controllers.BindingMomentAnnouncer{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Notifier: notifier, Clock: clk,
	}).SetupWithManager(mgr); err != nil {
		return managerFailed("BindingMoment announcer: %v", err)
	}
	return nil
}
