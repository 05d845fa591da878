// Shared by the vendor helpers: one tool call of a model turn, guarded on its own (parallel
// tool calls are separate acts, tool-use-binding §15).
import type { ActgateClient } from './client.ts';
import { guard, localError, resultFor, vendorResult, type GuardOptions, type GuardResult, type RunContext } from './guard.ts';
import type { Vendor } from './types.ts';

/** A local tool: called with the parsed arguments, only after the gate allowed the call. */
export type ToolHandler = (input: any, ctx: RunContext) => unknown;

/** The host's tools by the name the model calls them. */
export type ToolHandlers = Record<string, ToolHandler>;

/** What every vendor helper takes besides the turn: the enforce options and the wait. */
export type HostLoopOptions = Omit<GuardOptions, 'vendor'> & {
  /** Called with every call's GuardResult (logging, metrics, the binding moment's hand-off). */
  onResult?: (name: string, result: GuardResult<unknown>) => void;
};

/** One call: a tool without a handler is answered as unknown without asking the gate. */
export async function guardCall(
  client: ActgateClient,
  vendor: Vendor,
  block: unknown,
  name: string,
  args: () => unknown,
  tools: ToolHandlers,
  opts: HostLoopOptions,
): Promise<unknown> {
  const handler = Object.prototype.hasOwnProperty.call(tools, name) ? tools[name] : undefined;
  if (typeof handler !== 'function') {
    return vendorResult(vendor, block, JSON.stringify(localError('EF_UNKNOWN_TOOL', 'This host has no tool of that name; nothing was run.')), true);
  }
  const { onResult, ...guardOpts } = opts;
  const r = await guard(client, block, { ...guardOpts, vendor }, (ctx) => handler(args(), ctx));
  onResult?.(name, r);
  return resultFor(vendor, block, r);
}
