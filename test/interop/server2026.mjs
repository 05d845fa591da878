// An MCP 2026-07-28 server of the interop suite's own, written with the official TypeScript SDK v2
// (@modelcontextprotocol/server, pinned in package.json) to the server requirements the
// conformance suite 0.2.0 states in its scenarios' descriptions (`conformance list`, each
// scenario's "Server Implementation Requirements"): the standard test tools, resources and
// prompts, the multi-round-trip ("input required") tools, and the tasks extension's fixtures.
// The SDK's createMcpHandler serves 2026-07-28 requests on the modern path and 2025-era requests
// by its stateless fallback.
//
//   node --import ./preload.mjs server2026.mjs        (listens on 127.0.0.1:$PORT, path /mcp)
//
// conformance2026_test.go runs the conformance suite 0.2.0 against it directly and through
// `actgate serve`.
import http from 'node:http';
import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { McpServer, MissingRequiredClientCapabilityError, ProtocolError, ResourceTemplate, WebStandardStreamableHTTPServerTransport, createMcpHandler, fromJsonSchema, inputRequired } from '@modelcontextprotocol/server';
import { z } from 'zod';

// A 1×1 PNG and a 44-byte silent WAV header: content the image and audio scenarios check by type.
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=';
const WAV = 'UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA=';

// requestState is the server's own and comes back from the client: it is HMAC-signed, and state
// that does not verify is refused (-32602).
const secret = randomBytes(32);
function mint(payload) {
  const data = Buffer.from(JSON.stringify(payload)).toString('base64url');
  return data + '.' + createHmac('sha256', secret).update(data).digest('base64url');
}
function verify(state) {
  if (typeof state !== 'string') return undefined;
  const [data, mac] = state.split('.');
  if (!data || !mac || createHmac('sha256', secret).update(data).digest('base64url') !== mac) {
    throw new ProtocolError(-32602, 'requestState failed its integrity check');
  }
  return JSON.parse(Buffer.from(data, 'base64url').toString());
}

const elicitName = (message) => ({
  method: 'elicitation/create',
  params: { message, requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] } },
});
const sample = (text, maxTokens) => ({
  method: 'sampling/createMessage',
  params: { messages: [{ role: 'user', content: { type: 'text', text } }], maxTokens },
});
const listRoots = { method: 'roots/list', params: {} };
const responses = (ctx) => ctx.mcpReq.inputResponses ?? {};
const accepted = (r) => (r && r.action === 'accept' && r.content && typeof r.content === 'object' ? r.content : undefined);
const text = (t) => ({ content: [{ type: 'text', text: t }] });
const sampledText = (r) => (r && r.content && typeof r.content.text === 'string' ? r.content.text : '');
const rootsOf = (r) => (r && Array.isArray(r.roots) ? r.roots : undefined);

