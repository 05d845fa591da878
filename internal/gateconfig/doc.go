// Package gateconfig is the configuration file of the standalone gate, `actgate serve`: where it
// listens, where it keeps its state, who the agent and the principals are, the credentials it
// presents to upstream servers, and the policy (a v1alpha1.ToolPolicySpec, the same Go type as
// the ToolPolicy CRD's spec).
//
// A file looks like this (testdata/gate/actgate.yaml in the repository is a complete one):
//
//	listen: 127.0.0.1:8787          # loopback only; the default
//	dataDir: ./actgate-data         # store, receipt log, keys and principal tokens
//	sinkID: actgate-local           # bound into every authority; the default
//	agent:
//	  name: local-agent             # the identity acts are attributed to
//	  trustDeclaredProvenance: true # honour the MCP client's declared instruction provenance
//	  tokenFile: ./agent.token      # the agent's bearer token; default dataDir/agents/NAME.token
//	agents:                         # more agents, each with its own token (optional)
//	- name: research-agent
//	limits:                         # what agents can make the gate hold (agents.go); optional
//	  sessions: 256
//	  pendingMomentsPerAgent: 64
//	principals:                     # who may resolve binding moments here
//	- name: alice
//	upstreams:
//	- server: bank                  # a policy.servers[].name
//	  bearerTokenFile: ./bank.token # presented only on the gate→upstream leg
//	callTimeout: 60s
//	momentTTL: 15m                  # how long a binding moment awaits its principals
//	notifications:                  # announce pending moments (internal/notify); optional
//	  consoleURL: "http://127.0.0.1:8788/console?moment={id}"
//	  webhooks:
//	  - url: https://hooks.slack.com/services/T000/B000/XXXX # https, or http to loopback
//	    headersFrom: ./hook.headers # "Name: value" lines, read per delivery, never logged
//	policy:                         # a ToolPolicySpec
//	  podSelector: {}
//	  servers: [...]
//	  rules: [...]
//
// Parsing is strict, as for the policy file (internal/policy.ParseSpec): one YAML document,
// no duplicate keys, no unknown fields anywhere (including inside policy), field names matched
// case-sensitively. Every error names the field it is about (e.g. "policy.servers[0].url",
// "upstreams[1].server"). Relative paths are resolved against the directory of the file.
//
// # Agents
//
// Every request to the gate's MCP endpoints carries a configured agent's token (Authorization:
// Bearer), unless agent.authentication is "none": the token file is the agent's credential, as
// a principal's token file is the principal's, so a process of another local user is not taken
// for the agent. The agent a session was opened with is the identity of its acts and moments.
//
// # Principals in embedded mode
//
// In Kubernetes a principal is a Kubernetes user and admission checks who writes a
// resolution. On a laptop there is no API server, so each configured principal gets a random
// token in DataDir/principals/NAME.token (mode 0600, created on first start, in a directory of
// mode 0700): only a user who can read that file can resolve as that principal, through the
// gate's local HTTP API (`actgate resolve --as NAME`). The agent's identity can never be a
// principal (docs/architecture.md "Principals").
package gateconfig
