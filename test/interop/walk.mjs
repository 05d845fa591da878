// Feature walk of an MCP server with the official TypeScript SDK client (1.32), against
// @modelcontextprotocol/server-everything: node --import ./preload.mjs walk.mjs URL
//
// It prints one JSON document, {"features": [{"feature", "ok", "value" | "error"}...],
// "http": [...]}: what the client saw of each feature, and the HTTP exchanges (method, JSON-RPC
// method, status, content type, whether SSE events carried ids). The Go test (walk_test.go) runs
// it directly against the server and through the gate, normalizes both transcripts and diffs them.
// Session ids, request ids and timestamps are left out here so that the two runs compare.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
  ResourceUpdatedNotificationSchema,
  ResourceListChangedNotificationSchema,
  ToolListChangedNotificationSchema,
  EmptyResultSchema,
} from '@modelcontextprotocol/sdk/types.js';

const url = new URL(process.argv[2]);
const features = [];
const http = [];
const notes = { logging: 0, updated: 0, resourcesChanged: 0, toolsChanged: 0, resumptionTokens: 0 };
const errors = [];

// A fetch that records each exchange's shape (never session ids).
async function recordingFetch(input, init = {}) {
  const method = init.method || 'GET';
  let rpc = '';
  if (typeof init.body === 'string') {
    try {
      const m = JSON.parse(init.body);
      rpc = m.method || (m.result !== undefined || m.error !== undefined ? 'response' : '');
    } catch {
      rpc = 'unparsable';
    }
  }
  const res = await fetch(input, init);
  const ct = (res.headers.get('content-type') || '').split(';')[0];
  const entry = { method, rpc, status: res.status, contentType: ct };
  http.push(entry);
  if (ct === 'text/event-stream' && res.body) {
    // Tee the stream: one branch to the SDK, one to count event ids.
    const [a, b] = res.body.tee();
    (async () => {
      const reader = b.getReader();
      const dec = new TextDecoder();
      let text = '';
      for (;;) {
        const { done, value } = await reader.read().catch(() => ({ done: true }));
        if (done) break;
        text += dec.decode(value, { stream: true });
      }
      entry.eventIds = /^id:/m.test(text);
    })();
    return new Response(a, { status: res.status, statusText: res.statusText, headers: res.headers });
  }
  return res;
}

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
    if (e && e.data !== undefined) err.data = e.data;
    features.push({ feature: name, ok: false, error: err });
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function until(ms, cond) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (cond()) return true;
    await sleep(50);
  }
  return cond();
}

let roots = [{ uri: 'file:///walk/one', name: 'one' }];
const client = new Client(
  { name: 'actgate-interop-walk', version: '1.0.0' },
  { capabilities: { sampling: {}, elicitation: { form: {}, url: {} }, roots: { listChanged: true } } },
);
client.onerror = (e) => errors.push(String(e && e.message ? e.message : e));
client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots }));
client.setRequestHandler(CreateMessageRequestSchema, async (req) => ({
  model: 'walk-model',
  role: 'assistant',
  content: { type: 'text', text: `sampled: ${req.params.messages.length} message(s)` },
}));
client.setRequestHandler(ElicitRequestSchema, async (req) => {
  if (req.params.mode === 'url') return { action: 'decline' };
  // The answer as the principal gives it: two of the form's fields, no defaults filled in.
  return { action: 'accept', content: { name: 'Walk Tester', check: true } };
});
client.setNotificationHandler(LoggingMessageNotificationSchema, () => { notes.logging++; });
client.setNotificationHandler(ResourceUpdatedNotificationSchema, () => { notes.updated++; });
client.setNotificationHandler(ResourceListChangedNotificationSchema, () => { notes.resourcesChanged++; });
client.setNotificationHandler(ToolListChangedNotificationSchema, () => { notes.toolsChanged++; });

const transport = new StreamableHTTPClientTransport(url, { fetch: recordingFetch });

await feature('initialize', async () => {
  await client.connect(transport);
  return {
    protocolVersion: transport.protocolVersion,
    serverInfo: client.getServerVersion(),
    capabilities: client.getServerCapabilities(),
    instructions: client.getInstructions() ?? null,
  };
});

await feature('ping', async () => client.ping());
await feature('tools/list', async () => (await client.listTools()).tools);

const call = (name, args = {}, opts = {}) => client.callTool({ name, arguments: args }, undefined, opts);
await feature('content: text', () => call('echo', { message: 'hello <gate> & "quotes"' }));
await feature('content: image', () => call('get-tiny-image'));
await feature('content: embedded resource', () => call('get-resource-reference', { resourceType: 'Text', resourceId: 1 }));
await feature('content: resource links', () => call('get-resource-links', { count: 2 }));
await feature('content: annotated', () => call('get-annotated-message', { messageType: 'error', includeImage: true }));
await feature('content: structured (outputSchema)', () => call('get-structured-content', { location: 'New York' }));
await feature('tool error result', () => call('get-sum', { a: 'not a number', b: 1 }));

