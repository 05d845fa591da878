// Package console is the binding-moment web console: one page, served on loopback only, on
// which a principal sees the binding moments addressed to them and resolves each with one of
// the four resolutions of envelope-04 §7.3.
//
// The page is rendered on the server from html/template with embedded CSS and a few lines of
// embedded JavaScript (embed.FS): no CDN, no web fonts, nothing fetched from elsewhere, and
// every affordance is a plain form, so the page works offline and with scripts off. Each
// moment keeps every invariant of envelope-04 §9.1 — the four briefing slots, the recommended
// option visibly distinct (a class and a "Recommended" label, not colour alone), the
// reasoning with each option, an affordance for each hatch that is true, and a Decline
// button — beside the facts of the act it decides (tool, server, consequence class, action
// digest). Inside each option a framed "Runs (verified by actgate)" block shows the exact call
// the option authorises (Moment.Calls, the backend's record, checked against the option's
// digest), whole and scrollable; an agent's labels and reasoning are marked as the agent's. A
// moment whose envelope was discarded as malformed, or whose calls are missing or are not its
// options' (CodeCallsMismatch), shows its conventional payload as text with a diagnostic
// listing the problem codes, and offers no decision (§9.3, §12.8).
//
// Where moments come from and where a resolution goes is a Backend: the standalone gate's
// local moments API (cmd/actgate) or BindingMoment objects read and written with the user's
// kubeconfig (internal/kubectlplugin), so the console never holds authority of its own — it
// resolves as the principal whose credential the process was started with, on a surface bound
// to that principal (§12.4), and a refusal (the webhook's admission denial, the gate's
// answer) is shown as the backend gave it.
//
// The console listens on a loopback address only (Listen refuses anything else). The URL it
// prints carries a per-process random key as its first path segment (/KEY/): the page and the
// resolution POST live under it, so another user of the same machine who can reach the
// loopback port cannot use the console. The key is never put in a cookie, because cookies are
// scoped by host and not by port: any other listener on the machine's loopback that the
// principal's browser visits would receive it. A POST must also carry the page's anti-CSRF
// token (a per-page nonce with its HMAC under a second key that never leaves the process, so
// not the console's key) and an Origin naming the console itself. Requests whose Host is not
// a loopback name are refused (DNS rebinding). The keyless root is a landing page whose
// script finds the key again in localStorage (isolated by origin, port included), so that an
// announcement's link to the root with a #moment-ID fragment opens the moment.
package console
