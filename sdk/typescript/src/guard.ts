// guard is the host loop of tool-use-binding §15 for one tool call: enforce, run once on allow,
// complete; a refusal becomes the vendor-shaped result the model reads (§17, §23) without
// running anything; an escalation returns the binding moment (envelope-04) or waits for its
// resolution; no Decision (timeout, transport error) never runs the tool (§16 MUST 5).
import { ActgateClient, ActgateError, type EnforceOptions } from './client.ts';
import {
  EF_ESCALATION_REQUIRED,
  EF_POLICY_UNAVAILABLE,
  type CompleteResponse,
  type Decision,
  type ErrorObject,
  type Vendor,
} from './types.ts';

/** Throw it from a tool when the host cannot know whether the tool took effect. */
export class IndeterminateError extends Error {
  constructor(message = 'the outcome of the tool is unknown', opts?: { cause?: unknown }) {
    super(message, opts);
    this.name = 'IndeterminateError';
  }
}

export interface WaitOptions {
  /** Pause between polls (default 1000 ms). */
  intervalMs?: number;
  /** Give up waiting after this long (default 15 minutes); the result is then the escalation. */
  timeoutMs?: number;
  /** Stops waiting. */
  signal?: AbortSignal;
  /** Called once with the escalation, e.g. to show the principal where to approve. */
  onEscalation?: (e: Escalation) => void;
}

export interface GuardOptions extends EnforceOptions {
  /** Wait for the binding moment of an escalation to be resolved, then resume. */
  wait?: boolean | WaitOptions;
  /** The outcome to report for output the tool returned (default executed), e.g. failed for an MCP result with isError. */
  outcomeOf?: (output: unknown) => 'executed' | 'failed';
}

/** The binding moment an escalated call waits on. */
export interface Escalation {
  momentIds: string[];
  envelopeDigest?: string;
  /** The envelope (envelope-04 §8.1): what the principal is shown. */
  bindingMoment?: unknown;
  message?: string;
}

/** What the tool is told about the dispatch it runs under. */
export interface RunContext {
  /** The journaled dispatch: an idempotency key for a tool that takes one. */
  operationId?: string;
  authorityId?: string;
  decision: Decision;
}

export type GuardResult<R> =
  /** The tool ran once and returned output. */
  | { kind: 'ran'; decision: Decision; output: R; completion?: CompleteResponse; completeError?: unknown }
  /** The tool ran once and threw. */
  | { kind: 'failed'; decision: Decision; error: unknown; completion?: CompleteResponse; completeError?: unknown }
  /** The gate refused the call: deny is the vendor-shaped result for the model. */
  | { kind: 'refused'; decision: Decision; deny: unknown }
  /** The call needs a principal's decision: deny is the vendor-shaped result for the model. */
  | { kind: 'escalated'; decision: Decision; escalation: Escalation; deny: unknown }
  /** A retry of a dispatch already settled: the recorded result, not run again. */
  | { kind: 'replayed'; decision: Decision; result: unknown }
  /** No decision (timeout, transport, refused request): never run; deny is a local refusal. */
  | { kind: 'unavailable'; error: ActgateError; deny: unknown };

/** The id a vendor block is answered under: tool_use id, tool_calls[].id, function_call call_id. */
export function vendorId(vendor: Vendor, block: unknown): string {
  const b = (block ?? {}) as Record<string, unknown>;
  const id = vendor === 'openai-responses' ? b.call_id : b.id;
  return typeof id === 'string' ? id : '';
}

/** The §17 error object of a refusal decided here, not by the gate (no Decision was had). */
export function localError(code: string, message: string): ErrorObject {
  return { error: { code, message, retryable: false, invoked: false } };
}

/** Text of a tool's output for vendor fields that carry a string. */
export function outputText(output: unknown): string {
  if (typeof output === 'string') return output;
  if (output === undefined) return '';
  return JSON.stringify(output);
}

/** The vendor-shaped tool result answering block with text (isError marks an error). */
export function vendorResult(vendor: Vendor, block: unknown, text: string, isError = false): Record<string, unknown> {
  const id = vendorId(vendor, block);
  switch (vendor) {
    case 'anthropic':
      return isError
        ? { type: 'tool_result', tool_use_id: id, is_error: true, content: [{ type: 'text', text }] }
        : { type: 'tool_result', tool_use_id: id, content: text };
    case 'openai':
      return { role: 'tool', tool_call_id: id, content: text };
    case 'openai-responses':
      return { type: 'function_call_output', call_id: id, output: text };
  }
}

/** The vendor-shaped refusal of a Decision: the gate's deny, or one built from its code. */
function denyOf(vendor: Vendor, block: unknown, d: Decision): unknown {
  if (d.deny !== undefined && d.deny !== null) return d.deny;
  return vendorResult(vendor, block, JSON.stringify(localError(d.code ?? 'EF_ACT_INVALID', d.message ?? 'refused')), true);
}