// The tasks extension of 2026-07-28 (io.modelcontextprotocol/tasks, SEP-2663), which the SDK does
// not implement: the server alone decides that a tools/call of a task-supporting tool creates a
// task (a CreateTaskResult: resultType "task" with the task's fields at the top level); tasks/get
// answers the task with its result or error inlined once terminal, or its pending inputRequests;
// tasks/update delivers inputResponses; tasks/cancel cancels. tasks/result and tasks/list do not
// exist in this revision (-32601, the SDK's answer to an unknown method). The store is the
// process's (createMcpHandler builds a server per request), bounded to TASK_LIMIT tasks.
const TASKS = 'io.modelcontextprotocol/tasks';
const TASK_TTL_MS = 300000;
const TASK_LIMIT = 1000;
const tasks = new Map();
const terminal = (status) => status === 'completed' || status === 'failed' || status === 'cancelled';
const complete = (r = {}) => ({ resultType: 'complete', ...r });
const taskFields = (t) => ({ taskId: t.taskId, status: t.status, createdAt: t.createdAt, lastUpdatedAt: t.lastUpdatedAt, ttlMs: TASK_TTL_MS, pollIntervalMs: 100 });
function setStatus(t, status) {
  t.status = status;
  t.lastUpdatedAt = new Date().toISOString();
}
// startTask creates a task running work(task) and returns its CreateTaskResult once tasks/get
// resolves it. work's result completes the task; a thrown error fails it with that error; a task
// cancelled meanwhile keeps its status.
function startTask(work) {
  if (tasks.size >= TASK_LIMIT) {
    const oldest = [...tasks.values()].find((t) => terminal(t.status));
    if (!oldest) throw new ProtocolError(-32603, 'task limit reached');
    tasks.delete(oldest.taskId);
  }
  const now = new Date().toISOString();
  const t = { taskId: randomUUID(), status: 'working', createdAt: now, lastUpdatedAt: now, inputRequests: {}, waiters: {} };
  tasks.set(t.taskId, t);
  setTimeout(() => tasks.delete(t.taskId), TASK_TTL_MS).unref();
  Promise.resolve().then(() => work(t)).then(
    (result) => { if (!terminal(t.status)) { t.result = result; setStatus(t, 'completed'); } },
    (e) => { if (!terminal(t.status)) { t.error = { code: typeof e.code === 'number' ? e.code : -32603, message: e.message }; setStatus(t, 'failed'); } },
  );
  return { resultType: 'task', ...taskFields(t) };
}
// ask parks the task on input requests (key → request) and resolves with the responses, as
// tasks/update delivers them (one key at a time or all at once).
function ask(t, requests) {
  setStatus(t, 'input_required');
  return Promise.all(Object.entries(requests).map(([key, request]) => new Promise((resolve) => {
    t.inputRequests[key] = request;
    t.waiters[key] = resolve;
  }).then((response) => [key, response]))).then((pairs) => {
    if (!terminal(t.status)) setStatus(t, 'working');
    return Object.fromEntries(pairs);
  });
}
const sleep = (ms, t) => new Promise((resolve) => {
  const timer = setTimeout(resolve, ms);
  t.stop = () => { clearTimeout(timer); resolve(); };
});
const hasTasks = (caps) => Boolean(caps.extensions?.[TASKS]);
const needTasks = () => new MissingRequiredClientCapabilityError({ requiredCapabilities: { extensions: { [TASKS]: {} } } });
// The task-supporting tools: each one's work, and whether a client without the extension gets its
// result synchronously (optional) or -32021 (required).
const confirm = { method: 'elicitation/create', params: { message: 'Confirm?', requestedSchema: { type: 'object', properties: { confirm: { type: 'boolean' } }, required: ['confirm'] } } };
const taskTools = {
  slow_compute: {
    work: async (t, args) => {
      await sleep(Math.max(0, Number(args.seconds ?? 1)) * 1000, t);
      return text(`computed ${args.label ?? ''} after ${args.seconds ?? 1}s`);
    },
  },
  failing_job: {
    required: true,
    work: async (t) => {
      await sleep(1000, t);
      return { isError: true, content: [{ type: 'text', text: 'failing_job failed, as it always does' }] };
    },
  },
  protocol_error_job: {
    work: async () => { throw new ProtocolError(-32603, 'protocol_error_job broke'); },
  },
  confirm_delete: {
    work: async (t, args) => {
      const r = await ask(t, { confirm_delete: confirm });
      return text(r.confirm_delete?.content?.confirm ? `deleted ${args.filename}` : `kept ${args.filename}`);
    },
  },
  multi_input: {
    work: async (t) => {
      const r = await ask(t, { first: elicitName('First name?'), second: elicitName('Second name?') });
      return text(`got ${Object.keys(r).join(', ')}`);
    },
  },
};
function registerTaskTools(server) {
  server.registerTool('greet', { description: 'Greets (sync only)', inputSchema: z.object({ name: z.string() }) }, async ({ name }) => text(`Hello, ${name}!`));
  const any = fromJsonSchema({ type: 'object' });
  server.registerTool('slow_compute', { description: 'Sleeps `seconds` (task-supporting)', inputSchema: any }, async () => text('sync'));
  server.registerTool('failing_job', { description: 'Fails as a tool error (task required)', inputSchema: any }, async () => text('sync'));
  server.registerTool('protocol_error_job', { description: 'Fails as a protocol error (task-supporting)', inputSchema: any }, async () => text('sync'));
  server.registerTool('confirm_delete', { description: 'Asks for confirmation (task-supporting)', inputSchema: any }, async () => text('sync'));
  server.registerTool('multi_input', { description: 'Asks for two inputs at once (task-supporting)', inputSchema: any }, async () => text('sync'));
  server.registerTool('test_tool_with_task', { description: 'Asks for a name, then works as a task (task required)', inputSchema: any }, async () => text('sync'));
}
// callTaskTool answers a tools/call of a task tool, or undefined for the other tools.
async function callTaskTool(request, ctx, caps) {
  const { name } = request.params;
  const args = request.params.arguments ?? {};
  if (name === 'test_tool_with_task') {
    if (!hasTasks(caps)) throw needTasks();
    const user = accepted(responses(ctx).user_name)?.name;
    if (typeof user !== 'string') return inputRequired({ inputRequests: { user_name: elicitName('What is your name?') } });
    return startTask(async (t) => {
      await sleep(200, t);
      return text(`Hello, ${user}! (from a task)`);
    });
  }
  const tool = taskTools[name];
  if (!tool) return undefined;
  if (hasTasks(caps)) return startTask((t) => tool.work(t, args));
  if (tool.required) throw needTasks();
  return complete(await tool.work({}, args));
}
function registerTaskMethods(server, capabilities) {
  const lookup = (params, ctx) => {
    if (!hasTasks(capabilities(ctx))) throw needTasks();
    const t = tasks.get(params.taskId);
    if (!t) throw new ProtocolError(-32602, `unknown task ${params.taskId}`);
    return t;
  };
  const taskId = z.object({ taskId: z.string() }).passthrough();
  server.server.setRequestHandler('tasks/get', { params: taskId }, async (params, ctx) => {
    const t = lookup(params, ctx);
    const r = complete(taskFields(t));
    if (t.status === 'input_required') r.inputRequests = { ...t.inputRequests };
    if (t.status === 'completed') r.result = t.result;
    if (t.status === 'failed') r.error = t.error;
    return r;
  });
  server.server.setRequestHandler('tasks/update', { params: taskId }, async (params, ctx) => {
    const t = lookup(params, ctx);
    // The SDK hands a request's inputResponses to the handler beside its params.
    for (const [key, response] of Object.entries(params.inputResponses ?? responses(ctx))) {
      const resolve = t.waiters[key];
      if (!resolve) continue;
      delete t.waiters[key];
      delete t.inputRequests[key];
      resolve(response);
    }
    return complete();
  });
  server.server.setRequestHandler('tasks/cancel', { params: taskId }, async (params, ctx) => {
    const t = lookup(params, ctx);
    if (!terminal(t.status)) {
      setStatus(t, 'cancelled');
      t.stop?.();
    }
    return complete();
  });
}

