// The Vercel AI SDK (`ai`): tools whose execute enforces first. The SDK is provider-neutral,
// so each call is sent as an Anthropic-shaped tool_use block {type, id: toolCallId, name: the
// tool's key, input}; a refusal is the tool's output: the §17 error object with the EF code and
// invoked: false, which the SDK hands to the model as the tool result.
import type { ActgateClient } from './client.ts';
import { errorObjectOf, guard, type GuardOptions, type GuardResult } from './guard.ts';

export type VercelGateOptions = Omit<GuardOptions, 'vendor'> & {
  onResult?: (name: string, result: GuardResult<unknown>) => void;
};

type Execute = (input: any, options: { toolCallId: string; [k: string]: unknown }) => unknown;

/** gateTools returns a copy of an AI SDK tool set in which every execute runs only on allow. */
export function gateTools<T extends Record<string, any>>(client: ActgateClient, tools: T, opts: VercelGateOptions = {}): T {
  const { onResult, ...rest } = opts;
  const out: Record<string, unknown> = {};
  for (const [name, t] of Object.entries(tools)) {
    if (typeof t.execute !== 'function') {
      out[name] = t;
      continue;
    }
    const original = (t.execute as Execute).bind(t);
    const execute: Execute = async (input, options) => {
      const block = { type: 'tool_use', id: options.toolCallId, name, input };
      const r = await guard(client, block, { ...rest, vendor: 'anthropic' }, () => original(input, options));
      onResult?.(name, r);
      switch (r.kind) {
        case 'ran':
          return r.output;
        case 'failed':
          throw r.error;
        case 'replayed':
          return r.result;
        default:
          return errorObjectOf('anthropic', r.deny);
      }
    };
    out[name] = { ...t, execute };
  }
  return out as T;
}
