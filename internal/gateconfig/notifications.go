package gateconfig

import (
	"fmt"
	"net"
	"sort"
	"strings"

	"github.com/actgate/actgate/internal/notify"
)

// Notifications announces every pending binding moment to outgoing webhooks and by e-mail
// (internal/notify): the synopsis, the principal(s), the tool, server and class, the moment id,
// the expiry and a link to the moment's page — never the options, and tool arguments only to a
// webhook with includeCalls, never by e-mail (envelope-04 §8.4).
type Notifications struct {
	// ConsoleURL is the link an announcement carries: a URL template in which "{id}" is
	// replaced by the moment id, for example "http://127.0.0.1:8788/console?moment={id}";
	// without "{id}", "#moment-{id}" is appended. Optional (no link).
	ConsoleURL string `json:"consoleURL,omitempty"`
	// Webhooks receive the announcements. At least one webhook or email.
	Webhooks []Webhook `json:"webhooks,omitempty"`
	// Email mails each announcement to the principals the moment names. Optional.
	Email *Email `json:"email,omitempty"`
}

// Email is the e-mail notifier (notify.Email): SMTP with STARTTLS always required.
type Email struct {
	// Addr is the SMTP server, host:port (submission, usually 587).
	Addr string `json:"addr"`
	// ServerName is the name its certificate must carry; default the host of addr.
	ServerName string `json:"serverName,omitempty"`
	// CAFile is a PEM bundle of the CAs that may sign its certificate (default the system
	// roots); relative to the config file.
	CAFile string `json:"caFile,omitempty"`
	// AuthFile holds the AUTH PLAIN username (first line) and password (second line), read on
	// every delivery; relative to the config file. Optional (no AUTH).
	AuthFile string `json:"authFile,omitempty"`
	// From is the sender's address.
	From string `json:"from"`
	// Recipients maps a principal to its address.
	Recipients map[string]string `json:"recipients,omitempty"`
	// RecipientsFile holds more "PRINCIPAL ADDRESS" lines, read on every delivery (its entries
	// win); relative to the config file.
	RecipientsFile string `json:"recipientsFile,omitempty"`
	// StripPrefix derives the address of a principal no mapping names: "PREFIX" + address.
	StripPrefix string `json:"stripPrefix,omitempty"`
	// HTML adds a simple HTML part to the text/plain body.
	HTML bool `json:"html,omitempty"`
}

// Webhook is one receiver of announcements.
type Webhook struct {
	// URL receives a JSON POST. https, or http to a loopback host only.
	URL string `json:"url"`
	// HeadersFrom is a file of "Name: value" lines sent with every request (for example
	// "Authorization: Bearer …"), read on every delivery; relative to the config file.
	// Optional.
	HeadersFrom string `json:"headersFrom,omitempty"`
	// Format is the body: slack (the default), teams or generic.
	Format string `json:"format,omitempty"`
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
	if len(n.Webhooks) == 0 && n.Email == nil {
		bad("notifications.webhooks", "at least one webhook or an email section is required (or remove notifications)")
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
		if _, err := notify.ParseFormat(w.Format); err != nil {
			bad(f+".format", "%v", err)
		}
	}
	if n.Email != nil {
		c.validateEmail(n.Email, bad)
	}
}

// validateEmail checks the email section and resolves its paths; the files themselves are
// read when the notifier starts.
func (c *Config) validateEmail(e *Email, bad func(field, format string, args ...any)) {
	const f = "notifications.email"
	if host, port, err := net.SplitHostPort(e.Addr); err != nil || host == "" || port == "" {
		bad(f+".addr", "want host:port")
	}
	if err := notify.ValidateAddress(e.From); err != nil {
		bad(f+".from", "%v", err)
	}
	if len(e.Recipients) == 0 && e.RecipientsFile == "" && e.StripPrefix == "" {
		bad(f, "recipients, recipientsFile or stripPrefix is required: nobody would get a mail")
	}
	principals := make([]string, 0, len(e.Recipients))
	for p := range e.Recipients {
		principals = append(principals, p)
	}
	sort.Strings(principals)
	for _, p := range principals {
		if err := notify.ValidateAddress(e.Recipients[p]); err != nil {
			bad(fmt.Sprintf("%s.recipients[%q]", f, p), "%v", err)
		}
	}
	for _, p := range []*string{&e.CAFile, &e.AuthFile, &e.RecipientsFile} {
		if *p != "" {
			*p = c.resolve(*p)
		}
	}
}

// NotifierOptions returns the internal/notify options of the notifications section; ok is
// false when the file configures none. The caller adds Log and Registerer.
func (c *Config) NotifierOptions() (opts notify.Options, ok bool) {
	n := c.Notifications
	if n == nil || (len(n.Webhooks) == 0 && n.Email == nil) {
		return notify.Options{}, false
	}
	opts.ConsoleURL = n.ConsoleURL
	if opts.ConsoleURL == "" && c.Approval != nil {
		// The approval page opens the moment of an announcement's #moment-ID link after sign-in.
		opts.ConsoleURL = strings.TrimSuffix(c.Approval.ExternalURL, "/") + "/"
	}
	for _, w := range n.Webhooks {
		opts.Webhooks = append(opts.Webhooks, notify.Webhook{URL: w.URL, HeadersFrom: w.HeadersFrom, IncludeCalls: w.IncludeCalls, Format: notify.Format(w.Format)})
	}
	if e := n.Email; e != nil {
		opts.Email = &notify.Email{
			Addr: e.Addr, ServerName: e.ServerName, CAFile: e.CAFile, AuthFile: e.AuthFile, From: e.From,
			Recipients: e.Recipients, RecipientsFile: e.RecipientsFile, StripPrefix: e.StripPrefix, HTML: e.HTML,
		}
	}
	return opts, true
}
