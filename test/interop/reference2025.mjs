// A stateful MCP 2025-11-25 server of the interop suite's own, written with the official
// TypeScript SDK v1 (@modelcontextprotocol/sdk, pinned in package.json) to the server
// requirements the conformance suites state in their scenarios' descriptions (`conformance
// list`, each scenario's "Server Implementation Requirements"): the standard test tools,
// resources and prompts, logging, completion, subscriptions, in-request sampling and elicitation,
// and resumable SSE streams (an event store, a retry field, test_reconnection closing its stream
// mid-call). It is the "reference" upstream of interop_test.go: sessions of the SDK's own
// streamable HTTP transport, and Host validation (DNS rebinding) by the SDK's Express app.
//
//   node --import ./preload.mjs reference2025.mjs        (listens on 127.0.0.1:$PORT, path /mcp)
import { randomUUID } from 'node:crypto';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js';
import {
  CallToolRequestSchema, CompleteRequestSchema, CreateMessageResultSchema, ElicitResultSchema, GetPromptRequestSchema,
  ListPromptsRequestSchema, ListResourcesRequestSchema, ListResourceTemplatesRequestSchema, ListToolsRequestSchema,
  McpError, ErrorCode, ReadResourceRequestSchema, SubscribeRequestSchema, UnsubscribeRequestSchema, isInitializeRequest,
} from '@modelcontextprotocol/sdk/types.js';

// A 1×1 PNG and a 44-byte silent WAV header: content the image and audio scenarios check by type.
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=';
const WAV = 'UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA=';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const text = (t) => ({ content: [{ type: 'text', text: t }] });
const noArgs = { type: 'object', properties: {} };
const stringArg = (name, description) => ({ type: 'object', properties: { [name]: { type: 'string', description } }, required: [name] });

// The elicitation schemas of the SEP-1034 (defaults) and SEP-1330 (enum forms) scenarios.
const defaultsSchema = {
  type: 'object',
  properties: {
    name: { type: 'string', description: 'User name', default: 'John Doe' },
    age: { type: 'integer', description: 'User age', default: 30 },
    score: { type: 'number', description: 'User score', default: 95.5 },
    status: { type: 'string', description: 'User status', enum: ['active', 'inactive', 'pending'], default: 'active' },
    verified: { type: 'boolean', description: 'Verification status', default: true },
  },
};
const titled = (prefix, titles) => titles.map((title, i) => ({ const: `${prefix}${i + 1}`, title }));
const enumsSchema = {
  type: 'object',
  properties: {
    untitledSingle: { type: 'string', enum: ['option1', 'option2', 'option3'] },
    titledSingle: { type: 'string', oneOf: titled('value', ['First Option', 'Second Option', 'Third Option']) },
    legacyEnum: { type: 'string', enum: ['opt1', 'opt2', 'opt3'], enumNames: ['Option One', 'Option Two', 'Option Three'] },
    untitledMulti: { type: 'array', items: { type: 'string', enum: ['option1', 'option2', 'option3'] } },
    titledMulti: { type: 'array', items: { anyOf: titled('value', ['First Choice', 'Second Choice', 'Third Choice']) } },
  },
};

