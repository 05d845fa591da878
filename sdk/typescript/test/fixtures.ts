// Recorded model outputs in the vendors' wire shapes, as the scripted model server returns them.
let n = 0;
const seq = () => ++n;

export function anthropicMessage(content: unknown[]): unknown {
  return {
    id: `msg_${seq()}`, type: 'message', role: 'assistant', model: 'claude-test-model', content,
    stop_reason: content.some((b: any) => b.type === 'tool_use') ? 'tool_use' : 'end_turn', stop_sequence: null,
    usage: { input_tokens: 12, output_tokens: 34 },
  };
}

export function toolUse(id: string, name: string, input: unknown): unknown {
  return { type: 'tool_use', id, name, input };
}

/** A streamed Messages response whose tool_use input arrives in partial JSON deltas. */
export function anthropicStream(id: string, name: string, partials: string[]): Array<{ event: string; data: unknown }> {
  const ev = (event: string, data: any) => ({ event, data: { type: event, ...data } });
  return [
    ev('message_start', { message: { id: `msg_${seq()}`, type: 'message', role: 'assistant', model: 'claude-test-model', content: [],
      stop_reason: null, stop_sequence: null, usage: { input_tokens: 12, output_tokens: 1 } } }),
    ev('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
    ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'Sending it now.' } }),
    ev('content_block_stop', { index: 0 }),
    ev('content_block_start', { index: 1, content_block: { type: 'tool_use', id, name, input: {} } }),
    ...partials.map((p) => ev('content_block_delta', { index: 1, delta: { type: 'input_json_delta', partial_json: p } })),
    ev('content_block_stop', { index: 1 }),
    ev('message_delta', { delta: { stop_reason: 'tool_use', stop_sequence: null }, usage: { output_tokens: 40 } }),
    ev('message_stop', {}),
  ];
}

export function chatCompletion(toolCalls: Array<{ id: string; name: string; arguments: string }>, content: string | null = null): unknown {
  return {
    id: `chatcmpl-${seq()}`, object: 'chat.completion', created: 1767225600, model: 'gpt-4o-2024-08-06',
    choices: [{
      index: 0, logprobs: null, finish_reason: toolCalls.length ? 'tool_calls' : 'stop',
      message: {
        role: 'assistant', content, refusal: null,
        ...(toolCalls.length ? { tool_calls: toolCalls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } })) } : {}),
      },
    }],
    usage: { prompt_tokens: 50, completion_tokens: 20, total_tokens: 70 },
  };
}

export function responsesOutput(output: unknown[]): unknown {
  return {
    id: `resp_${seq()}`, object: 'response', created_at: 1767225600, status: 'completed', model: 'gpt-4o-2024-08-06', output,
    parallel_tool_calls: true, tool_choice: 'auto', tools: [], error: null, incomplete_details: null, instructions: null, metadata: {},
    temperature: 1, top_p: 1, text: { format: { type: 'text' } },
    usage: { input_tokens: 50, output_tokens: 20, total_tokens: 70, input_tokens_details: { cached_tokens: 0 }, output_tokens_details: { reasoning_tokens: 0 } },
  };
}

export function functionCall(callId: string, name: string, args: string): unknown {
  return { type: 'function_call', id: `fc_${seq()}`, call_id: callId, name, arguments: args, status: 'completed' };
}

export function responsesMessage(text: string): unknown {
  return { type: 'message', id: `msg_${seq()}`, status: 'completed', role: 'assistant', content: [{ type: 'output_text', text, annotations: [] }] };
}
