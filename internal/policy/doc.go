// Package policy evaluates ToolPolicy: given one tool call as the sink observed it, it says
// whether the call runs on the hot path (Allow), needs a single-use machine authority (Permit),
// needs named humans to commit it through a binding moment (Escalate), or is refused (Deny),
// with the EF code the agent sees. It is the relying party's local policy and AEC requirement
// of action-evidence-boundary ("Relying-Party Inputs and Pins", "Evaluate AEC Evidence
// Satisfaction"); issuing, verifying and consuming authority are internal/authority's and
// internal/sink's.
//
// # Compiling
//
// Compile checks a ToolPolicySpec the way the API server would (bounds, enums, names) plus what
// it cannot (CEL, globs, cross references), and compiles every CEL expression once, so that
// evaluation does no parsing of policy. It lists every problem with its field path and a Reason
// that is the ToolPolicy Accepted condition reason (InvalidCEL, UnknownServer, InvalidSpec).
// LoadFile/ParseSpec read the standalone gate's policy file strictly.
//
// # Evaluating
//
// Compiled.Evaluate runs an ordered chain of checks in the shape of cert-manager's certificate
// policy chains; the first that fails decides, and each is commented in enforceChain with the
// section it comes from:
//
//  1. the context is live (timeout or cancel: Deny EF_060; tool-use-binding §16 MUST 5);
//  2. the server is listed in the policy (else Deny EF_UNKNOWN_TOOL);
//  3. a rule matches: the FIRST rule in spec.rules order whose servers (empty = all) and tool
//     globs match governs the call; none matching is Deny EF_UNKNOWN_TOOL (docs/architecture.md
//     "Fail closed");
//  4. the arguments are a JSON object (else Deny EF_ACT_INVALID);
//  5. the destination: the live destination must be the server's URL (origin and path), or,
//     when the rule has destinations, one of them (a server name stands for its URL, an origin
//     for any path at it); else
//     Deny EF_DESTINATION_MISMATCH (§12 MCP_SERVER_SWAP, COMPUTER_USE_ORIGIN_CHANGE; §22 T-D,
//     T-E);
//  6. the class is the rule's consequenceClass, else the mapper's (Request.Class), else
//     act.DefaultClass; role None is raised to PolicyPermit for FINANCIAL, PHYSICAL and
//     NETWORK_CONTROL (the latest draft's fail-closed threshold);
//  7. provenance rules, first match wins: Deny is EF_INSTRUCTION_PROVENANCE_FAILURE (§12
//     INJECTED_EMAIL_SEND, §22 T-A); Escalate requires HumanAuthorization. Unknown provenance
//     ("" or an unrecognised value) matches every source of every provenance rule: it is
//     treated as the least trusted source the rule lists;
//  8. every CEL argument constraint is true; false, an error, a non-bool or an exceeded cost
//     limit is Deny EF_POLICY_DENIED with the constraint's message (§22 T-B);
//  9. a call needing a human has strict-profile arguments (else Deny
//     EF_ARGUMENTS_OUT_OF_PROFILE; docs/architecture.md "Digests");
//  10. a call needing a human has at least minPrincipals principals left after removing the
//     initiating agent and, under separation of duties, the policy's sink (else Deny
//     EF_POLICY_DENIED: the escalation could never resolve).
//
// Then the evidence role decides: None → Allow, PolicyPermit → Permit, HumanAuthorization →
// Escalate with EF_ESCALATION_REQUIRED, the principals, minPrincipals, separation of duties and
// the rule's alternatives. Defaults: authority TTL 60s (rule overrides spec), minPrincipals 1,
// separationOfDuties true.
//
// In mode Audit the same decision is computed and reported in AuditOutcome, Code, Message and
// WouldDeny while Outcome is Allow. Audit is observation and nothing in this package calls it
// enforcement.
//
// # CEL
//
// Expressions see one variable, args, the call's arguments as map(string, dyn), with the
// standard library, the strings extension, optional types and cross-type numeric comparisons.
// An expression must type-check to bool. Integer literals in the arguments become CEL int
// (int64) exactly, or deny when outside int64; other numbers become double; decimal strings
// stay strings (compare them with double(args.x); int() of "10.00" is an error and so a deny).
// Note that int() of a double truncates: int(10000.9) <= 10000 holds, so cap non-integer
// amounts with double(). Each evaluation is bounded by CostLimit and by the context.
//
// # Destinations
//
// Destinations are compared by origin (scheme://host[:port], scheme and host lowercased,
// default port dropped) and, against a server's URL (the server's own, or a server named in a
// rule's destinations), by path too: an MCP server is one URL, so another path at the same
// origin is another server (tool-use-binding §13). An origin in a rule's destinations admits
// any path at it (a page of the authorised site, §12 COMPUTER_USE_ORIGIN_CHANGE). Query,
// fragment and user information are not part of a destination; paths are compared as written
// (escaped, case-sensitive, an empty path is "/"). Host spellings are not folded (no DNS, no
// IDNA, no trailing-dot removal), so a different spelling is a mismatch.
//
// # Human authorization
//
// The sink counts BindingMoment resolutions with ValidResolver, EligiblePrincipals, Satisfied
// and MinPrincipals. The initiating agent never counts (docs/architecture.md "Principals"); the
// executing sink does not count under separation of duties.
//
// # Sets
//
// Set holds the compiled policies the authority service serves and finds the one governing a
// pod's call to a server. None is Deny EF_UNKNOWN_TOOL; more than one is ErrAmbiguous and Deny
// EF_POLICY_DENIED: conflicting configuration fails closed.
//
// Evaluation is pure (no I/O, no clock), safe for concurrent use, and does not panic on any
// Request.
package policy
