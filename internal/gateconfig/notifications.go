package gateconfig

import (
	"fmt"

	"github.com/actgate/actgate/internal/notify"
)

// Notifications announces every pending binding moment to outgoing webhooks
// (internal/notify): a Slack-compatible body with the synopsis, the principal(s), the tool,
// server and class, the moment id, the expiry and a console link — never the options, and tool
// arguments only to a webhook with includeCalls (envelope-04 §8.4).
type Notifications struct {
	// ConsoleURL is the link an announcement carries: a URL template in which "{id}" is
	// replaced by the moment id, for example "http://127.0.0.1:8788/console?moment={id}";
	// without "{id}", "#moment-{id}" is appended. Optional (no link).
	ConsoleURL string `json:"consoleURL,omitempty"`
	// Webhooks receive the announcements. At least one.
	Webhooks []Webhook `json:"webhooks"`
}

// Webhook is one receiver of announcements.
type Webhook struct {
	// URL receives a JSON POST. https, or http to a loopback host only.
	URL string `json:"url"`
	// HeadersFrom is a file of "Name: value" lines sent with every request (for example
	// "Authorization: Bearer …"), read on every delivery; relative to the config file.
	// Optional.
	HeadersFrom string `json:"headersFrom,omitempty"`
	// IncludeCalls adds to this webhook's announcements the exact call each option runs
	// (tool, server, arguments; maskArguments applied). Off by default: set it only for a
	// receiver that is the principal's own surface, never a shared channel.
	IncludeCalls bool `json:"includeCalls,omitempty"`
}

// validateNotifications checks n and resolves its paths.
func (c *Config) validateNotifications(bad func(field, format string, args ...any)) {
	n := c.Notifications
	if n == nil {
		return
	}
	if len(n.Webhooks) == 0 {
		bad("notifications.webhooks", "at least one webhook is required (or remove notifications)")
	}
	if n.ConsoleURL != "" {
		if err := notify.ValidateConsoleURL(n.ConsoleURL); err != nil {
			bad("notifications.consoleURL", "%v", err)
		}
	}
	seen := map[string]bool{}
	for i := range n.Webhooks {
		w := &n.Webhooks[i]
		f := fmt.Sprintf("notifications.webhooks[%d]", i)
		switch err := notify.ValidateURL(w.URL); {
		case w.URL == "":
			bad(f+".url", "required")
		case err != nil:
			bad(f+".url", "%v", err)
		case seen[w.URL]:
			bad(f+".url", "duplicate webhook")
		}
		seen[w.URL] = true
		if w.HeadersFrom != "" {
			w.HeadersFrom = c.resolve(w.HeadersFrom)
		}
	}
}

// NotifierOptions returns the internal/notify options of the notifications section; ok is
// false when the file configures none. The caller adds Log and Registerer.
func (c *Config) NotifierOptions() (opts notify.Options, ok bool) {
	n := c.Notifications
	if n == nil || len(n.Webhooks) == 0 {
		return notify.Options{}, false
	}
	opts.ConsoleURL = n.ConsoleURL
	for _, w := range n.Webhooks {
		opts.Webhooks = append(opts.Webhooks, notify.Webhook{URL: w.URL, HeadersFrom: w.HeadersFrom, IncludeCalls: w.IncludeCalls})
	}
	return opts, true
}
