// The client parses the gate's answers: untrusted bytes. Anything that is not a decision is an
// error, and guard never runs the tool on it (tool-use-binding §16 MUST 5: fail closed).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { ActgateClient, ActgateError, guard, openai } from '../src/index.ts';

async function serve(handler: (body: string) => { status: number; body: string; type?: string }): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    let b = '';
    req.on('data', (c) => { b += c; });
    req.on('end', () => {
      const r = handler(b);
      res.writeHead(r.status, { 'content-type': r.type ?? 'application/json' }).end(r.body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, server };
}

test('bad answers from the gate never run the tool', async () => {
  const cases: Array<[string, number, string, string]> = [
    ['not JSON', 200, 'allow', 'malformed'],
    ['empty body', 200, '', 'malformed'],
    ['no allow member', 200, '{"code":"EF_POLICY_DENIED"}', 'malformed'],
    ['allow as a string', 200, '{"allow":"true"}', 'malformed'],
    ['allow in an array', 200, '[{"allow":true}]', 'malformed'],
    ['null', 200, 'null', 'malformed'],
    ['a refusal without an EF code', 200, '{"allow":false,"act_id":"act-1"}', 'malformed'],
    ['500 with an allow body', 500, '{"allow":true}', 'http'],
    ['401', 401, '{"error":{"code":"HOSTLOOP_UNAUTHENTICATED","message":"no"}}', 'http'],
    ['429', 429, '{"error":{"code":"HOSTLOOP_PENDING_LIMIT","message":"busy"}}', 'http'],
    ['HTML error page', 502, '<html>bad gateway</html>', 'http'],
  ];
  for (const [name, status, body, kind] of cases) {
    const { url, server } = await serve(() => ({ status, body }));
    try {
      let ran = 0;
      const block = { id: 'call_bad', type: 'function', function: { name: 'send_payment', arguments: '{"to":"bob","amount":1}' } };
      const r = await guard(new ActgateClient({ baseURL: url }), block, { vendor: 'openai' }, () => { ran++; });
      assert.equal(ran, 0, `${name}: the tool ran`);
      assert.equal(r.kind, 'unavailable', name);
      assert.equal(r.kind === 'unavailable' && r.error.kind, kind, name);
      const deny = (r as { deny: { role: string; tool_call_id: string; content: string } }).deny;
      assert.equal(deny.role, 'tool');
      assert.equal(deny.tool_call_id, 'call_bad');
      assert.equal(JSON.parse(deny.content).error.invoked, false);
    } finally {
      server.close();
    }
  }
});

test('the request carries the block, the options and the bearer token as the wire shape says', async () => {
  let seen: any;
  let auth: string | undefined;
  const server = createServer((req, res) => {
    auth = req.headers.authorization;
    let b = '';
    req.on('data', (c) => { b += c; });
    req.on('end', () => {
      seen = JSON.parse(b);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({
        allow: false, code: 'EF_POLICY_DENIED', message: 'no',
        deny: { role: 'tool', tool_call_id: 'call_1', content: '{"error":{"code":"EF_POLICY_DENIED","message":"no","retryable":false,"invoked":false}}' },
      }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  try {
    const c = new ActgateClient({ baseURL: `http://127.0.0.1:${(server.address() as { port: number }).port}/`, token: 'tok' });
    let ran = 0;
    const msgs = await openai.runToolCalls(c, { tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'pay', arguments: '{"a":1}' } }] as any },
      { pay: () => { ran++; } }, { server: 'finance', session: 's1', provenance: 'retrieval' });
    assert.equal(auth, 'Bearer tok');
    assert.deepEqual(seen, { vendor: 'openai', block: { id: 'call_1', type: 'function', function: { name: 'pay', arguments: '{"a":1}' } },
      server: 'finance', session: 's1', provenance: 'retrieval' });
    assert.equal(ran, 0);
    assert.equal(JSON.parse(msgs[0].content).error.code, 'EF_POLICY_DENIED');
    await assert.rejects(c.complete('op-1', 'executed', {}), (e: unknown) => e instanceof ActgateError && e.kind === 'malformed');
  } finally {
    server.close();
  }
});

test('a tool the host does not have is answered without asking the gate', async () => {
  const c = new ActgateClient({ baseURL: 'http://127.0.0.1:9' });
  const msgs = await openai.runToolCalls(c, { tool_calls: [{ id: 'call_x', type: 'function', function: { name: 'rm_rf', arguments: '{}' } }] as any }, {});
  assert.equal(JSON.parse(msgs[0].content).error.code, 'EF_UNKNOWN_TOOL');
  assert.equal(JSON.parse(msgs[0].content).error.invoked, false);
});

test('the constructor refuses a missing or non-HTTP baseURL', () => {
  assert.throws(() => new ActgateClient({ baseURL: '' }), TypeError);
  assert.throws(() => new ActgateClient({ baseURL: 'file:///etc/passwd' }), TypeError);
});
