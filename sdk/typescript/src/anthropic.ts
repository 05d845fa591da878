// The Anthropic Messages tool loop (@anthropic-ai/sdk): every tool_use block of an assistant
// message is enforced on its own and answered by a tool_result block (tool-use-binding §6, §15).
// A streamed message is enforced once, on the blocks the SDK's MessageStream assembled, never
// on partial input_json_delta fragments (§9).
import type { ActgateClient } from './client.ts';
import { guardCall, type HostLoopOptions, type ToolHandlers } from './loop.ts';

/** The members of a tool_use content block the gate binds. */
export interface ToolUseBlock {
  type: 'tool_use';
  id: string;
  name: string;
  input: unknown;
}

/** A tool_result content block (ToolResultBlockParam). */
export interface ToolResultBlock {
  type: 'tool_result';
  tool_use_id: string;
  content: string | Array<{ type: 'text'; text: string }>;
  is_error?: boolean;
}

/** The block sent to the gate: exactly the tool_use members, as the model emitted them. */
export function toolUseBlock(b: ToolUseBlock): ToolUseBlock {
  return { type: 'tool_use', id: b.id, name: b.name, input: b.input };
}

/**
 * runToolUses answers every tool_use block of message (a Messages API response) with a
 * tool_result block, in order: the user turn to send next is {role: 'user', content: results}.
 */
export async function runToolUses(
  client: ActgateClient,
  message: { content: ReadonlyArray<{ type: string }> },
  tools: ToolHandlers,
  opts: HostLoopOptions = {},
): Promise<ToolResultBlock[]> {
  const uses = message.content.filter((b): b is ToolUseBlock => b.type === 'tool_use') as ToolUseBlock[];
  return Promise.all(uses.map((b) => {
    const block = toolUseBlock(b);
    return guardCall(client, 'anthropic', block, b.name, () => b.input, tools, opts) as Promise<ToolResultBlock>;
  }));
}

/**
 * runStream waits for the stream's final message (MessageStream.finalMessage(): the SDK has
 * assembled every tool_use input from its deltas) and then answers its tool_use blocks.
 */
export async function runStream(
  client: ActgateClient,
  stream: { finalMessage(): Promise<{ content: ReadonlyArray<{ type: string }> }> },
  tools: ToolHandlers,
  opts: HostLoopOptions = {},
): Promise<ToolResultBlock[]> {
  return runToolUses(client, await stream.finalMessage(), tools, opts);
}
