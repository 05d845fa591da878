// @actgate/host: the host-loop client of actgate (docs/api.md "Host loops (/v1/enforce, /v1/complete)").
export * from './types.ts';
export * from './client.ts';
export * from './guard.ts';
export { guardCall, type ToolHandler, type ToolHandlers, type HostLoopOptions } from './loop.ts';
export * as anthropic from './anthropic.ts';
export * as openai from './openai.ts';
export { gateMcpClient, refusalResult, META_CODE, META_INVOKED, META_MOMENT_ID, META_ENVELOPE_DIGEST, type McpGateOptions } from './mcp.ts';
export { gateAgentTool, type AgentsGateOptions } from './agents.ts';
export { gateTools, type VercelGateOptions } from './vercel.ts';
