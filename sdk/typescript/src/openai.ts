// The OpenAI SDK (`openai`): Chat Completions tool_calls answered by tool messages, and
// Responses function_call items answered by function_call_output items (tool-use-binding §7,
// §15). Each call is enforced on its own.
import type { ActgateClient } from './client.ts';
import { guardCall, type HostLoopOptions, type ToolHandlers } from './loop.ts';

/** A Chat Completions tool_calls[] entry. */
export interface ChatToolCall {
  id: string;
  type?: string;
  function: { name: string; arguments: string };
}

/** A Chat Completions tool message (ChatCompletionToolMessageParam). */
export interface ChatToolMessage {
  role: 'tool';
  tool_call_id: string;
  content: string;
}

/** A Responses function_call output item. */
export interface FunctionCallItem {
  type: 'function_call';
  call_id: string;
  name: string;
  arguments: string;
  status?: string;
}

/** A Responses function_call_output input item. */
export interface FunctionCallOutput {
  type: 'function_call_output';
  call_id: string;
  output: string;
}

function parseArgs(s: string): unknown {
  return s === '' ? {} : JSON.parse(s);
}

/**
 * runToolCalls answers every function entry of an assistant message's tool_calls with a tool
 * message, in order: append them after the assistant message.
 */
export async function runToolCalls(
  client: ActgateClient,
  message: { tool_calls?: ReadonlyArray<{ type?: string; id: string }> | null },
  tools: ToolHandlers,
  opts: HostLoopOptions = {},
): Promise<ChatToolMessage[]> {
  const calls = (message.tool_calls ?? []).filter((c) => c.type === undefined || c.type === 'function') as ChatToolCall[];
  return Promise.all(calls.map((c) => {
    const block = { id: c.id, type: 'function', function: { name: c.function.name, arguments: c.function.arguments } };
    return guardCall(client, 'openai', block, c.function.name, () => parseArgs(c.function.arguments), tools, opts) as Promise<ChatToolMessage>;
  }));
}

/**
 * runFunctionCalls answers every function_call item of a Responses response's output with a
 * function_call_output item, in order: send them as the next request's input.
 */
export async function runFunctionCalls(
  client: ActgateClient,
  response: { output: ReadonlyArray<{ type: string }> },
  tools: ToolHandlers,
  opts: HostLoopOptions = {},
): Promise<FunctionCallOutput[]> {
  const calls = response.output.filter((i) => i.type === 'function_call') as FunctionCallItem[];
  return Promise.all(calls.map((c) => {
    const block: FunctionCallItem = { type: 'function_call', call_id: c.call_id, name: c.name, arguments: c.arguments };
    if (c.status !== undefined) block.status = c.status;
    return guardCall(client, 'openai-responses', block, c.name, () => parseArgs(c.arguments), tools, opts) as Promise<FunctionCallOutput>;
  }));
}
