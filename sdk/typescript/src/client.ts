// ActgateClient speaks actgate's host-loop API: POST /v1/enforce before a tool runs, POST
// /v1/complete after it ran (tool-use-binding §14-16). The same two paths are served by
// `actgate serve` (authenticated with the agent's bearer token) and by the pod's sidecar on
// loopback (no token).
import type {
  CompleteResponse,
  Decision,
  ErrorResponse,
  Outcome,
  Provenance,
  Vendor,
} from './types.ts';

export interface ClientOptions {
  /** http://127.0.0.1:8787 for `actgate serve`, http://127.0.0.1:15080 for the sidecar. */
  baseURL: string;
  /** The agent's bearer token (serve); the sidecar needs none. */
  token?: string;
  /** Bound on one request; a request past it is a timeout and the tool never runs. Default 30 s. */
  timeoutMs?: number;
  /** The fetch to use (default: globalThis.fetch). */
  fetch?: typeof globalThis.fetch;
}

export interface EnforceOptions {
  vendor: Vendor;
  /** The ToolPolicy server the tool belongs to; optional when the gate fronts one server. */
  server?: string;
  /** The conversation; binding-moment resolutions are delivered per session. */
  session?: string;
  /** Where the instruction came from; omitted, the gate takes it as unknown (the worst source). */
  provenance?: Provenance;
  /**
   * The URL the host is about to contact for this call: the URL its MCP client is connected to,
   * an HTTP API endpoint, or for computer use the live page's URL. Omitted, the gate takes the
   * server's configured URL. A destination the policy does not allow is refused
   * EF_DESTINATION_MISMATCH, and the authority is bound to it (tool-use-binding §12
   * MCP_SERVER_SWAP and COMPUTER_USE_ORIGIN_CHANGE, §22 T-D and T-E; docs/api.md
   * "Destinations (T-D, T-E)").
   */
  destination?: string | URL;
}

/** Why a host-loop request got no Decision: the tool must not run. */
export type ActgateErrorKind = 'transport' | 'timeout' | 'http' | 'malformed';

/** A host-loop request that got no usable answer, or an answer refusing the request itself. */
export class ActgateError extends Error {
  readonly kind: ActgateErrorKind;
  /** The HTTP status, for kind http. */
  readonly status?: number;
  /** The HOSTLOOP_* code of a refused request, for kind http. */
  readonly code?: string;
  constructor(kind: ActgateErrorKind, message: string, opts: { status?: number; code?: string; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'ActgateError';
    this.kind = kind;
    this.status = opts.status;
    this.code = opts.code;
  }
}

const DEFAULT_TIMEOUT_MS = 30_000;

export class ActgateClient {
  readonly baseURL: string;
  readonly #token?: string;
  readonly #timeoutMs: number;
  readonly #fetch: typeof globalThis.fetch;

  constructor(opts: ClientOptions) {
    if (!opts || typeof opts.baseURL !== 'string' || opts.baseURL === '') {
      throw new TypeError('ActgateClient: baseURL is required');
    }
    const u = new URL(opts.baseURL);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') {
      throw new TypeError('ActgateClient: baseURL must be http or https');
    }
    this.baseURL = opts.baseURL.replace(/\/+$/, '');
    this.#token = opts.token;
    this.#timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.#fetch = opts.fetch ?? globalThis.fetch;
  }

  /**
   * enforce asks the gate whether block may run now (tool-use-binding §16). Allow is true only
   * when the tool may run once; every other answer is a refusal, an escalation or a replay.
   * Throws ActgateError when there is no Decision (transport, timeout, refused request): the
   * caller must then not run the tool.
   */
  async enforce(block: unknown, opts: EnforceOptions): Promise<Decision> {
    const body: Record<string, unknown> = { vendor: opts.vendor, block };
    if (opts.server) body.server = opts.server;
    if (opts.session) body.session = opts.session;
    if (opts.provenance) body.provenance = opts.provenance;
    if (opts.destination) body.destination = String(opts.destination);
    const d = await this.#post('/v1/enforce', body);
    if (d === null || typeof d !== 'object' || typeof (d as Decision).allow !== 'boolean') {
      throw new ActgateError('malformed', 'actgate: /v1/enforce answered without a decision');
    }
    const dec = d as Decision;
    // A refusal names its EF code (tool-use-binding §17); one without is not a decision the
    // host can hand to the model, so it is treated as no decision: the tool does not run.
    if (!dec.allow && !dec.replayed && (typeof dec.code !== 'string' || dec.code === '')) {
      throw new ActgateError('malformed', 'actgate: /v1/enforce refused without an EF code');
    }
    return dec;
  }

  /**
   * complete reports what happened to a dispatch enforce allowed under authority: executed
   * with the tool's result, failed, or indeterminate when the host cannot know. A dispatch is
   * settled once (a second report is HOSTLOOP_SETTLED).
   */
  async complete(operationId: string, outcome: Outcome, result?: unknown): Promise<CompleteResponse> {
    const body: Record<string, unknown> = { operation_id: operationId, outcome };
    if (result !== undefined) body.result = result;
    const r = await this.#post('/v1/complete', body);
    if (r === null || typeof r !== 'object' || typeof (r as CompleteResponse).state !== 'string') {
      throw new ActgateError('malformed', 'actgate: /v1/complete answered without a state');
    }
    return r as CompleteResponse;
  }

  async #post(path: string, body: unknown): Promise<unknown> {
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
    if (this.#token) headers.authorization = `Bearer ${this.#token}`;
    let resp: Response;
    const signal = AbortSignal.timeout(this.#timeoutMs);
    try {
      resp = await this.#fetch(this.baseURL + path, { method: 'POST', headers, body: JSON.stringify(body), signal });
    } catch (e) {
      if (signal.aborted) throw new ActgateError('timeout', `actgate: ${path} timed out after ${this.#timeoutMs} ms`, { cause: e });
      throw new ActgateError('transport', `actgate: ${path}: ${(e as Error)?.message ?? e}`, { cause: e });
    }
    let text: string;
    try {
      text = await resp.text();
    } catch (e) {
      if (signal.aborted) throw new ActgateError('timeout', `actgate: ${path} timed out after ${this.#timeoutMs} ms`, { cause: e });
      throw new ActgateError('transport', `actgate: ${path}: the answer could not be read`, { cause: e });
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new ActgateError(resp.ok ? 'malformed' : 'http', `actgate: ${path} answered HTTP ${resp.status} without JSON`, { status: resp.status });
    }
    if (!resp.ok) {
      const err = (parsed as ErrorResponse)?.error;
      throw new ActgateError('http', `actgate: ${path} answered HTTP ${resp.status}: ${err?.code ?? ''} ${err?.message ?? ''}`.trim(), {
        status: resp.status,
        code: typeof err?.code === 'string' ? err.code : undefined,
      });
    }
    return parsed;
  }
}
