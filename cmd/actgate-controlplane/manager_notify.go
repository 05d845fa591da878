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

// notifyFlags announce pending BindingMoments to a webhook (controllers.BindingMomentAnnouncer).
type notifyFlags struct {
	webhookURL, webhookURLFile, headersFile, consoleURL string
}

func (n *notifyFlags) register(f *pflag.FlagSet) {
	f.StringVar(&n.webhookURL, "notify-webhook-url", "", "announce every pending BindingMoment once to this webhook (Slack-compatible JSON; https, or http to loopback)")
	f.StringVar(&n.webhookURLFile, "notify-webhook-url-file", "",
		"file holding the webhook URL (a mounted Secret: a Slack webhook URL is a credential); instead of --notify-webhook-url")
	f.StringVar(&n.headersFile, "notify-headers-file", "", `file of "Name: value" lines sent with every announcement (e.g. Authorization), read per delivery, never logged`)
	f.StringVar(&n.consoleURL, "console-url", "", `console link in announcements: "{id}" becomes the moment's namespace/name (default: no link)`)
}

// webhook returns the configured webhook URL ("" when notifications are off).
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
	if n.headersFile != "" || n.consoleURL != "" {
		return "", usageError("--notify-headers-file and --console-url need --notify-webhook-url or --notify-webhook-url-file")
	}
	return "", nil
}

// setupAnnouncer registers the BindingMoment announcer when a webhook is configured; the
// notifier's counter actgate_notifications_total{result} goes on reg.
func setupAnnouncer(mgr ctrl.Manager, n notifyFlags, clk clock.PassiveClock, reg prometheus.Registerer, log logr.Logger) error {
	url, err := n.webhook()
	if err != nil || url == "" {
		return err
	}
	if n.headersFile != "" {
		if _, err := os.Stat(n.headersFile); err != nil {
			return usageError("--notify-headers-file: %v", err)
		}
	}
	if n.consoleURL != "" {
		if err := notify.ValidateConsoleURL(n.consoleURL); err != nil {
			return usageError("--console-url: %v", err)
		}
	}
	notifier, err := notify.New(notify.Options{
		Webhooks:   []notify.Webhook{{URL: url, HeadersFrom: n.headersFile}},
		ConsoleURL: n.consoleURL, Registerer: reg, Log: log.WithName("notify"),
		AttemptTimeout: 10 * time.Second,
	})
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