function build() {
  const server = new McpServer(
    { name: 'actgate-interop-2026', version: '1.0.0' },
    {
      capabilities: { tools: {}, resources: {}, prompts: {}, completions: {}, logging: {}, extensions: { [TASKS]: {} } },
      // The caching hints of SEP-2549 on every cacheable result.
      cacheHints: Object.fromEntries(['tools/list', 'prompts/list', 'resources/list', 'resources/templates/list', 'resources/read']
        .map((m) => [m, { ttlMs: 60000, cacheScope: 'public' }])),
    },
  );
  // The client's capabilities: a 2026-07-28 request's envelope; on a 2025 session (legacy mode),
  // what the client declared at initialize.
  const capabilities = (ctx) => ctx.mcpReq.envelope?.['io.modelcontextprotocol/clientCapabilities'] ?? server.server.getClientCapabilities() ?? {};

  server.registerTool('test_simple_text', { description: 'Returns simple text content' }, async () =>
    text('This is a simple text response for testing.'));
  server.registerTool('test_image_content', { description: 'Returns image content' }, async () =>
    ({ content: [{ type: 'image', data: PNG, mimeType: 'image/png' }] }));
  server.registerTool('test_audio_content', { description: 'Returns audio content' }, async () =>
    ({ content: [{ type: 'audio', data: WAV, mimeType: 'audio/wav' }] }));
  server.registerTool('test_embedded_resource', { description: 'Returns an embedded resource' }, async () =>
    ({ content: [{ type: 'resource', resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' } }] }));
  server.registerTool('test_multiple_content_types', { description: 'Returns text, image and a resource' }, async () => ({
    content: [
      { type: 'text', text: 'Multiple content types test:' },
      { type: 'image', data: PNG, mimeType: 'image/png' },
      { type: 'resource', resource: { uri: 'test://mixed-content-resource', mimeType: 'application/json', text: '{"test":"data","value":123}' } },
    ],
  }));
  server.registerTool('test_error_handling', { description: 'Returns a tool error' }, async () =>
    ({ isError: true, content: [{ type: 'text', text: 'This tool intentionally returns an error for testing' }] }));
  server.registerTool('test_tool_with_progress', { description: 'Reports progress' }, async (ctx) => {
    const token = ctx.mcpReq._meta?.progressToken;
    if (token !== undefined) {
      for (const progress of [0, 50, 100]) {
        await ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken: token, progress, total: 100, message: `Completed step ${progress}` } });
      }
    }
    return text(String(token ?? 'no progress token'));
  });
  // An input schema in JSON Schema 2020-12 with the keywords SEP-1613 and SEP-2106 keep: $schema,
  // $defs with an $anchor, additionalProperties, allOf (with a nested anyOf) and if/then/else.
  server.registerTool('json_schema_2020_12_tool', {
    description: 'Tool with JSON Schema 2020-12 features',
    inputSchema: fromJsonSchema({
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
      $defs: { address: { $anchor: 'address', type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' } } } },
      properties: { name: { type: 'string' }, address: { $ref: '#/$defs/address' }, kind: { type: 'string' } },
      allOf: [{ required: ['name'] }, { anyOf: [{ required: ['address'] }, { required: ['kind'] }] }],
      if: { properties: { kind: { const: 'business' } } },
      then: { required: ['address'] },
      else: { required: [] },
      additionalProperties: false,
    }),
  }, async (args) => text(JSON.stringify(args)));
  // A tool with a parameter the client repeats in an Mcp-Param header (SEP-2243).
  server.registerTool('test_custom_header', {
    description: 'Echoes a region that travels in the Mcp-Param-Region header',
    inputSchema: fromJsonSchema({ type: 'object', properties: { region: { type: 'string', 'x-mcp-header': 'Region' } }, required: ['region'] }),
  }, async (args) => text(`region: ${args.region}`));

  // Multi-round-trip tools (SEP-2322).
  server.registerTool('test_input_required_result_elicitation', { description: 'Asks for a name, then greets' }, async (ctx) => {
    const name = accepted(responses(ctx).user_name)?.name;
    if (typeof name !== 'string') return inputRequired({ inputRequests: { user_name: elicitName('What is your name?') } });
    return text(`Hello, ${name}!`);
  });
  server.registerTool('test_input_required_result_sampling', { description: 'Asks the client to sample' }, async (ctx) => {
    const r = responses(ctx).capital_question;
    if (!r) return inputRequired({ inputRequests: { capital_question: sample('What is the capital of France?', 100) } });
    return text(`The model answered: ${sampledText(r)}`);
  });
  server.registerTool('test_input_required_result_list_roots', { description: 'Asks for the client roots' }, async (ctx) => {
    const roots = rootsOf(responses(ctx).client_roots);
    if (!roots) return inputRequired({ inputRequests: { client_roots: listRoots } });
    return text(`Roots: ${roots.map((r) => r.uri).join(', ')}`);
  });
  server.registerTool('test_input_required_result_request_state', { description: 'Round-trips requestState' }, async (ctx) => {
    const state = verify(ctx.mcpReq.requestState());
    if (!state || !responses(ctx).confirm) {
      return inputRequired({
        inputRequests: { confirm: { method: 'elicitation/create', params: { message: 'Please confirm', requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] } } } },
        requestState: mint({ tool: 'request_state', round: 1 }),
      });
    }
    return text(`state-ok: round ${state.round} confirmed`);
  });
  server.registerTool('test_input_required_result_multiple_inputs', { description: 'Asks for three inputs at once' }, async (ctx) => {
    const state = verify(ctx.mcpReq.requestState());
    const r = responses(ctx);
    if (!state || !r.user_name || !r.greeting || !r.client_roots) {
      return inputRequired({
        inputRequests: { user_name: elicitName('What is your name?'), greeting: sample('Generate a greeting', 50), client_roots: listRoots },
        requestState: mint({ tool: 'multiple_inputs' }),
      });
    }
    return text(`${sampledText(r.greeting)} ${accepted(r.user_name)?.name ?? ''} (${(rootsOf(r.client_roots) ?? []).length} roots)`);
  });
  server.registerTool('test_input_required_result_multi_round', { description: 'Two rounds of input' }, async (ctx) => {
    const state = verify(ctx.mcpReq.requestState());
    const r = responses(ctx);
    if (state?.round === 1 && accepted(r.step1)) {
      return inputRequired({
        inputRequests: { step2: { method: 'elicitation/create', params: { message: 'Step 2: What is your favorite color?', requestedSchema: { type: 'object', properties: { color: { type: 'string' } }, required: ['color'] } } } },
        requestState: mint({ round: 2, name: accepted(r.step1).name }),
      });
    }
    if (state?.round === 2 && accepted(r.step2)) return text(`${state.name} likes ${accepted(r.step2).color}`);
    return inputRequired({ inputRequests: { step1: elicitName('Step 1: What is your name?') }, requestState: mint({ round: 1 }) });
  });
  server.registerTool('test_input_required_result_tampered_state', { description: 'Refuses tampered requestState' }, async (ctx) => {
    const state = verify(ctx.mcpReq.requestState());
    if (!state || !accepted(responses(ctx).user_name)) {
      return inputRequired({ inputRequests: { user_name: elicitName('What is your name?') }, requestState: mint({ tool: 'tampered_state' }) });
    }
    return text('state verified');
  });
  server.registerTool('test_input_required_result_capabilities', { description: 'Asks only for what the client can answer' }, async (ctx) => {
    const caps = capabilities(ctx);
    const r = responses(ctx);
    const want = {};
    if (caps.elicitation && !r.user_name) want.user_name = elicitName('What is your name?');
    if (caps.sampling && !r.greeting) want.greeting = sample('Generate a greeting', 50);
    if (caps.roots && !r.client_roots) want.client_roots = listRoots;
    if (Object.keys(want).length > 0) return inputRequired({ inputRequests: want });
    return text(`answered: ${Object.keys(r).sort().join(', ') || 'nothing asked'}`);
  });

  // The diagnostic tools of the server-stateless scenario.
  server.registerTool('test_missing_capability', { description: 'Needs the sampling capability' }, async () => text('sampling declared'));
  server.registerTool('test_streaming_elicitation', { description: 'Asks for input on the response stream' }, async (ctx) => {
    if (ctx.mcpReq._meta?.progressToken !== undefined) {
      await ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken: ctx.mcpReq._meta.progressToken, progress: 1 } });
    }
    const name = accepted(responses(ctx).user_name)?.name;
    if (typeof name !== 'string') return inputRequired({ inputRequests: { user_name: elicitName('What is your name?') } });
    return text(`Hello, ${name}!`);
  });
  server.registerTool('test_logging_tool', { description: 'Logs when the request asks for a log level' }, async (ctx) => {
    await ctx.mcpReq.log('info', 'test_logging_tool ran');
    return text('logged');
  });
  server.registerTool('test_trigger_tool_change', { description: 'Announces a tool list change' }, async () => {
    handler.notify.toolsChanged();
    return text('tools changed');
  });
  server.registerTool('test_trigger_prompt_change', { description: 'Announces a prompt list change' }, async () => {
    handler.notify.promptsChanged();
    return text('prompts changed');
  });

  server.registerResource('static-text', 'test://static-text', { description: 'A static text resource', mimeType: 'text/plain' }, async (uri) =>
    ({ contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'This is the content of the static text resource.' }] }));
  server.registerResource('static-binary', 'test://static-binary', { description: 'A static binary resource', mimeType: 'image/png' }, async (uri) =>
    ({ contents: [{ uri: uri.href, mimeType: 'image/png', blob: PNG }] }));
  server.registerResource('template', new ResourceTemplate('test://template/{id}/data', { list: undefined }),
    { description: 'A resource template with an id', mimeType: 'application/json' }, async (uri, { id }) =>
      ({ contents: [{ uri: uri.href, mimeType: 'application/json', text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }) }] }));

  server.registerPrompt('test_simple_prompt', { description: 'A prompt without arguments' }, async () =>
    ({ messages: [{ role: 'user', content: { type: 'text', text: 'This is a simple prompt for testing.' } }] }));
  server.registerPrompt('test_prompt_with_arguments', {
    description: 'A prompt with arguments',
    argsSchema: z.object({ arg1: z.string(), arg2: z.string() }),
  }, async ({ arg1, arg2 }) =>
    ({ messages: [{ role: 'user', content: { type: 'text', text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` } }] }));
  server.registerPrompt('test_prompt_with_embedded_resource', {
    description: 'A prompt with an embedded resource',
    argsSchema: z.object({ resourceUri: z.string() }),
  }, async ({ resourceUri }) => ({
    messages: [
      { role: 'user', content: { type: 'resource', resource: { uri: resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' } } },
      { role: 'user', content: { type: 'text', text: 'Please process the embedded resource above.' } },
    ],
  }));
  server.registerPrompt('test_prompt_with_image', { description: 'A prompt with an image' }, async () => ({
    messages: [
      { role: 'user', content: { type: 'image', data: PNG, mimeType: 'image/png' } },
      { role: 'user', content: { type: 'text', text: 'Please analyze the image above.' } },
    ],
  }));
  server.registerPrompt('test_input_required_result_prompt', { description: 'A prompt that asks for context first' }, async (ctx) => {
    const c = accepted(responses(ctx).user_context)?.context;
    if (typeof c !== 'string') {
      return inputRequired({ inputRequests: { user_context: { method: 'elicitation/create', params: { message: 'What context should the prompt use?', requestedSchema: { type: 'object', properties: { context: { type: 'string' } }, required: ['context'] } } } } });
    }
    return { messages: [{ role: 'user', content: { type: 'text', text: `Context: ${c}` } }] };
  });
  // McpServer answers a tool's exception with an isError result; the refusals the scenarios
  // require as JSON-RPC errors (a missing client capability: -32021; tampered requestState:
  // -32602) are raised in front of its tools/call handler.
  const needs = { test_missing_capability: 'sampling', test_streaming_elicitation: 'elicitation' };
  registerTaskTools(server);
  const tools = server.server._getRequestHandler('tools/call');
  server.server.setRequestHandler('tools/call', async (request, ctx) => {
    const need = needs[request.params.name];
    if (need && !capabilities(ctx)[need]) throw new MissingRequiredClientCapabilityError({ requiredCapabilities: { [need]: {} } });
    verify(ctx.mcpReq.requestState());
    return (await callTaskTool(request, ctx, capabilities(ctx))) ?? tools(request, ctx);
  });
  registerTaskMethods(server, capabilities);
  return server;
}

// SERVER2026_LEGACY=1 serves the same tools as a stateful 2025-era server only (a session per
// initialize, Mcp-Session-Id, no server/discover, no 2026-07-28 requests): the kind of upstream
// a 2026-07-28 agent reaches only through the gate. Its list changes are announced as a 2025
// server announces them: notifications/…/list_changed on every session (its GET stream).
const onerror = (e) => process.stderr.write(`server2026: ${e.message}\n`);
function sessionful() {
  const sessions = new Map();
  const servers = new Map();
  const announce = (send) => {
    for (const s of servers.values()) Promise.resolve(send(s.server)).catch(onerror);
  };
  return {
    notify: {
      toolsChanged: () => announce((s) => s.sendToolListChanged()),
      promptsChanged: () => announce((s) => s.sendPromptListChanged()),
    },
    async fetch(request) {
      const sid = request.headers.get('mcp-session-id');
      if (sid) {
        const t = sessions.get(sid);
        return t ? t.handleRequest(request) : new Response('unknown session', { status: 404 });
      }
      const server = build();
      const t = new WebStandardStreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => { sessions.set(id, t); servers.set(id, server); },
        onsessionclosed: (id) => { sessions.delete(id); servers.delete(id); },
      });
      await server.connect(t);
      return t.handleRequest(request);
    },
  };
}
const handler = process.env.SERVER2026_LEGACY === '1' ? sessionful() : createMcpHandler(() => build(), { onerror });

// A loopback server refuses a request whose Host, or Origin, names another host (DNS rebinding:
// the streamable HTTP transport's security warning; the conformance scenario
// dns-rebinding-protection), whatever its revision.
const loopbackHosts = new Set(['localhost', '127.0.0.1', '[::1]']);
function loopbackName(url) {
  try {
    return loopbackHosts.has(new URL(url).hostname);
  } catch {
    return false;
  }
}

// node:http in front of the handler's web-standard face.
http.createServer(async (req, res) => {
  if (!req.url.startsWith('/mcp')) {
    res.writeHead(404).end();
    return;
  }
  if (!loopbackName(`http://${req.headers.host ?? ''}`) || (req.headers.origin !== undefined && !loopbackName(req.headers.origin))) {
    res.writeHead(403, { 'Content-Type': 'text/plain' }).end('Host or Origin is not a loopback name');
    return;
  }
  const chunks = [];
  for await (const c of req) chunks.push(c);
  const headers = new Headers();
  for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string') headers.set(k, v);
  const body = chunks.length && req.method !== 'GET' && req.method !== 'HEAD' ? Buffer.concat(chunks) : undefined;
  const ac = new AbortController();
  res.on('close', () => ac.abort());
  const response = await handler.fetch(new Request(`http://${req.headers.host}${req.url}`, { method: req.method, headers, body, signal: ac.signal }));
  // The headers go out at once, as the SDKs' transports send them: node:http would hold them
  // until the body's first chunk, which an event stream may not have for a long time.
  res.writeHead(response.status, Object.fromEntries(response.headers)).flushHeaders();
  if (!response.body) {
    res.end();
    return;
  }
  try {
    for await (const c of response.body) res.write(c);
  } catch {
    // the client went away
  }
  res.end();
}).listen(Number(process.env.PORT || 3000));
