// Package hostloop is the host-loop endpoint of both deployments: tool-use-binding §16
// enforce() over HTTP for a program that receives a vendor's tool call (an Anthropic tool_use
// block, an OpenAI Chat Completions tool_calls entry, a Responses function_call item) and runs
// the tool itself.
//
//	POST /v1/enforce   {"vendor":"anthropic|openai|openai-responses","block":{…},"server":"…","session":"…","provenance":"…","destination":"https://…"}
//	                 → {"allow":true,"authority_id":"…","operation_id":"…","state":"DISPATCH_PENDING",…}
//	                   or {"allow":false,"code":"EF_…","message":"…","deny":{…the vendor-shaped tool result…},…}
//	POST /v1/complete  {"operation_id":"…","outcome":"executed|failed|indeterminate","result":…}
//	                 → {"operation_id":"…","state":"EXECUTED"}
//
// The call runs through internal/sink's Handle with the host as the Invoker: allow under
// authority only once the authority is consumed and the dispatch journaled DISPATCH_PENDING;
// the host reports the outcome, which the sink records as for an MCP call; a host that does
// not report within Config.Timeout leaves the dispatch INDETERMINATE. The destination a host
// names (the URL it is about to contact) is the call's live destination, which the sink's
// policy decides and the authority is bound to (docs/api.md "Destinations (T-D, T-E)"). The
// pod's sidecar (internal/sidecar) serves it on its loopback listener as the pod's agent;
// `actgate serve` (internal/standalone) serves it beside the MCP proxies, the caller
// authenticated by the agent's bearer token. docs/api.md "Host loops (/v1/enforce, /v1/complete)" describes the
// API and api/openapi/hostloop.yaml is its OpenAPI 3.1 document.
package hostloop
