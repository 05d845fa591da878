// Package notify announces pending binding moments to outgoing webhooks.
//
// A Notifier is a sink.Observer: MomentEmitted queues an announcement (only that method does
// work) and worker goroutines POST a Slack-compatible JSON body (`text` plus `blocks`) to every
// configured webhook, with exponential backoff and jitter on network errors, 5xx and 429
// (Retry-After honoured, capped), no retry on any other 4xx, a bounded number of attempts and a
// per-attempt timeout.
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
//
// The queue is bounded; when it is full the announcement is dropped with a log line naming
// the moment id and envelope digest, and counted. Counts are available from Stats and, when a
// prometheus.Registerer is given, as actgate_notifications_total{result}. Header files (for
// example a bearer token) are read for every delivery so they can be rotated in place; their
// values are never logged.
//
// The standalone gate (`actgate serve`, notifications: in its config) and the cluster manager
// (which announces a BindingMoment when it first becomes pending) both use this package.
package notify
