// Package kubectlplugin is the kubectl plugin `kubectl actgate`: the principal's surface for the
// Act ledger and for binding moments (binding-moment-envelope-04, "envelope-04").
//
// kubectl finds the binary kubectl-actgate on PATH and runs it with the remaining arguments, so
// the plugin takes kubectl's connection flags itself (k8s.io/cli-runtime ConfigFlags:
// --kubeconfig, --context, -n, --as, …) and speaks to the API server as the current kubeconfig
// user. Its commands:
//
//	kubectl actgate acts [-A] [-o wide|json|yaml|name]     the ledger: tool, server, class, decision,
//	                                                       state, code, action digest, age
//	kubectl actgate moments [--all] [-A] [-o …]            pending binding moments whose principal is
//	                                                       me (a SelfSubjectReview says who "me" is)
//	kubectl actgate show NAME                              the envelope with every §9.1 invariant, and
//	                                                       the act's tool, server, class, action digest
//	kubectl actgate resolve NAME --option N | --answer TEXT | --question | --decline
//	kubectl actgate resolve NAME                           in a terminal: the arrow-key picker (§9.2)
//	kubectl actgate pick [NAME]                            the picker
//	kubectl actgate console [-n NS] [--address A] [--open]  the web console (internal/console), on
//	                                                       loopback, resolving as the kubeconfig user
//	kubectl actgate doctor [-n NS] [POD]                   what a governed pod needs, checked read-only:
//	                                                       policy, authority service, service account,
//	                                                       sidecar version and readiness, upstreams
//	                                                       (docs/operations.md "Troubleshooting a pod that does not start")
//	kubectl actgate tools accept TOOL --server S [-n NS] [--policy P] [--digest D]
//	                                                       accept a pinned tool's changed definition:
//	                                                       status.toolChanges → status.toolPins
//	                                                       (docs/api.md "Pinned tool definitions")
//
// What is shown is what the digest names. An envelope is parsed from spec.envelope under the
// strict profile (internal/envelope) and must reproduce spec.envelopeDigest and spec.synopsis;
// otherwise it is discarded and shown in the fallback form with a diagnostic, never as a decision
// (§4, §9.3, §12.8), and it cannot be resolved. Each option is shown with the call it runs,
// from spec.calls, under "Runs (verified by actgate)"; calls that do not hash to the options'
// digests discard the moment (BM_CALLS_MISMATCH), and a moment without spec.calls is shown with
// a warning and none of its options can be chosen (ErrCallsNotShown). Tables show the envelope's
// synopsis, not the spec copy, and every string that did not pass the envelope profile is made
// terminal-safe.
//
// A resolution (§7.3) always names the envelope digest and is written to spec.resolution with a
// JSON merge patch that carries the resourceVersion read, so two concurrent resolutions conflict
// (409) instead of the later overwriting the earlier (as client-go's leaselock does). Only the
// principal may write it; the BindingMoment admission webhook enforces that
// (docs/architecture.md "Principals"), and the plugin surfaces its denial verbatim, adding who the
// moment is addressed to and who the server says the caller is.
//
// The picker is a pure state machine ([picker.Key]) over decoded keys ([decodeKeys]) with a
// pure view ([picker.View]); the terminal loop around them (raw mode via golang.org/x/term) is
// thin. Exit statuses are the Exit* constants.
package kubectlplugin
