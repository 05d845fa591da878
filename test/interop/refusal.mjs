// A refusal through the gate as the official TypeScript SDK client sees it:
// node --import ./preload.mjs refusal.mjs URL TOOL ARGS_JSON
//
// It lists the tools (so the client caches each tool's outputSchema and validates results
// against it), calls TOOL, and prints {"threw", "error", "isError", "code", "structured"}: the
// gate's refusal of a tool with an outputSchema must parse (no -32602 from the client's
// validation) and carry the EF code.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [url, tool, args] = process.argv.slice(2);
const client = new Client({ name: 'actgate-interop-refusal', version: '1.0.0' });
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
const listed = (await client.listTools()).tools.find((t) => t.name === tool);
const out = { listed: !!listed, outputSchema: !!(listed && listed.outputSchema) };
try {
  const res = await client.callTool({ name: tool, arguments: JSON.parse(args) });
  Object.assign(out, {
    threw: false,
    isError: !!res.isError,
    code: res._meta ? res._meta['actgate.io/ef-code'] ?? null : null,
    structured: res.structuredContent !== undefined,
  });
} catch (e) {
  Object.assign(out, { threw: true, error: String(e && e.message ? e.message : e) });
}
await client.close();
process.stdout.write(JSON.stringify(out) + '\n');
process.exit(0);
