// Package rig holds the parts the in-process test rigs (test/attacks, test/conformance) share:
// the standalone gate of internal/standalone served on a loopback port, the three MCP servers of
// their policy, and the agent's side (an MCP client session, one tools/call, the checks of a
// refusal). It is a package of its own, apart from test/testutil, because it imports the gate:
// the internal packages whose own tests import test/testutil could not import it back.
package rig
