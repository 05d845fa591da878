package agent2025

import (
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/mcpproxy/upstream"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// sessionUnavailable is the error an agent's initialize gets when the upstream session cannot
// be opened: EF_UPSTREAM_IDP_UNAVAILABLE when no credential for the upstream could be obtained
// (docs/identity.md "Gate → upstream"; nothing was sent), otherwise the server named as
// unavailable. Neither names the server's URL or credentials.
func sessionUnavailable(server string, err error) *jsonrpc.Error {
	if upstream.CredentialFailed(err) {
		return &jsonrpc.Error{Code: wire.CodeInternalError, Message: fmt.Sprintf(
			"%s: actgate: no credential for upstream %q could be obtained from the identity provider", ef.EFUpstreamIDPUnavailable, server)}
	}
	return &jsonrpc.Error{Code: wire.CodeInternalError, Message: fmt.Sprintf("actgate: upstream %q unavailable", server)}
}