await feature('progress', async () => {
  const seen = [];
  const res = await call('trigger-long-running-operation', { duration: 0.6, steps: 3 }, {
    onprogress: (p) => seen.push(p.progress),
    resetTimeoutOnProgress: true,
  });
  return { result: res, progress: seen };
});

await feature('sampling', () => call('trigger-sampling-request', { prompt: 'walk', maxTokens: 5 }));
await feature('elicitation: form', () => call('trigger-elicitation-request'));
await feature('elicitation: url (request path)', () => call('trigger-url-elicitation', { url: 'https://example.com/walk', elicitationId: 'walk-1' }));
await feature('elicitation: url (error path -32042)', () => call('trigger-url-elicitation', { url: 'https://example.com/walk', elicitationId: 'walk-2', errorPath: true }));

await feature('roots', () => call('get-roots-list'));
await feature('roots/list_changed', async () => {
  roots = [{ uri: 'file:///walk/two', name: 'two' }];
  await client.sendRootsListChanged();
  await sleep(300);
  return call('get-roots-list');
});

await feature('logging/setLevel', async () => client.setLoggingLevel('debug'));

await feature('resources/list', async () => (await client.listResources()).resources.slice(0, 3));
await feature('resources/templates/list', async () => (await client.listResourceTemplates()).resourceTemplates);
const first = 'demo://resource/static/document/architecture.md';
await feature('resources/read', async () => client.readResource({ uri: first }));
await feature('resources/subscribe + updated', async () => {
  await client.subscribeResource({ uri: first });
  const before = notes.updated;
  await call('toggle-subscriber-updates');
  const got = await until(7000, () => notes.updated > before);
  await call('toggle-subscriber-updates');
  await client.unsubscribeResource({ uri: first });
  return { updated: got };
}, 12000);

await feature('prompts/list', async () => (await client.listPrompts()).prompts);
await feature('prompts/get', async () => client.getPrompt({ name: 'args-prompt', arguments: { city: 'Paris', state: 'TX' } }));
await feature('completion/complete', async () => client.complete({
  ref: { type: 'ref/prompt', name: 'completable-prompt' },
  argument: { name: 'department', value: 'E' },
}));

await feature('unknown method', async () => client.request({ method: 'foo/bar', params: {} }, EmptyResultSchema));

await feature('cancellation', async () => {
  const ac = new AbortController();
  const p = call('trigger-long-running-operation', { duration: 2, steps: 4 }, {
    signal: ac.signal,
    onprogress: () => ac.abort('walk cancels'),
  });
  try {
    await p;
    return { cancelled: false };
  } catch (e) {
    return { cancelled: true, message: String(e && e.message ? e.message : e) };
  }
});

await feature('resumability', async () => {
  let tokens = 0;
  await client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 0.4, steps: 2 } }, undefined, {
    onprogress: () => {},
    onresumptiontoken: () => { tokens++; },
  });
  return { resumptionTokens: tokens > 0 };
});

await feature('tasks', async () => {
  // simulate-research-query has execution.taskSupport "required": a task-augmented call, its
  // status updates and its result (consecutive equal entries folded: their number is timing).
  const seen = [];
  for await (const m of client.experimental.tasks.callToolStream({ name: 'simulate-research-query', arguments: { topic: 'walk' } })) {
    const entry = m.type + (m.task ? ':' + m.task.status : '') + (m.error ? ':' + (m.error.code ?? '') : '');
    if (seen[seen.length - 1] !== entry) seen.push(entry);
  }
  return seen;
}, 30000);

// The client's errors up to here: ending the session aborts the client's own open GET stream,
// and whether that abort reaches onerror is a race between the two ends, not a feature.
const clientErrors = errors.slice(0, 5);
// Ending the session also ends the client's GET stream, which the SDK then tries to reopen
// (answered 404: the session is gone) or not, depending on which end closes first: after the
// DELETE only the DELETE itself is an exchange to compare.
const beforeEnd = http.length;
await feature('session DELETE', async () => {
  await transport.terminateSession();
  return { sessionId: transport.sessionId === undefined ? 'cleared' : 'kept' };
});
await client.close().catch(() => {});

features.push({ feature: 'notifications', ok: true, value: { logging: notes.logging > 0, updated: notes.updated > 0 } });
features.push({ feature: 'client errors', ok: true, value: clientErrors });
features.push({ feature: 'GET stream', ok: true, value: http.filter((h) => h.method === 'GET').map((h) => ({ status: h.status, contentType: h.contentType })).slice(0, 1) });
const exchanges = http.slice(0, beforeEnd).concat(http.slice(beforeEnd).filter((h) => h.method === 'DELETE'));
process.stdout.write(JSON.stringify({ features, http: exchanges }) + '\n');
process.exit(0);
