// Command actgate is the gate binary. Its subcommands are serve (the standalone
// gate on its embedded store), demo, moments, resolve, console (the web console, on
// loopback), receipts verify, sidecar (the finality sink in a pod), doctor (what serve
// needs: config, data dir, upstreams, principals), policy test and
// policy explain (a policy's decisions, offline, by the gate's own evaluation), and tools
// digest, list and accept (pinned tool definitions, docs/api.md "Pinned tool definitions"); see
// docs/operations.md. It links no Kubernetes client: the manager and the authority
// service are cmd/actgate-controlplane, in the same image. Besides the gate itself it carries the
// protocol CLI every other part digests through; its behaviour is a public interface and
// is kept stable:
//
//	actgate jcs [--strict]                  stdin JSON → RFC 8785 canonical bytes (no newline added)
//	actgate digest [--strict]               stdin JSON → sha256:<hex> of its canonical bytes
//	actgate action-digest --tool NAME [--strict]
//	                                        stdin argument object → digest of {"tool":NAME,"args":ARGS}
//	actgate envelope validate [--profile]   stdin envelope → "valid sha256:<hex>"
//	actgate envelope digest                 stdin envelope → sha256:<hex> (envelope-04 §6)
//	actgate envelope render [--format text] stdin envelope → the §9 rendering
//	actgate resolution check --envelope FILE --action FILE [--tool NAME]
//	                                        stdin resolution → authority for that action or not
//	                                        (the action is any JSON value; with --tool, FILE
//	                                        holds the arguments of {"tool":NAME,"args":...})
//
// Modes. jcs and digest use full RFC 8785 by default and the strict profile of
// envelope-04 §6.3 with --strict. action-digest defaults to full RFC 8785, the mode of
// EP-TOOL-CALL-BINDING-v1, so its digests agree with other implementations for any
// arguments; --strict gives the digest an envelope option carries (a human-bound action),
// and refuses arguments outside the profile. For arguments inside the profile the two
// modes give the same digest. Envelopes, resolutions and action files are always read
// under the strict profile.
//
// The envelope commands read either a bare envelope or an MCP tool result whose top-level
// binding_moment member holds one (envelope-04 §8.1). validate, digest and resolution check
// accept every envelope envelope-04 accepts; render (and validate --profile) also applies
// the actgate profile, the limits of what actgate shows a principal (docs/api.md).
//
// Exit status, the same for every command:
//
//	0  success; for resolution check, the resolution is authority for the action
//	1  input rejected (not JSON, outside the profile, or not a well-formed envelope,
//	   resolution or action); stderr has one line per reason, beginning with its code
//	2  usage: unknown command or flag, missing flag, unreadable file (line begins USAGE)
//	3  resolution check only: the inputs are well formed but the resolution is not
//	   authority for the action: an answer, question or declined resolution (the line
//	   names the kind), another envelope, an option out of range, or an action whose
//	   digest differs from the selected option's action_digest
package main
