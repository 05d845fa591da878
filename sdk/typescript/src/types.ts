// The host-loop wire shape of actgate's POST /v1/enforce and POST /v1/complete (docs/api.md
// "Host loops (/v1/enforce, /v1/complete)"; api/openapi/hostloop.yaml). Field names are the wire's own.

/** The vendor shape of the block a host loop sends: which adapter maps it to an act. */
export type Vendor = 'anthropic' | 'openai' | 'openai-responses';

/** Where the instruction behind the call came from, as the host attests it (tool-use-binding §12). */
export type Provenance = 'user' | 'system' | 'retrieval' | 'tool_output';

/** What a host reports about a tool it ran. */
export type Outcome = 'executed' | 'failed' | 'indeterminate';

/** The body of POST /v1/enforce. */
export interface EnforceRequest {
  vendor: Vendor;
  /** The raw tool_use block, tool_calls[] entry or function_call item. */
  block: unknown;
  server?: string;
  session?: string;
  provenance?: Provenance;
  /** The URL the host is about to contact (MCP server URL, HTTP endpoint, computer use's page). */
  destination?: string;
}

/** A binding-moment resolution delivered to the session (envelope-04 §7.3). */
export interface Delivery {
  [member: string]: unknown;
}

/**
 * The answer of POST /v1/enforce: tool-use-binding §16's {allow, authority_id, code, message}
 * and what the host needs to continue.
 */
export interface Decision {
  /** True only when the host may run the tool now, once. */
  allow: boolean;
  authority_id?: string;
  /** The EF code of a refusal. */
  code?: string;
  /** Safe to show the model. */
  message?: string;
  /** True only for EF_060. */
  retryable?: boolean;
  /** The journaled dispatch to report with /v1/complete (allow under authority). */
  operation_id?: string;
  state?: string;
  act_id?: string;
  /** The BindingMoments of an escalation. */
  binding_moments?: string[];
  envelope_digest?: string;
  /** The envelope of the binding moment (envelope-04 §8.1). */
  binding_moment?: unknown;
  resolutions?: Delivery[];
  /** In audit mode, the code enforcement would have returned. */
  audit_code?: string;
  /** A retry of a dispatch already settled in this session: never run it again. */
  replayed?: boolean;
  /** The result recorded for a replayed dispatch. */
  result?: unknown;
  /** The refusal in the block's vendor shape, to hand to the model as the tool's result. */
  deny?: unknown;
}

/** The body of POST /v1/complete. */
export interface CompleteRequest {
  operation_id: string;
  outcome: Outcome;
  result?: unknown;
}

/** The answer of POST /v1/complete. */
export interface CompleteResponse {
  operation_id: string;
  state: string;
}

/** The stable codes of a host-loop request the endpoint refused as malformed. */
export type HostLoopErrorCode =
  | 'HOSTLOOP_BAD_REQUEST'
  | 'HOSTLOOP_UNKNOWN_OPERATION'
  | 'HOSTLOOP_SETTLED'
  | 'HOSTLOOP_UNAVAILABLE'
  | 'HOSTLOOP_UNAUTHENTICATED'
  | 'HOSTLOOP_PENDING_LIMIT'
  | string;

/** The body of a refused host-loop request (not a refused tool call). */
export interface ErrorResponse {
  error: { code: HostLoopErrorCode; message: string };
}

/** The §17 error object a refusal carries in its vendor-shaped result. */
export interface ErrorObject {
  error: { code: string; message: string; retryable: boolean; invoked: false };
}

/** EF codes the wrappers read. */
export const EF_ESCALATION_REQUIRED = 'EF_ESCALATION_REQUIRED';
export const EF_POLICY_UNAVAILABLE = 'EF_POLICY_UNAVAILABLE';
