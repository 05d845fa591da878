// A host process for T-G: "die-after-allow" enforces an email and prints the allow, then waits
// to be killed before it runs the tool; "resume" is the restarted host running the same block
// in the same session through guard, and prints what guard decided.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ActgateClient, guard } from '../src/index.ts';
import { UPSTREAM_TOKEN } from './harness.ts';

const client = new ActgateClient({ baseURL: process.env.ACTGATE_URL!, token: process.env.ACTGATE_TOKEN });
const block = { type: 'tool_use', id: 'toolu_01TG', name: 'email_send', input: { to: 'bob@example.com', subject: 'T-G' } };
const opts = { vendor: 'anthropic' as const, server: 'finance', session: process.env.SESSION!, provenance: 'user' as const };

async function sendEmail(): Promise<unknown> {
  const mcp = new Client({ name: 'tg-host', version: '1.0.0' });
  await mcp.connect(new StreamableHTTPClientTransport(new URL(process.env.UPSTREAM_URL!), { requestInit: { headers: { Authorization: `Bearer ${UPSTREAM_TOKEN}` } } }));
  try {
    return await mcp.callTool({ name: 'email_send', arguments: block.input });
  } finally {
    await mcp.close();
  }
}

if (process.argv[2] === 'die-after-allow') {
  const d = await client.enforce(block, opts);
  if (!d.allow) {
    console.log(`NOT ALLOWED ${d.code}`);
    process.exit(2);
  }
  console.log(`ALLOWED op=${d.operation_id}`);
  await new Promise(() => { /* killed here, before the invoke */ });
} else {
  const r = await guard(client, block, opts, sendEmail);
  console.log(`RESULT kind=${r.kind} code=${'decision' in r ? r.decision.code ?? '' : ''}`);
}
