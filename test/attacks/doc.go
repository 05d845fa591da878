// Package attacks is the attack table of docs/security.md "(c) The attack table": one table,
// TestAttacks, one row per attack, each mounted against real components and judged by the state of
// the world afterwards — the upstream's own invocation counter, the journal and the authority's
// state in the store, the binding moment's resolution, or what the API server refused and why.
//
//	T-A  prompt-injected recipient                  tool-use-binding §22, §12 INJECTED_EMAIL_SEND
//	T-B  parallel call smuggling                    tool-use-binding §22, §9
//	T-C  authority replay                           tool-use-binding §22, §16
//	T-D  MCP server swap                            tool-use-binding §22, §12 MCP_SERVER_SWAP
//	T-E  origin change                              tool-use-binding §22, §12 COMPUTER_USE_ORIGIN_CHANGE
//	     resolution replay, cross-session misbinding  envelope-04 §12.5
//	     option-map substitution                    envelope-04 §12.6
//	     canonicalization divergence                envelope-04 §12.7 (duplicate names, surrogates, big numbers)
//	     agent resolving its own moment             envelope-04 §12.4 (standalone gate and admission webhook)
//	     opt-out annotation by an agent             pod label/annotation and namespace label (webhook)
//	     Lease tampering by a principal without rights  RBAC on coordination.k8s.io Leases
//
// Standalone rows run the gate `actgate serve` runs (internal/standalone, through
// test/testutil/rig) with the MCP Go SDK's client as the agent and SDK servers
// (internal/mcpproxy/mcptest) as upstreams, over loopback, with testdata/actgate.yaml. Kubernetes rows share one envtest API
// server (test/envtest) with actgate's webhook configurations (config/webhook) served by a
// manager, and users authenticated by client certificates under real RBAC; they skip under
// -short, as every envtest test does.
//
// TestSecurityDocReferences keeps docs/security.md honest: every `pkg/path.TestName` it cites
// must name a test function that exists in that directory.
package attacks
