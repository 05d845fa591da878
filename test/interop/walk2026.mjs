// The MCP 2026-07-28 walk: the official TypeScript SDK v2 client (@modelcontextprotocol/client,
// pinned in package.json), its version negotiation pinned to 2026-07-28 (no fallback), against
// the URL in argv[2]. Prints one JSON transcript on stdout (walk2026_test.go reads it).
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const url = process.argv[2];
const out = { features: [] };
async function step(feature, fn) {
  try {
    out.features.push({ feature, ok: true, value: await fn() });
  } catch (e) {
    out.features.push({ feature, ok: false, error: String(e?.message ?? e) });
  }
}

const client = new Client({ name: 'actgate-walk-2026', version: '1' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
// The gate marks the answer to a retry it answered from its journal in its own HTTP header
// (Actgate-Replayed: true), not in the result: the SDK's client shows no response headers, so
// the walk's fetch counts them.
let replays = 0;
const countingFetch = async (input, init) => {
  const res = await fetch(input, init);
  if (res.headers.get('actgate-replayed') === 'true') replays++;
  return res;
};
const transport = new StreamableHTTPClientTransport(new URL(url), { fetch: countingFetch });
let connected = false;
await step('connect', async () => {
  await client.connect(transport);
  connected = true;
  return { protocolVersion: client.getNegotiatedProtocolVersion() ?? null, sessionId: transport.sessionId ?? null };
});
if (connected) {
  await step('tools/list', async () => (await client.listTools()).tools.map((t) => t.name).sort());
  // A tool's second call also reports whether its whole result (content, _meta,
  // structuredContent, isError) is the first call's, as the client decoded both.
  const seen = {};
  const call = (name, args) => async () => {
    const before = replays;
    const r = await client.callTool({ name, arguments: args });
    const out = { isError: r.isError ?? false, content: r.content, code: r._meta?.['actgate.io/ef-code'] ?? null, replayed: replays > before };
    const whole = JSON.stringify(r);
    if (name in seen) out.sameAsFirst = seen[name] === whole;
    seen[name] = whole;
    return out;
  };
  await step('tools/call get_balance', call('get_balance', {}));
  await step('tools/call ticket_create', call('ticket_create', { title: 'walk' }));
  await step('tools/call ticket_create again', call('ticket_create', { title: 'walk' }));
  await step('tools/call send_payment', call('send_payment', { amount: 5 }));
  await step('tools/call unknown tool', call('no_such_tool', {}));
}
await client.close().catch(() => {});
process.stdout.write(JSON.stringify(out));
