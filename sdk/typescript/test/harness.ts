// The real parts of the tests: `actgate serve` built from this repository with a configuration
// of the test's own, an upstream MCP server (the MCP TypeScript SDK's server) that counts its
// invocations, and a scripted model server on loopback that answers the vendor SDKs with
// recorded Messages / Chat Completions / Responses outputs.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { z } from 'zod';

const here = dirname(fileURLToPath(import.meta.url));
export const repoRoot = resolve(here, '../../..');

export const UPSTREAM_TOKEN = 'upstream-test-token';

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((res, rej) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => res(Buffer.concat(chunks).toString('utf8')));
    req.on('error', rej);
  });
}

function listen(s: Server): Promise<string> {
  return new Promise((res) => s.listen(0, '127.0.0.1', () => {
    const a = s.address();
    res(`http://127.0.0.1:${typeof a === 'object' && a ? a.port : 0}`);
  }));
}

/** An MCP server (a tiny bank) counting how often each tool ran. */
export class Upstream {
  readonly counts = new Map<string, number>();
  server!: Server;
  url = '';
  constructor(readonly name: string) {}

  count(tool: string): number {
    return this.counts.get(tool) ?? 0;
  }

  #mcp(): McpServer {
    const s = new McpServer({ name: this.name, version: '1.0.0' });
    const hit = (t: string) => this.counts.set(t, this.count(t) + 1);
    s.registerTool('get_balance', { description: 'Read the balance.', inputSchema: { account: z.string().optional() } }, async () => {
      hit('get_balance');
      return { content: [{ type: 'text', text: '{"account":"main","balance":1000}' }] };
    });
    s.registerTool('send_payment', { description: 'Pay.', inputSchema: { to: z.string(), amount: z.number() } }, async ({ to, amount }) => {
      hit('send_payment');
      return { content: [{ type: 'text', text: JSON.stringify({ paid: amount, to }) }] };
    });
    s.registerTool('email_send', { description: 'Send an email.', inputSchema: { to: z.string(), subject: z.string().optional() } }, async () => {
      hit('email_send');
      return { content: [{ type: 'text', text: '{"sent":true}' }] };
    });
    return s;
  }

  async start(): Promise<void> {
    this.server = createServer(async (req, res) => {
      if (req.headers.authorization !== `Bearer ${UPSTREAM_TOKEN}`) {
        res.writeHead(401).end('unauthorized');
        return;
      }
      if (req.method !== 'POST') {
        res.writeHead(405).end();
        return;
      }
      const body = JSON.parse(await readBody(req));
      const mcp = this.#mcp();
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      res.on('close', () => {
        void transport.close();
        void mcp.close();
      });
      await mcp.connect(transport);
      await transport.handleRequest(req, res, body);
    });
    this.url = (await listen(this.server)) + '/mcp';
  }

  /** An MCP client connected straight to this server (the host loop is the executor). */
  async client(): Promise<Client> {
    const c = new Client({ name: 'host-loop-test', version: '1.0.0' });
    await c.connect(new StreamableHTTPClientTransport(new URL(this.url), { requestInit: { headers: { Authorization: `Bearer ${UPSTREAM_TOKEN}` } } }));
    return c;
  }

  close(): Promise<void> {
    return new Promise((r) => this.server.close(() => r()));
  }
}

/** A scripted reply: a JSON body, or SSE events for a streamed Messages response. */
export type Scripted = { json: unknown } | { sse: Array<{ event: string; data: unknown }> };

/** The scripted model server: answers each vendor path from its queue and records requests. */
export class ModelServer {
  readonly queues = new Map<string, Scripted[]>();
  readonly requests: Array<{ path: string; body: any }> = [];
  server!: Server;
  url = '';

  push(path: string, ...replies: Scripted[]): void {
    const q = this.queues.get(path) ?? [];
    q.push(...replies);
    this.queues.set(path, q);
  }

  requestsTo(path: string): any[] {
    return this.requests.filter((r) => r.path === path).map((r) => r.body);
  }

  async start(): Promise<void> {
    this.server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
      const path = (req.url ?? '').split('?')[0];
      const text = await readBody(req);
      this.requests.push({ path, body: text ? JSON.parse(text) : null });
      const next = this.queues.get(path)?.shift();
      if (!next) {
        res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: `nothing scripted for ${path}` } }));
        return;
      }
      if ('json' in next) {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(next.json));
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      for (const e of next.sse) res.write(`event: ${e.event}\ndata: ${JSON.stringify(e.data)}\n\n`);
      res.end();
    });
    this.url = await listen(this.server);
  }

  close(): Promise<void> {
    return new Promise((r) => this.server.close(() => r()));
  }
}

/** Builds the actgate binary of this repository once per process. */
let built: string | undefined;
export function buildActgate(): string {
  if (built) return built;
  const dir = mkdtempSync(join(tmpdir(), 'actgate-sdk-ts-bin-'));
  const bin = join(dir, 'actgate');
  execFileSync('go', ['build', '-o', bin, './cmd/actgate'], { cwd: repoRoot, stdio: ['ignore', 'inherit', 'inherit'] });
  built = bin;
  return bin;
}

