// Package envelope implements the binding-moment envelope of
// draft-morrison-binding-moment-envelope-04 ("envelope-04"): the eight-slot
// briefing-and-binding payload an agent emits when a human principal must commit a
// decision, its JCS/SHA-256 digest, the resolution a principal returns, and the check
// that turns a resolution into authority for exactly one action.
//
// Everything that reads untrusted bytes goes through internal/jcs in its strict profile
// (envelope-04 §6.3) on the raw bytes first, so duplicate member names, unpaired
// surrogates, out-of-profile numbers and excessive nesting are rejected before anything
// is decoded. The decoded value is then checked for its exact member set; every reason a
// document is rejected is reported as a [Problem] with a stable [Code] and a JSON path,
// collected in a [*ValidationError].
//
// Two grammars are kept apart. envelope-04 decides what is well formed: [ParseSpec],
// [ParseDocumentSpec] and [ParseResolutionSpec] check that and nothing more (besides the
// read bounds MaxDocumentBytes and MaxResolutionBytes), and an envelope they accept is
// digested. The actgate profile decides what actgate renders or sends: bounded,
// single-line, non-empty text, at most MaxFindings findings and MaxRecommendations
// recommendations, no two options with one label or one action_digest, a bounded answer.
// [Parse], [ParseDocument], [FromToolResult], [ParseResolution], [Build] and every
// [Renderer] apply both; a document they refuse only under the profile is reported with
// profile codes ([Code.Profile], [ValidationError.ProfileOnly]), never as malformed.
//
// The pieces, in the order a binding moment lives through them:
//
//   - [Build] constructs an envelope from Go values; each option names a concrete tool call
//     and its action_digest is computed here, never accepted from the caller (§5.6, §12.6).
//   - [Parse], [ParseDocument] and [FromToolResult] read an envelope from bytes: bare, or as
//     the top-level binding_moment member of an MCP tool result (§8.1), falling back to the
//     conventional payload when the envelope is not rendered (§9.3, §12.8).
//   - [Envelope] is immutable once validated; [Envelope.Digest] names it (§6).
//   - [TextRenderer] renders it for an agent-runtime hook keeping every §9.1 invariant; the
//     [Renderer] interface leaves room for terminal and HTML renderers. For a principal's
//     surface it also shows, under each option, the [Call] that option authorises as the gate
//     holds it ("Runs (verified by actgate)"), after [CheckCalls] has matched every unmasked
//     call to its option's action_digest, with the slots attributed to their author; the
//     label is the agent's words, the call is what runs. [CallLines] bounds a call for a
//     terminal and marks every cut.
//   - [ParseResolution] reads the principal's answer (§7.3) and [Verify] checks it against
//     the envelope it names; a [Registry] ([MemoryRegistry]) records one resolution per
//     envelope with the principal who made it and refuses unknown, expired, misrouted or
//     already resolved envelopes (§12.4, §12.5).
//   - [Authorize] grants authority only for an option resolution whose option's
//     action_digest equals the digest recomputed from the action about to run (§7.3,
//     §12.6). The action is any JSON value ([ParseAction]); a tool call is the action
//     {"tool","args"} ([ToolCall], [AuthorizeCall]). Authorize does not consume anything:
//     single use is internal/authority's job.
//
// The numbers of the profile are the Max* constants (see [MaxTextRunes]); docs/api.md lists
// which well-formed envelopes actgate refuses and with which code.
package envelope
