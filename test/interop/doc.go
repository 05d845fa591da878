// Package interop runs official MCP software that nobody here wrote through `actgate serve` and
// compares it with talking to the same servers directly: the conformance suite's server scenarios
// (@modelcontextprotocol/conformance) against @modelcontextprotocol/server-everything and
// reference2025.mjs (the suite's own stateful 2025-11-25 server, written with the TypeScript SDK
// v1 to the scenarios' stated requirements), and a feature walk of both with the official TypeScript SDK
// client (walk.mjs). Every tool is allowed (testdata/actgate.yaml), so the gate is
// meant to be invisible except for its documented additions to tools/list; each difference it
// still makes is named, with the reason, in knownDifferences and in docs/api.md "MCP through the
// gate". The tests log one table per run (scenario or feature × direct/gated: same/differs).
//
// The conformance suite's 0.2.0 pre-release (npm alias conformance-next) runs the scenarios
// the 2026-07-28 revision requires against server2026.mjs (the suite's own 2026-07-28 server,
// written with the TypeScript SDK v2 to the scenarios' stated requirements) directly and through
// the gate in front of it and of the same server serving only the 2025 revisions, and the
// scenarios 2025-11-25 requires against reference2025.mjs. walk2.mjs walks the TypeScript SDK
// v2 client in each revision a server speaks, compared the same way, and the MCP Inspector CLI
// reaches server-everything through the gate at /{server}/mcp (inspector_test.go).
// TestWalk2026 runs the v2 client pinned to 2026-07-28 (walk2026.mjs) in front of a Go SDK
// 2026-07-28 server and a stateful one, and checks the gate's decisions on the way.
//
// The npm packages are pinned in package-lock.json and installed by hack/interop.sh (`make
// test` runs it first); without them the tests fail and say so.
package interop
