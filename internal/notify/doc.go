// Package notify announces pending binding moments to outgoing webhooks and by e-mail.
//
// A Notifier is a sink.Observer: MomentEmitted queues an announcement (only that method does
// work) and worker goroutines POST it to every configured webhook in the webhook's Format —
// Slack (`text` plus Block Kit `blocks`, the default), Teams (an incoming-webhook message
// holding one Adaptive Card) or generic (plain JSON, Announcement) — with exponential backoff
// and jitter on network errors, 5xx and 429 (Retry-After honoured, capped), no retry on any
// other 4xx, a bounded number of attempts and a per-attempt timeout. With Options.Email it also
// mails each principal the moment names (Email: SMTP with STARTTLS always required, AUTH PLAIN
// from a file, the address from a map, a file or the principal minus a prefix), retried on
// network errors and 4xx replies with the same backoff. No format offers a decision: the only
// action in any of them is a link to the moment's page (docs/operations.md "Notifications:
// Slack, Teams and e-mail").
//
// An announcement is not the binding moment. envelope-04 §8.4 makes the envelope a one-to-one
// delivery to the principal's own surface, not a broadcast, so the body carries only what tells
// the principal that a decision waits and where to make it: the synopsis (envelope-04 §5.1, text
// written for the principal), the principal(s), the agent, the tool, server and consequence
// class, the moment id, the envelope digest, the expiry and a link to the console. It is built
// from Moment fields alone, which carry no options and no action: a webhook receiver can never
// resolve a moment. Tool arguments reach a webhook only when it opts in (Webhook.IncludeCalls,
// `includeCalls: true`): it then also receives a "calls" section with the exact call each
// option runs, as the gate holds it (policy masks applied, each call bounded and a cut marked).
// Opt in only for a receiver that is the principal's own surface, such as a direct message.
// A mail never carries the calls, whatever a webhook opted into.
//
// The queue is bounded; when it is full the announcement is dropped with a log line naming
// the moment id and envelope digest, and counted. Counts are available from Stats and, when a
// prometheus.Registerer is given, as actgate_notifications_total{result}: one outcome per
// webhook and per principal's mail (the metric has no channel label; the log lines name the
// channel). Header and credentials files are read for every delivery so they can be rotated in
// place; their values are never logged.
//
// The standalone gate (`actgate serve`, notifications: in its config) and the cluster manager
// (which announces a BindingMoment when it first becomes pending) both use this package.
package notify
