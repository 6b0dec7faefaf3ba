// JSON-RPC 2.0 envelopes shared by the A2A and MCP endpoints: envelope classification that
// reports protocol errors as values, response builders, and domain-error → RPC-error mapping.
import { TroupeError } from "../errors.ts";
import { componentLog } from "../log/logger.ts";

export const RPC = {
  PARSE_ERROR: -32700,
  INVALID_REQUEST: -32600,
  METHOD_NOT_FOUND: -32601,
  INVALID_PARAMS: -32602,
  INTERNAL_ERROR: -32603,
} as const;

export type RpcId = string | number | null;
export type RpcParams = Record<string, unknown>;

export interface RpcErrorObject {
  code: number;
  message: string;
  data?: unknown;
}

export interface RpcResponse {
  jsonrpc: "2.0";
  id: RpcId;
  result?: unknown;
  error?: RpcErrorObject;
}

/** What one JSON value sent to a JSON-RPC endpoint turned out to be. */
export type Envelope =
  | { kind: "request"; id: RpcId; method: string; params: RpcParams }
  | { kind: "notification"; method: string; params: RpcParams }
  /** a client's response to a server-initiated request (MCP): acknowledged, never answered */
  | { kind: "response" }
  | { kind: "invalid"; id: RpcId; error: RpcErrorObject };

/** Thrown by method handlers; carries the JSON-RPC code to answer with. */
export class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
    this.name = "RpcError";
  }
}

export const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

const validId = (v: unknown): v is RpcId => v === null || typeof v === "string" || (typeof v === "number" && Number.isFinite(v));

export function classify(msg: unknown): Envelope {
  if (!isRecord(msg)) return { kind: "invalid", id: null, error: { code: RPC.INVALID_REQUEST, message: "Invalid Request: expected a JSON-RPC 2.0 object" } };
  const id = validId(msg.id) ? msg.id : null;
  if (msg.jsonrpc !== "2.0") return { kind: "invalid", id, error: { code: RPC.INVALID_REQUEST, message: 'Invalid Request: "jsonrpc" must be "2.0"' } };
  if (msg.id !== undefined && !validId(msg.id))
    return { kind: "invalid", id: null, error: { code: RPC.INVALID_REQUEST, message: "Invalid Request: id must be a string, number or null" } };
  if (msg.method === undefined) {
    if ("result" in msg || "error" in msg) return { kind: "response" };
    return { kind: "invalid", id, error: { code: RPC.INVALID_REQUEST, message: "Invalid Request: missing method" } };
  }
  if (typeof msg.method !== "string" || msg.method === "")
    return { kind: "invalid", id, error: { code: RPC.INVALID_REQUEST, message: "Invalid Request: method must be a non-empty string" } };
  if (msg.params !== undefined && !isRecord(msg.params)) {
    return { kind: "invalid", id, error: { code: RPC.INVALID_PARAMS, message: "Invalid params: params must be an object" } };
  }
  const params = (msg.params ?? {}) as RpcParams;
  if (msg.id === undefined || msg.id === null) return { kind: "notification", method: msg.method, params };
  return { kind: "request", id: msg.id, method: msg.method, params };
}

export const rpcResult = (id: RpcId, result: unknown): RpcResponse => ({ jsonrpc: "2.0", id, result });
export const rpcError = (id: RpcId, error: RpcErrorObject): RpcResponse => ({ jsonrpc: "2.0", id, error });

const PARAM_CODES = new Set<TroupeError["code"]>([
  "NOT_FOUND",
  "VALIDATION",
  "BAD_REQUEST",
  "CONFLICT",
  "THREAD_BUSY",
  "MULTITASK_REJECTED",
  "GRAPH_NOT_FOUND",
]);

/** Error of a method handler as a JSON-RPC error object; `prefix` is prepended to param errors. */
export function toRpcError(err: unknown, prefix = ""): RpcErrorObject {
  if (err instanceof RpcError) return { code: err.code, message: err.message, ...(err.data !== undefined ? { data: err.data } : {}) };
  if (err instanceof TroupeError) {
    if (PARAM_CODES.has(err.code)) return { code: RPC.INVALID_PARAMS, message: `${prefix}${err.message}` };
    return { code: RPC.INTERNAL_ERROR, message: err.message };
  }
  componentLog("api").error("JSON-RPC method failed", { err });
  return { code: RPC.INTERNAL_ERROR, message: "Internal error" };
}

/** Does the Accept header list one of the media types (case-insensitive substring match, like upstream)? */
export function accepts(accept: string | undefined, ...types: string[]): boolean {
  const a = (accept ?? "").toLowerCase();
  return types.some((t) => a.includes(t));
}