// tools: name → { description, inputSchema, run(args, extra, server) }.
const tools = {
  test_simple_text: { description: 'Returns a simple text response', run: () => text('This is a simple text response for testing.') },
  test_image_content: { description: 'Returns an image', run: () => ({ content: [{ type: 'image', data: PNG, mimeType: 'image/png' }] }) },
  test_audio_content: { description: 'Returns audio', run: () => ({ content: [{ type: 'audio', data: WAV, mimeType: 'audio/wav' }] }) },
  test_embedded_resource: {
    description: 'Returns an embedded resource',
    run: () => ({ content: [{ type: 'resource', resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' } }] }),
  },
  test_multiple_content_types: {
    description: 'Returns text, an image and a resource',
    run: () => ({
      content: [
        { type: 'text', text: 'Multiple content types test:' },
        { type: 'image', data: PNG, mimeType: 'image/png' },
        { type: 'resource', resource: { uri: 'test://mixed-content-resource', mimeType: 'application/json', text: JSON.stringify({ test: 'data', value: 123 }) } },
      ],
    }),
  },
  test_error_handling: {
    description: 'Always fails',
    run: () => ({ isError: true, content: [{ type: 'text', text: 'This tool intentionally returns an error for testing' }] }),
  },
  test_tool_with_logging: {
    description: 'Sends three log messages while it runs',
    run: async (_args, extra) => {
      const log = (data) => extra.sendNotification({ method: 'notifications/message', params: { level: 'info', data } });
      await log('Tool execution started');
      await sleep(50);
      await log('Tool processing data');
      await sleep(50);
      await log('Tool execution completed');
      return text('Tool with logging executed successfully');
    },
  },
  test_tool_with_progress: {
    description: 'Reports progress 0, 50 and 100 of 100',
    run: async (_args, extra) => {
      const token = extra._meta?.progressToken;
      for (const progress of [0, 50, 100]) {
        if (token !== undefined) {
          await extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress, total: 100 } });
        }
        if (progress < 100) await sleep(50);
      }
      return text('Tool with progress executed successfully');
    },
  },
  test_sampling: {
    description: 'Asks the client to sample an LLM',
    inputSchema: stringArg('prompt', 'The prompt to send to the LLM'),
    run: async (args, extra, server) => {
      if (!server.getClientCapabilities()?.sampling) throw new McpError(ErrorCode.InvalidRequest, 'the client does not support sampling');
      const r = await extra.sendRequest({
        method: 'sampling/createMessage',
        params: { messages: [{ role: 'user', content: { type: 'text', text: String(args.prompt) } }], maxTokens: 100 },
      }, CreateMessageResultSchema);
      return text(`LLM response: ${r.content?.type === 'text' ? r.content.text : JSON.stringify(r.content)}`);
    },
  },
  test_elicitation: {
    description: 'Asks the user for a username and an email address',
    inputSchema: stringArg('message', 'The message to show the user'),
    run: async (args, extra, server) => {
      if (!server.getClientCapabilities()?.elicitation) throw new McpError(ErrorCode.InvalidRequest, 'the client does not support elicitation');
      const r = await extra.sendRequest({
        method: 'elicitation/create',
        params: {
          message: String(args.message),
          requestedSchema: {
            type: 'object',
            properties: { username: { type: 'string', description: "User's response" }, email: { type: 'string', description: "User's email address" } },
            required: ['username', 'email'],
          },
        },
      }, ElicitResultSchema);
      return text(`User response: action=${r.action}, content=${JSON.stringify(r.content ?? {})}`);
    },
  },
  test_elicitation_sep1034_defaults: {
    description: 'Elicits a form whose fields all have defaults',
    run: async (_args, extra) => {
      const r = await extra.sendRequest({ method: 'elicitation/create', params: { message: 'Please review the defaults', requestedSchema: defaultsSchema } }, ElicitResultSchema);
      return text(`Elicitation completed: action=${r.action}, content=${JSON.stringify(r.content ?? {})}`);
    },
  },
  test_elicitation_sep1330_enums: {
    description: 'Elicits a form with every enum form',
    run: async (_args, extra) => {
      const r = await extra.sendRequest({ method: 'elicitation/create', params: { message: 'Please choose', requestedSchema: enumsSchema } }, ElicitResultSchema);
      return text(`Elicitation completed: action=${r.action}, content=${JSON.stringify(r.content ?? {})}`);
    },
  },
  json_schema_2020_12_tool: {
    description: 'Tool with JSON Schema 2020-12 features',
    inputSchema: {
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
      $defs: { address: { type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' } } } },
      properties: { name: { type: 'string' }, address: { $ref: '#/$defs/address' } },
      additionalProperties: false,
    },
    run: (args) => text(`Received: ${JSON.stringify(args)}`),
  },
  test_reconnection: {
    description: 'Closes its SSE stream mid-call; the answer comes on the resumed stream',
    run: async (_args, extra) => {
      await sleep(100);
      extra.closeSSEStream?.();
      await sleep(200);
      return text('Reconnection test completed successfully');
    },
  },
};

const resources = [
  { uri: 'test://static-text', name: 'static-text', description: 'A static text resource', mimeType: 'text/plain', text: 'This is the content of the static text resource.' },
  { uri: 'test://static-binary', name: 'static-binary', description: 'A static binary resource', mimeType: 'image/png', blob: PNG },
  { uri: 'test://watched-resource', name: 'watched-resource', description: 'A resource clients subscribe to', mimeType: 'text/plain', text: 'Watched resource content.' },
];
const template = /^test:\/\/template\/([^/]+)\/data$/;

const prompts = {
  test_simple_prompt: { description: 'A prompt without arguments', get: () => [{ role: 'user', content: { type: 'text', text: 'This is a simple prompt for testing.' } }] },
  test_prompt_with_arguments: {
    description: 'A prompt with two arguments',
    arguments: [{ name: 'arg1', description: 'First test argument', required: true }, { name: 'arg2', description: 'Second test argument', required: true }],
    get: (a) => [{ role: 'user', content: { type: 'text', text: `Prompt with arguments: arg1='${a.arg1}', arg2='${a.arg2}'` } }],
  },
  test_prompt_with_embedded_resource: {
    description: 'A prompt embedding a resource',
    arguments: [{ name: 'resourceUri', description: 'URI of the resource to embed', required: true }],
    get: (a) => [
      { role: 'user', content: { type: 'resource', resource: { uri: a.resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' } } },
      { role: 'user', content: { type: 'text', text: 'Please process the embedded resource above.' } },
    ],
  },
  test_prompt_with_image: {
    description: 'A prompt with an image',
    get: () => [
      { role: 'user', content: { type: 'image', data: PNG, mimeType: 'image/png' } },
      { role: 'user', content: { type: 'text', text: 'Please analyze the image above.' } },
    ],
  },
};
const completions = { arg1: ['paris', 'park', 'party'], arg2: ['world', 'wide', 'web'] };

// build returns one session's server: the SDK's low-level Server, so that the tools' input
// schemas are served exactly as written (the 2020-12 keywords included).
function build() {
  const server = new Server(
    { name: 'actgate-interop-reference2025', version: '1.0.0' },
    { capabilities: { tools: {}, resources: { subscribe: true }, prompts: {}, logging: {}, completions: {} } },
  );
  const subscriptions = new Set();
  server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: Object.entries(tools).map(([name, t]) => ({ name, description: t.description, inputSchema: t.inputSchema ?? noArgs })),
  }));
  server.setRequestHandler(CallToolRequestSchema, async (req, extra) => {
    const t = tools[req.params.name];
    if (!t) throw new McpError(ErrorCode.InvalidParams, `unknown tool ${req.params.name}`);
    return t.run(req.params.arguments ?? {}, extra, server);
  });
  server.setRequestHandler(ListResourcesRequestSchema, () => ({
    resources: resources.map(({ uri, name, description, mimeType }) => ({ uri, name, description, mimeType })),
  }));
  server.setRequestHandler(ListResourceTemplatesRequestSchema, () => ({
    resourceTemplates: [{ uriTemplate: 'test://template/{id}/data', name: 'template', description: 'Data by id', mimeType: 'application/json' }],
  }));
  server.setRequestHandler(ReadResourceRequestSchema, (req) => {
    const { uri } = req.params;
    const r = resources.find((x) => x.uri === uri);
    if (r) return { contents: [r.blob ? { uri, mimeType: r.mimeType, blob: r.blob } : { uri, mimeType: r.mimeType, text: r.text }] };
    const m = template.exec(uri);
    if (m) {
      const id = decodeURIComponent(m[1]);
      return { contents: [{ uri, mimeType: 'application/json', text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }) }] };
    }
    throw new McpError(-32002, `resource not found: ${uri}`);
  });
  server.setRequestHandler(SubscribeRequestSchema, (req) => {
    subscriptions.add(req.params.uri);
    return {};
  });
  server.setRequestHandler(UnsubscribeRequestSchema, (req) => {
    subscriptions.delete(req.params.uri);
    return {};
  });
  server.setRequestHandler(ListPromptsRequestSchema, () => ({
    prompts: Object.entries(prompts).map(([name, p]) => ({ name, description: p.description, arguments: p.arguments })),
  }));
  server.setRequestHandler(GetPromptRequestSchema, (req) => {
    const p = prompts[req.params.name];
    if (!p) throw new McpError(ErrorCode.InvalidParams, `unknown prompt ${req.params.name}`);
    const args = req.params.arguments ?? {};
    for (const a of p.arguments ?? []) {
      if (a.required && typeof args[a.name] !== 'string') throw new McpError(ErrorCode.InvalidParams, `missing argument ${a.name}`);
    }
    return { messages: p.get(args) };
  });
  server.setRequestHandler(CompleteRequestSchema, (req) => {
    const all = completions[req.params.argument.name] ?? [];
    const values = all.filter((v) => v.startsWith(req.params.argument.value ?? ''));
    return { completion: { values, total: values.length, hasMore: false } };
  });
  return server;
}

// EventStore keeps a session's SSE events for resumption (Last-Event-ID). An event id is the
// stream id and a sequence number of the session's; the transport's priming events are stored
// as {} and are never sent again (they carry no message). It keeps the newest 10,000 events.
class EventStore {
  constructor() {
    this.seq = 0;
    this.events = [];
  }

  async storeEvent(streamId, message) {
    const eventId = `${streamId}#${++this.seq}`;
    this.events.push({ eventId, streamId, message });
    if (this.events.length > 10000) this.events.shift();
    return eventId;
  }

  async getStreamIdForEventId(eventId) {
    return this.events.find((e) => e.eventId === eventId)?.streamId;
  }

  async replayEventsAfter(lastEventId, { send }) {
    const at = this.events.findIndex((e) => e.eventId === lastEventId);
    if (at < 0) throw new Error(`unknown event id ${lastEventId}`);
    const { streamId } = this.events[at];
    for (const e of this.events.slice(at + 1)) {
      if (e.streamId === streamId && e.message && 'jsonrpc' in e.message) await send(e.eventId, e.message);
    }
    return streamId;
  }
}

// One transport and server per session, as the SDK's streamable HTTP transport is built: the
// initialize POST creates them, the session id routes every later request, DELETE ends them.
// A request naming no session that is not an initialize is 400; a session id this process does
// not hold (never issued, or ended) is 404, so that a client starts a new session.
const sessions = new Map();
const app = createMcpExpressApp({ host: '127.0.0.1' });
app.all('/mcp', async (req, res) => {
  const id = req.headers['mcp-session-id'];
  let transport = typeof id === 'string' ? sessions.get(id) : undefined;
  if (id !== undefined && !transport) {
    res.status(404).json({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null });
    return;
  }
  if (!transport) {
    if (req.method !== 'POST' || !isInitializeRequest(req.body)) {
      res.status(400).json({ jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: no session, and not an initialize request' }, id: null });
      return;
    }
    transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      eventStore: new EventStore(),
      retryInterval: 500,
      onsessioninitialized: (sid) => sessions.set(sid, transport),
    });
    transport.onclose = () => {
      if (transport.sessionId) sessions.delete(transport.sessionId);
    };
    await build().connect(transport);
  }
  await transport.handleRequest(req, res, req.body);
});

const port = Number(process.env.PORT ?? 3000);
app.listen(port, '127.0.0.1', () => console.log(`reference2025 listening on 127.0.0.1:${port}/mcp`));
