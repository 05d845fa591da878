package controllers

// Event reasons. ToolPolicy rejections use the Accepted/Ready condition reasons themselves
// (InvalidCEL, UnknownServer, InvalidSpec, SecretNotFound).
const (
	// EventReconciledExecuted (Normal): authenticated reconciliation moved the act to EXECUTED.
	EventReconciledExecuted = "ReconciledExecuted"
	// EventReconciledFailed (Normal): authenticated reconciliation moved the act to FAILED.
	EventReconciledFailed = "ReconciledFailed"
	// EventReconciliationPrefix + a reconcile.Finding (Warning): an attempt that left the act
	// INDETERMINATE, e.g. ReconciliationUnauthenticated, ReconciliationMismatch,
	// ReconciliationStale, ReconciliationUnknown, ReconciliationMalformed,
	// ReconciliationUnreachable.
	EventReconciliationPrefix = "Reconciliation"
	// EventReconciliationNotConfigured (Warning): the act's server declares no usable
	// reconciliation endpoint (no policy, no server, no endpoint, missing Secret or key, a bad
	// URL); nothing was asked and the act stays INDETERMINATE.
	EventReconciliationNotConfigured = "ReconciliationNotConfigured"
	// EventAuthorityExpired (Normal): the act's authority expired unconsumed; the act is EXPIRED.
	EventAuthorityExpired = "AuthorityExpired"
	// EventEscalationExpired (Warning): every binding moment of an escalated act expired
	// unresolved; the act is denied.
	EventEscalationExpired = "EscalationExpired"
	// EventBindingMomentExpired (Normal): the binding moment expired unresolved.
	EventBindingMomentExpired = "Expired"
	// EventBindingMomentResolved (Normal): the principal's resolution was recorded.
	EventBindingMomentResolved = "Resolved"
	// EventDenied (Warning): the act was denied; the note carries the EF code, tool, server,
	// class and action digest, never arguments. Once per act (see ActReconciler.notify).
	EventDenied = "Denied"
	// EventIndeterminate (Warning): the act's outcome is unknown (INDETERMINATE) until
	// authenticated reconciliation; it is never retried. Once per act.
	EventIndeterminate = "Indeterminate"
	// EventDispatcherGone (Warning): an in-flight act was held INDETERMINATE because the pod
	// whose sidecar dispatched it is gone without reporting an outcome; the note names the pod.
	EventDispatcherGone = "DispatcherGone"
	// EventHatchDisabled (Warning): the binding moment's envelope disables an escape hatch
	// (envelope-04 §12.3), one Event per disabled hatch, when the moment is first recorded.
	EventHatchDisabled = "HatchDisabled"
)

// Event actions (events.k8s.io/v1 requires one).
const (
	actionCompile    = "Compile"
	actionCheck      = "CheckSecrets"
	actionReconcile  = "Reconcile"
	actionHold       = "HoldIndeterminate"
	actionExpire     = "Expire"
	actionDeny       = "Deny"
	actionRecord     = "RecordResolution"
	actionEmit       = "Emit"
	maxEventNoteSize = 1000 // events.k8s.io/v1 note is at most 1 kB
)

// ReasonInternalError is the reason of a condition set to Unknown because an observation failed
// (an API read that errored), in the style of Cluster API.
const ReasonInternalError = "InternalError"

// SecretKeyResponseMAC is the key, in the Secret a reconciliation endpoint's
// credentialsSecretRef names, of the response MAC key (at least 32 bytes; see
// internal/reconcile). The key the reference names holds the bearer token.
const SecretKeyResponseMAC = "response-mac-key"

// SecretKeyCA is the optional key, in the same Secret, of a PEM bundle of CA certificates that
// verify the endpoint's TLS certificate. Without it the manager's --reconcile-ca-file, or else
// the system roots, are used.
const SecretKeyCA = "ca.crt"

// note bounds an Event note.
func note(s string) string {
	return clip(s, maxEventNoteSize)
}

// clip shortens s to at most n bytes, ending in "…" when it cut, never inside a UTF-8 sequence.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
