package wire

// What both revisions' agent sides share of the wire.

import (
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/actgate/actgate/internal/ef"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// CallSeq numbers the requests the gate sends upstream under ids of its own ("actgate-N" and
// the like, on either revision): unique in the process, so that no id an agent chooses names
// another agent's request upstream; the SDK client on a session numbers its own, so the two
// never collide.
var CallSeq atomic.Uint64

// StatefulVersions are the protocol versions the SDK's handler accepts in Mcp-Protocol-Version
// on a session (below 2026-07-28).
var StatefulVersions = map[string]bool{"2024-11-05": true, "2025-03-26": true, "2025-06-18": true, "2025-11-25": true}

// FirstPage reports whether list params ask for the first page (no cursor).
func FirstPage(params json.RawMessage) bool {
	var p struct {
		Cursor string `json:"cursor"`
	}
	_ = json.Unmarshal(params, &p)
	return p.Cursor == ""
}

// NotificationRefusal is the error a notification the revision does not define for a client is
// answered with.
func NotificationRefusal(method, revision string) *jsonrpc.Error {
	data, _ := json.Marshal(map[string]string{MetaEFCode: string(ef.EFNotificationInvalid)})
	return &jsonrpc.Error{Code: CodeInvalidRequest, Data: data,
		Message: fmt.Sprintf("actgate: %q is not a notification a client sends on MCP %s; a request needs an id", Clip(method, 100), revision)}
}
