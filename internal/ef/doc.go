// Package ef names the EF ("execution finality") error codes that a deny carries to the agent.
//
// tool-use-binding §23: "EF codes from [I-D.das-agentic] SHOULD be copied into the vendor error
// payload as machine-readable strings. retryable=true only for EF-060 timeout where policy allows
// a bounded retry of *validation*, never a retry that skips enforce()."
//
// The codes here are every EF code the tool-use binding names (§12 worked denies, §17 host error
// object, §23 error mapping, §30 host wrappers), plus a few that actgate needs and the binding
// does not name; those are marked as actgate extensions. The binding's prose writes "EF-060" and
// its code samples write "EF_002"; the wire form here is always the underscore form, and Lookup
// accepts either spelling.
//
// The package holds only names, descriptions and the retryable bit: no behaviour, no state.
package ef
