// The MCP TypeScript SDK's Client.callTool (@modelcontextprotocol/sdk) behind the gate: every
// server the application connects to inherits it (tool-use-binding §27 item 6: the MCP client,
// not only servers, runs enforce()). The host-loop API speaks vendor blocks, so each callTool
// becomes an Anthropic-shaped tool_use block {type, id, name, input} with a fresh id: the tool
// name and the arguments object are what the gate binds, `server` names the policy's server
// this connection reaches and `destination` the URL the client's transport is connected to:
// the gate refuses a call whose server URL is not the policy's (tool-use-binding §12
// MCP_SERVER_SWAP, §22 T-D). The SDK's transports keep their URL private (@modelcontextprotocol/sdk
// 1.32.2: StreamableHTTPClientTransport and SSEClientTransport take it in their constructor and
// expose no getter), so the application passes the URL it gave the transport.
import { randomUUID } from 'node:crypto';
import type { ActgateClient } from './client.ts';
import { errorObjectOf, guard, type GuardOptions, type GuardResult } from './guard.ts';

/** Members of the refusal result's _meta, beside the error object in its text. */
export const META_CODE = 'actgate.io/code';
export const META_INVOKED = 'actgate.io/invoked';
export const META_MOMENT_ID = 'actgate.io/binding-moment-id';
export const META_ENVELOPE_DIGEST = 'actgate.io/envelope-digest';

export type McpGateOptions = Omit<GuardOptions, 'vendor' | 'server' | 'destination'> & {
  /** The policy's server this client is connected to. Required: the gate binds it. */
  server: string;
  /**
   * The URL the client's transport is connected to (the URL given to
   * `new StreamableHTTPClientTransport(url)`), or a function answering it at each call when the
   * application may reconnect the client elsewhere. Required: the gate compares it with the
   * policy's server URL and binds the authority to it. `false` only for a transport with no URL
   * (stdio): the gate then takes the server's configured URL, and the wrapper refuses every call
   * once the client's transport is no longer the one of its first call.
   */
  destination: string | URL | (() => string | URL) | false;
  /** Called with every call's GuardResult. */
  onResult?: (name: string, result: GuardResult<unknown>) => void;
};

type CallTool = (params: { name: string; arguments?: Record<string, unknown>; [k: string]: unknown }, ...rest: any[]) => Promise<any>;

/** The CallToolResult the model reads for a refusal: isError, the error object as text. */
export function refusalResult(r: GuardResult<unknown>): Record<string, unknown> {
  if (r.kind === 'ran' || r.kind === 'failed' || r.kind === 'replayed') throw new TypeError('not a refusal');
  const obj = errorObjectOf('anthropic', r.deny);
  const meta: Record<string, unknown> = { [META_CODE]: obj.error.code, [META_INVOKED]: false };
  if (r.kind === 'escalated') {
    if (r.escalation.momentIds[0]) meta[META_MOMENT_ID] = r.escalation.momentIds[0];
    if (r.escalation.envelopeDigest) meta[META_ENVELOPE_DIGEST] = r.escalation.envelopeDigest;
  }
  return { content: [{ type: 'text', text: JSON.stringify(obj) }], isError: true, _meta: meta };
}

/**
 * gateMcpClient makes mcp.callTool enforce before it calls: on allow the original callTool
 * runs once and its outcome is reported (a result with isError is reported failed); a refusal
 * or an escalation is answered with an isError CallToolResult carrying the EF code and
 * invoked: false, and the server is never called; a replay returns the recorded result. It
 * returns mcp itself.
 */
export function gateMcpClient<C extends { callTool: CallTool }>(mcp: C, client: ActgateClient, opts: McpGateOptions): C {
  if (!opts?.server) throw new TypeError('gateMcpClient: server is required');
  const dest = opts.destination;
  if (dest === undefined || dest === null || dest === '') {
    throw new TypeError('gateMcpClient: destination is required: the URL the client is connected to (false for a transport without one)');
  }
  const original = mcp.callTool.bind(mcp) as CallTool;
  const { onResult, destination: _d, ...rest } = opts;
  // The transport of the first call (Client.transport, @modelcontextprotocol/sdk Protocol): with
  // a destination fixed at wrapping time, a client reconnected to another transport would be
  // enforced at the old destination, so such a call is not made.
  let pinned: { transport: unknown } | undefined;
  const transportOf = () => (mcp as { transport?: unknown }).transport;
  const gated: CallTool = async (params, ...more) => {
    let destination: string | undefined;
    if (typeof dest === 'function') {
      destination = String(dest());
    } else {
      const t = transportOf();
      pinned ??= { transport: t };
      if (t !== pinned.transport) {
        throw new TypeError('gateMcpClient: the client was reconnected to another transport; pass destination as a function answering its URL');
      }
      destination = dest === false ? undefined : String(dest);
    }
    const block = { type: 'tool_use', id: `mcp_${randomUUID().replaceAll('-', '')}`, name: params.name, input: params.arguments ?? {} };
    const r = await guard(client, block,
      { ...rest, destination, vendor: 'anthropic', outcomeOf: (o) => ((o as any)?.isError ? 'failed' : 'executed') },
      () => original(params, ...more));
    onResult?.(params.name, r);
    switch (r.kind) {
      case 'ran':
        return r.output;
      case 'failed':
        throw r.error;
      case 'replayed':
        return r.result ?? { content: [], isError: false };
      default:
        return refusalResult(r);
    }
  };
  (mcp as { callTool: CallTool }).callTool = gated;
  return mcp;
}