function escalationOf(d: Decision): Escalation {
  return { momentIds: d.binding_moments ?? [], envelopeDigest: d.envelope_digest, bindingMoment: d.binding_moment, message: d.message };
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

/**
 * guard enforces block and, on allow, runs the tool once and reports its outcome. run gets the
 * dispatch's operation id (an idempotency key). A tool that throws IndeterminateError is
 * reported indeterminate; any other throw, failed. The tool never runs without an allow.
 */
export async function guard<R>(
  client: ActgateClient,
  block: unknown,
  opts: GuardOptions,
  run: (ctx: RunContext) => Promise<R> | R,
): Promise<GuardResult<R>> {
  const { wait, outcomeOf, ...enforceOpts } = opts;
  let decision: Decision;
  try {
    decision = await client.enforce(block, enforceOpts);
    if (!decision.allow && !decision.replayed && decision.code === EF_ESCALATION_REQUIRED && wait) {
      decision = await waitForResolution(client, block, enforceOpts, decision, wait === true ? {} : wait);
    }
  } catch (e) {
    const err = e instanceof ActgateError ? e : new ActgateError('transport', String((e as Error)?.message ?? e), { cause: e });
    const deny = vendorResult(opts.vendor, block, JSON.stringify(localError(EF_POLICY_UNAVAILABLE,
      'The gate could not be asked; the call was not run.')), true);
    return { kind: 'unavailable', error: err, deny };
  }
  if (decision.replayed) {
    return { kind: 'replayed', decision, result: decision.result };
  }
  if (!decision.allow) {
    if (decision.code === EF_ESCALATION_REQUIRED) {
      return { kind: 'escalated', decision, escalation: escalationOf(decision), deny: denyOf(opts.vendor, block, decision) };
    }
    return { kind: 'refused', decision, deny: denyOf(opts.vendor, block, decision) };
  }
  const ctx: RunContext = { operationId: decision.operation_id, authorityId: decision.authority_id, decision };
  let output: R;
  try {
    output = await run(ctx);
  } catch (error) {
    const indeterminate = error instanceof IndeterminateError;
    const r: GuardResult<R> = { kind: 'failed', decision, error };
    if (decision.operation_id) {
      try {
        r.completion = await client.complete(decision.operation_id, indeterminate ? 'indeterminate' : 'failed',
          { error: String((error as Error)?.message ?? error) });
      } catch (ce) {
        r.completeError = ce;
      }
    }
    return r;
  }
  const r: GuardResult<R> = { kind: 'ran', decision, output };
  if (decision.operation_id) {
    try {
      r.completion = await client.complete(decision.operation_id, outcomeOf?.(output) ?? 'executed', toJSONResult(output));
    } catch (ce) {
      r.completeError = ce;
    }
  }
  return r;
}

// The journal keeps a result of at most 1 MiB (docs/api.md); a larger or non-JSON output is
// reported as executed without it.
const MAX_RESULT_BYTES = 1 << 20;

function toJSONResult(output: unknown): unknown {
  if (output === undefined) return undefined;
  try {
    const s = JSON.stringify(output);
    if (s === undefined || Buffer.byteLength(s) > MAX_RESULT_BYTES) return undefined;
    return output;
  } catch {
    return undefined;
  }
}

/**
 * waitForResolution re-enforces the same block in the same session until the binding moment
 * is resolved: the gate answers the escalation again while it is pending (without raising a new
 * moment), then allow once the principal chose, or another refusal (declined).
 */
async function waitForResolution(
  client: ActgateClient,
  block: unknown,
  opts: EnforceOptions,
  first: Decision,
  w: WaitOptions,
): Promise<Decision> {
  w.onEscalation?.(escalationOf(first));
  const interval = w.intervalMs ?? 1000;
  const deadline = Date.now() + (w.timeoutMs ?? 15 * 60_000);
  let d = first;
  while (!d.allow && !d.replayed && d.code === EF_ESCALATION_REQUIRED && Date.now() < deadline && !w.signal?.aborted) {
    await sleep(Math.min(interval, Math.max(0, deadline - Date.now())), w.signal);
    if (w.signal?.aborted || Date.now() >= deadline) break;
    d = await client.enforce(block, opts);
  }
  return d;
}

/** The vendor-shaped tool result the model reads for a GuardResult. */
export function resultFor(vendor: Vendor, block: unknown, r: GuardResult<unknown>): unknown {
  switch (r.kind) {
    case 'ran':
      return vendorResult(vendor, block, outputText(r.output));
    case 'failed':
      return vendorResult(vendor, block, outputText({ error: String((r.error as Error)?.message ?? r.error) }), true);
    case 'replayed':
      return vendorResult(vendor, block, outputText(r.result));
    case 'refused':
    case 'escalated':
    case 'unavailable':
      return r.deny;
  }
}

/** The text of a vendor-shaped result (the §17 error object's JSON for a refusal). */
export function denyText(vendor: Vendor, deny: unknown): string {
  const d = (deny ?? {}) as Record<string, any>;
  switch (vendor) {
    case 'anthropic':
      if (typeof d.content === 'string') return d.content;
      if (Array.isArray(d.content)) return d.content.map((c: any) => (typeof c?.text === 'string' ? c.text : '')).join('');
      return '';
    case 'openai':
      return typeof d.content === 'string' ? d.content : '';
    case 'openai-responses':
      return typeof d.output === 'string' ? d.output : '';
  }
}

/** The §17 error object of a refusal's vendor-shaped result (EF code, invoked: false). */
export function errorObjectOf(vendor: Vendor, deny: unknown): ErrorObject {
  try {
    const o = JSON.parse(denyText(vendor, deny));
    if (o && typeof o === 'object' && o.error && typeof o.error.code === 'string') return o as ErrorObject;
  } catch {
    // fall through: a refusal whose text is not the error object is still a refusal
  }
  return localError('EF_ACT_INVALID', 'refused');
}
