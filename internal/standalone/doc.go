// Package standalone assembles and runs the standalone gate from a gate configuration
// (internal/gateconfig): the embedded store (boltstore, its in-flight dispatches recovered to
// INDETERMINATE before anything is served), the signed receipt log, the sink, one MCP proxy per
// server, the local moments API that `actgate moments`, `actgate resolve` and the web console
// speak, the notifier of pending moments, the reconciler of INDETERMINATE dispatches and the
// Prometheus metrics. It is the one runtime `actgate serve`, `actgate demo` and the test rigs
// run; the command keeps only its flags and its output.
//
// Open builds a Runtime on the configuration's dataDir, creating its keys and principal tokens
// (mode 0600) on first start; Serve answers on a listener until its context ends, then shuts
// down gracefully; ServeMetrics serves /metrics on metrics.address. See docs/architecture.md
// and docs/operations.md.
package standalone
