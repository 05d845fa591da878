// Package reconcile is the client side of authenticated reconciliation: it asks a tool server's
// declared reconciliation endpoint what became of one INDETERMINATE operation, authenticates and
// strictly parses the answer, and judges it with the AEB decision engine (internal/aeb), so the
// Act controller moves an act to EXECUTED or FAILED only on an authenticated, matching, fresh,
// terminal answer (action-evidence-boundary, "Perform Authenticated Reconciliation"). It never
// calls the tool: a reconciliation query observes, it does not act.
//
// # Wire protocol (actgate-reconciliation-v1)
//
// The query is an HTTPS POST to ToolServer.reconciliation.url:
//
//	POST /operations HTTP/1.1
//	Authorization: Bearer <token>
//	Content-Type: application/json
//
//	{"actionDigest":"sha256:…","nonce":"<32 lowercase hex>","operationID":"op-…","server":"payments","tool":"send_payment"}
//
// The body is RFC 8785 canonical JSON. operationID is the idempotency key the sink forwarded at
// dispatch (Act status.operationID), actionDigest the digest of {"tool","args"} (Act
// spec.actionDigest), tool and server the Act's spec.tool and spec.server, and nonce 128 fresh
// random bits for this query only. The token is the value of the key the endpoint's
// credentialsSecretRef names.
//
// The endpoint answers 200 with a JSON object that echoes the five query members and adds its
// finding, and with a MAC over the exact body bytes:
//
//	HTTP/1.1 200 OK
//	Content-Type: application/json
//	Actgate-Reconciliation-Signature: v1=<64 lowercase hex>
//
//	{"actionDigest":"sha256:…","nonce":"…","operationID":"op-…","server":"payments","tool":"send_payment",
//	 "outcome":"EXECUTED","observedAt":"2026-11-29T15:04:05Z","evidence":{…}}
//
// outcome is EXECUTED (the exact effect occurred), FAILED (it did not occur) or UNKNOWN (no
// conclusive record); observedAt (RFC 3339) is when the provider made the observation; evidence
// is an optional JSON object for the provider's own references (a payment id, a ledger entry),
// carried into the evidence digest and otherwise not interpreted. No other member is accepted,
// member names are matched exactly (not case-insensitively), and duplicate names are refused.
//
// The signature is HMAC-SHA256 keyed with the response MAC key, a secret of at least 32 bytes
// shared by the endpoint and actgate, over the ASCII string "actgate-reconciliation-v1", one
// zero byte, and the body bytes exactly as sent:
//
//	v1=hex(HMAC-SHA256(key, "actgate-reconciliation-v1" || 0x00 || body))
//
// Why a MAC and not only TLS: TLS authenticates the channel to whatever terminates it (an
// ingress, a mesh proxy); the MAC authenticates the answer itself to the holder of the key, and
// the echoed nonce binds it to this query, so a recorded answer cannot be replayed for a later
// query. The bearer token authenticates actgate to the endpoint (AEB "Privacy Considerations":
// reconciliation queries should be authenticated, authorized and limited to the exact
// operation). The MAC key is a separate key from the token, so an endpoint that leaks or logs
// tokens does not let anyone forge answers.
//
// # Judging an answer
//
// Ask returns an error, and no answer, when the endpoint cannot be reached or does not say 200
// (Unreachable), when the server's TLS certificate does not verify or the MAC is missing or wrong
// (Unauthenticated), when an authenticated body is malformed (NoEvidence), or when an
// authenticated answer carries another nonce: a replayed answer to an earlier query (Stale).
// Judge then runs aeb.Reconcile over what Ask returned: an answer naming another operation,
// action digest, tool or server is Mismatch; one observed before the act existed, dated in the
// future, or older than the freshness window is Stale; UNKNOWN is NoEvidence; only EXECUTED or
// FAILED that passed everything settles the act, with EvidenceDigest, the digest of the
// canonical answer body. Every finding but Executed and Failed leaves the act INDETERMINATE.
//
// Redirects are not followed (the bearer token goes to the declared URL only), answers larger
// than MaxAnswerBytes are refused, and plain http is refused unless the Client allows it.
package reconcile
