package mcpproxy

import "github.com/actgate/actgate/internal/mcpproxy/agent2025"

// Elicitation (docs/architecture.md "Elicitation") is the session revisions' part
// (internal/mcpproxy/agent2025, elicit.go). These are its types as the rest of the product
// names them (Config.Elicitation, Config.ElicitationTimeout).
type (
	// ElicitationPolicy says which consequence classes' binding moments may also be offered as
	// an MCP elicitation (agent2025.ElicitationPolicy); *policy.Compiled implements it.
	ElicitationPolicy = agent2025.ElicitationPolicy
	// MomentResolver is what an elicitation needs of the gate beyond Gate
	// (agent2025.MomentResolver); *sink.Gate implements it.
	MomentResolver = agent2025.MomentResolver
)

// MetaElicitation carries, in the result of a call that surfaced a binding moment, what became
// of the elicitation offered for it (agent2025.MetaElicitation).
const MetaElicitation = agent2025.MetaElicitation

// DefaultElicitationTimeout bounds how long a tools/call waits for the answer to an elicitation
// (agent2025.DefaultElicitationTimeout).
const DefaultElicitationTimeout = agent2025.DefaultElicitationTimeout
