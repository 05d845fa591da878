// The OpenAI Agents SDK (@openai/agents): a function tool whose invoke enforces first. The
// Agents SDK runs tools from Responses function_call items, so the block is the function_call
// item {type, call_id, name, arguments} of the call (details.toolCall), and a refusal is the
// function_call_output's text: the §17 error object with the EF code and invoked: false.
import { randomUUID } from 'node:crypto';
import type { ActgateClient } from './client.ts';
import { denyText, guard, type GuardOptions, type GuardResult } from './guard.ts';

export type AgentsGateOptions = Omit<GuardOptions, 'vendor'> & {
  onResult?: (name: string, result: GuardResult<unknown>) => void;
};

type Invoke = (runContext: any, input: string, details?: { toolCall?: { callId?: string } ; [k: string]: unknown }) => Promise<unknown>;

/** gateAgentTool returns a copy of an Agents SDK function tool whose invoke runs only on allow. */
export function gateAgentTool<T extends { type: 'function'; name: string; invoke: (...args: any[]) => Promise<any> }>(client: ActgateClient, tool: T, opts: AgentsGateOptions = {}): T {
  const original = tool.invoke.bind(tool) as Invoke;
  const { onResult, ...rest } = opts;
  const invoke: Invoke = async (runContext, input, details) => {
    const callId = details?.toolCall?.callId || `call_${randomUUID().replaceAll('-', '')}`;
    const block = { type: 'function_call', call_id: callId, name: tool.name, arguments: input, status: 'completed' };
    const r = await guard(client, block, { ...rest, vendor: 'openai-responses' }, () => original(runContext, input, details));
    onResult?.(tool.name, r);
    switch (r.kind) {
      case 'ran':
        return r.output;
      case 'failed':
        throw r.error;
      case 'replayed':
        return typeof r.result === 'string' ? r.result : JSON.stringify(r.result ?? null);
      default:
        return denyText('openai-responses', r.deny);
    }
  };
  return { ...tool, invoke } as T;
}
