// Feature walk with the official TypeScript SDK v2 client (@modelcontextprotocol/client, pinned in
// package.json) in one revision:
//
//   node --import ./preload.mjs walk2.mjs URL REVISION PLAN
//
// REVISION is 2026-07-28 (the client's negotiation pinned to it: no fallback) or 2025-11-25 (the
// client's 2025 handshake). PLAN names the tools walked: "everything" (server-everything's) or
// "conformance" (the conformance suite's standard test tools: reference2025.mjs and
// server2026.mjs). It prints one JSON transcript, {"features": [{"feature", "ok", "value" |
// "error"}...], "http": []}, in walk.mjs's shape (walk_test.go normalizes and compares it).
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const [url, revision, plan] = process.argv.slice(2);
const modern = revision === '2026-07-28';
const features = [];

function within(ms, p) {
  return Promise.race([p, new Promise((_, rej) => setTimeout(() => rej(new Error(`timed out after ${ms} ms`)), ms))]);
}
async function feature(name, fn, ms = 10000) {
  try {
    const value = await within(ms, fn());
    features.push({ feature: name, ok: true, value: value === undefined ? null : value });
  } catch (e) {
    const err = { message: String(e && e.message ? e.message : e) };
    if (e && typeof e.code === 'number') err.code = e.code;
    features.push({ feature: name, ok: false, error: err });
  }
}

// Caching hints are the server's (or, in front of a 2025 server, the gate's) and the client
// keeps its own cache: the walk compares what the results say, not how long they may be kept.
const noHints = (r) => {
  if (r && typeof r === 'object') {
    delete r.ttlMs;
    delete r.cacheScope;
  }
  return r;
};

const client = new Client(
  { name: 'actgate-interop-walk2', version: '1.0.0' },
  {
    capabilities: { sampling: {}, elicitation: { form: {} }, roots: { listChanged: true } },
    versionNegotiation: modern ? { mode: { pin: '2026-07-28' } } : { mode: 'legacy' },
  },
);
client.setRequestHandler('roots/list', async () => ({ roots: [{ uri: 'file:///walk2/one', name: 'one' }] }));
client.setRequestHandler('sampling/createMessage', async (req) => ({
  model: 'walk2-model',
  role: 'assistant',
  content: { type: 'text', text: `sampled: ${req.params.messages.length} message(s)` },
}));
// The answer as the principal gives it: the fields it fills, no defaults.
client.setRequestHandler('elicitation/create', async () => ({ action: 'accept', content: { name: 'Walk Tester', check: true, context: 'walk', color: 'blue', ok: true } }));

const transport = new StreamableHTTPClientTransport(new URL(url));
let connected = false;
await feature('connect', async () => {
  await client.connect(transport);
  connected = true;
  return { protocolVersion: client.getNegotiatedProtocolVersion() ?? null, server: client.getServerVersion()?.name ?? null };
});

if (connected) {
  const call = (name, args = {}, opts) => () => client.callTool({ name, arguments: args }, opts);
  await feature('tools/list', async () => (await client.listTools()).tools);
  if (!modern) {
    await feature('ping', () => client.ping());
    await feature('logging/setLevel', () => client.setLoggingLevel('info'));
  }
  if (plan === 'everything') {
    await feature('content: text', call('echo', { message: 'hello <gate> & "quotes"' }));
    await feature('content: image', call('get-tiny-image'));
    await feature('content: embedded resource', call('get-resource-reference', { resourceType: 'Text', resourceId: 1 }));
    await feature('content: resource links', call('get-resource-links', { count: 2 }));
    await feature('content: annotated', call('get-annotated-message', { messageType: 'error', includeImage: true }));
    await feature('tool error result', call('get-sum', { a: 'not a number', b: 1 }));
    await feature('progress', async () => {
      const seen = [];
      const result = await client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 0.4, steps: 2 } }, {
        onprogress: (p) => seen.push(p.progress),
        resetTimeoutOnProgress: true,
      });
      return { result, progress: seen };
    });
    await feature('sampling', call('trigger-sampling-request', { prompt: 'walk2', maxTokens: 5 }));
    await feature('elicitation: form', call('trigger-elicitation-request'));
    await feature('roots', call('get-roots-list'));
    await feature('resources/list', async () => noHints(await client.listResources()).resources.slice(0, 3));
    await feature('resources/templates/list', async () => noHints(await client.listResourceTemplates()).resourceTemplates);
    await feature('resources/read', async () => noHints(await client.readResource({ uri: 'demo://resource/static/document/architecture.md' })));
    await feature('prompts/list', async () => noHints(await client.listPrompts()).prompts);
    await feature('prompts/get', () => client.getPrompt({ name: 'args-prompt', arguments: { city: 'Paris', state: 'TX' } }));
    await feature('completion/complete', () => client.complete({ ref: { type: 'ref/prompt', name: 'completable-prompt' }, argument: { name: 'department', value: 'E' } }));
  } else {
    await feature('content: text', call('test_simple_text'));
    await feature('content: image', call('test_image_content'));
    await feature('content: audio', call('test_audio_content'));
    await feature('content: embedded resource', call('test_embedded_resource'));
    await feature('content: mixed', call('test_multiple_content_types'));
    await feature('tool error result', call('test_error_handling'));
    await feature('progress', async () => {
      const seen = [];
      const result = await client.callTool({ name: 'test_tool_with_progress', arguments: {} }, { onprogress: (p) => seen.push(p.progress) });
      // The text is the progress token, the client's own: its shape is what compares.
      return { isError: result.isError ?? false, progress: seen };
    });
    await feature('resources/list', async () => noHints(await client.listResources()).resources);
    await feature('resources/read', async () => noHints(await client.readResource({ uri: 'test://static-text' })));
    await feature('resources/templates/list', async () => noHints(await client.listResourceTemplates()).resourceTemplates);
    await feature('prompts/list', async () => noHints(await client.listPrompts()).prompts);
    await feature('prompts/get', () => client.getPrompt({ name: 'test_prompt_with_arguments', arguments: { arg1: 'a', arg2: 'b' } }));
    if (modern) {
      // Multi-round-trip requests: the client answers each round through its handlers and
      // retries, inside one callTool / getPrompt.
      await feature('input required: elicitation', call('test_input_required_result_elicitation'));
      await feature('input required: sampling', call('test_input_required_result_sampling'));
      await feature('input required: roots', call('test_input_required_result_list_roots'));
      await feature('input required: request state', call('test_input_required_result_request_state'));
      await feature('input required: multi-round', call('test_input_required_result_multi_round'));
      await feature('input required: prompts/get', () => client.getPrompt({ name: 'test_input_required_result_prompt' }));
    } else {
      await feature('sampling', call('test_sampling', { prompt: 'walk2' }));
      await feature('elicitation', call('test_elicitation', { message: 'walk2' }));
    }
  }
}
await client.close().catch(() => {});
process.stdout.write(JSON.stringify({ features, http: [] }) + '\n');
process.exit(0);
