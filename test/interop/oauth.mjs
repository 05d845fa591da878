// The official MCP TypeScript SDK client against a gate that authenticates agents by OAuth
// (agent.authentication oauth): node oauth.mjs URL CLIENT_ID CLIENT_SECRET SCOPE.
// The client starts without a token, reads resource_metadata from the gate's 401, fetches the
// protected resource metadata (RFC 9728), discovers the authorization server, gets a token by
// the client credentials grant (ClientCredentialsProvider) and calls get_balance. It prints
// every HTTP exchange it made and the call's result as one JSON document.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ClientCredentialsProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';

const [url, clientId, clientSecret, scope] = process.argv.slice(2);
const http = [];
const fetchLogged = async (input, init) => {
  const res = await fetch(input, init);
  const u = new URL(typeof input === 'string' ? input : input.url ?? String(input));
  http.push({ method: init?.method ?? 'GET', url: u.origin + u.pathname, status: res.status, authorized: new Headers(init?.headers).has('authorization'),
    wwwAuthenticate: res.headers.get('www-authenticate') ?? '' });
  return res;
};
const out = { http };
try {
  const authProvider = new ClientCredentialsProvider({ clientId, clientSecret, scope });
  const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider, fetch: fetchLogged });
  const client = new Client({ name: 'oauth-ts', version: '1.0.0' });
  await client.connect(transport);
  out.result = await client.callTool({ name: 'get_balance', arguments: {} });
  await client.close();
} catch (e) {
  out.error = String(e?.stack ?? e);
}
process.stdout.write(JSON.stringify(out) + '\n');