export const POLICY = `policy:
  podSelector: {}
  servers:
  - name: finance
    url: %UPSTREAM%
  rules:
  - name: balances
    tools: [get_balance]
    consequenceClass: INFORMATIONAL
  - name: payments
    tools: [send_payment]
    consequenceClass: FINANCIAL
    evidence:
      role: HumanAuthorization
      principals: [alice]
    arguments:
    - name: amount-cap
      expression: double(args.amount) <= 10000.0
      message: an agent may not pay more than 10000 at once
    alternatives:
    - label: Pay at most 100 now
      reasoning: Caps the amount while the rest is checked.
      args:
        amount: 100
  - name: email
    tools: [email_send]
    consequenceClass: COMMUNICATION
    evidence:
      role: PolicyPermit
    provenance:
    - sources: [retrieval, tool_output]
      action: Deny
  - name: computer-use
    tools: [computer]
    consequenceClass: COMMUNICATION
    destinations: ["https://pay.example"]
`;

/** A running `actgate serve` with the test's configuration. */
export class Gate {
  proc?: ChildProcess;
  baseURL = '';
  readonly dir: string;
  readonly dataDir: string;
  stderr = '';

  constructor(readonly bin: string, readonly upstream: Upstream) {
    this.dir = mkdtempSync(join(tmpdir(), 'actgate-sdk-ts-'));
    this.dataDir = join(this.dir, 'data');
    writeFileSync(join(this.dir, 'finance.token'), UPSTREAM_TOKEN + '\n', { mode: 0o600 });
    writeFileSync(join(this.dir, 'actgate.yaml'), `listen: 127.0.0.1:0
dataDir: ${JSON.stringify(this.dataDir)}
sinkID: actgate-sdk-ts
agent:
  name: host-agent
principals:
- name: alice
upstreams:
- server: finance
  bearerTokenFile: ${JSON.stringify(join(this.dir, 'finance.token'))}
callTimeout: 30s
metrics:
  address: "off"
` + POLICY.replace('%UPSTREAM%', JSON.stringify(upstream.url)));
  }

  async start(): Promise<void> {
    const proc = spawn(this.bin, ['serve', '--config', join(this.dir, 'actgate.yaml')], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.proc = proc;
    proc.stderr!.on('data', (c) => { this.stderr += c.toString(); });
    this.baseURL = await new Promise<string>((res, rej) => {
      let out = '';
      const t = setTimeout(() => rej(new Error(`actgate serve did not start: ${this.stderr}`)), 60_000);
      proc.stdout!.on('data', (c) => {
        out += c.toString();
        const m = /actgate serving on (http:\/\/\S+)/.exec(out);
        if (m) {
          clearTimeout(t);
          res(m[1]);
        }
      });
      proc.on('exit', (code) => rej(new Error(`actgate serve exited ${code}: ${this.stderr}`)));
    });
  }

  token(kind: 'agents' | 'principals', name: string): string {
    return readFileSync(join(this.dataDir, kind, `${name}.token`), 'utf8').trim();
  }

  get agentToken(): string {
    return this.token('agents', 'host-agent');
  }

  async #api(method: string, path: string, body?: unknown): Promise<any> {
    const r = await fetch(this.baseURL + path, {
      method,
      headers: { authorization: `Bearer ${this.token('principals', 'alice')}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    if (!r.ok) throw new Error(`${method} ${path}: HTTP ${r.status} ${text}`);
    return JSON.parse(text);
  }

  /** The binding moments alice sees (pending only unless all). */
  async moments(): Promise<any[]> {
    const r = await this.#api('GET', '/v1/moments');
    return Array.isArray(r) ? r : (r.moments ?? r.items ?? []);
  }

  /** alice chooses option 0 of a moment. */
  async resolve(momentId: string, digest: string): Promise<any> {
    return this.#api('POST', `/v1/moments/${encodeURIComponent(momentId)}/resolve`,
      { binding_moment_resolution: { envelope_digest: digest, resolution: 'option', option_idx: 0 } });
  }

  async stop(): Promise<void> {
    const p = this.proc;
    if (p && p.exitCode === null) {
      await new Promise<void>((r) => {
        p.once('exit', () => r());
        p.kill('SIGTERM');
      });
    }
  }

  cleanup(): void {
    if (existsSync(this.dir)) rmSync(this.dir, { recursive: true, force: true });
  }
}

/** The world of one test file: upstream, gate, model server. */
export async function startWorld(): Promise<{ up: Upstream; gate: Gate; model: ModelServer; close: () => Promise<void> }> {
  const bin = buildActgate();
  const up = new Upstream('finance');
  await up.start();
  const gate = new Gate(bin, up);
  await gate.start();
  const model = new ModelServer();
  await model.start();
  return {
    up, gate, model,
    close: async () => {
      await gate.stop();
      gate.cleanup();
      await up.close();
      await model.close();
      rmSync(dirname(bin), { recursive: true, force: true });
      built = undefined;
    },
  };
}

/** Percentile of sorted milliseconds. */
export function pct(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

/** Text of an MCP CallToolResult's first text content. */
export function firstText(r: any): string {
  return r?.content?.find?.((c: any) => c?.type === 'text')?.text ?? '';
}
