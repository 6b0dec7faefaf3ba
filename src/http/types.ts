// The HTTP layer's own request/reply model: handlers never see uWebSockets.js objects, so the
// same route table serves the socket front end, in-process dispatch (relative webhook URLs)
// and OpenAPI generation.
import type { JsonSchema, Schema } from "./schema-types.ts";

export interface RequestContext<B = unknown, Q = Record<string, unknown>> {
  method: string;
  path: string;
  params: Record<string, string>;
  query: Q;
  rawQuery: URLSearchParams;
  /** lower-cased header names */
  headers: Record<string, string>;
  body: B;
  clientIp: string;
  /** aborted when the client disconnects before the reply is complete */
  signal: AbortSignal;
  /** identity established by the auth layer, if any */
  auth?: AuthInfo;
}

export interface AuthInfo {
  identity: string;
  permissions: string[];
  org?: string;
  user?: Record<string, unknown>;
}

export type Headers = Record<string, string>;

export interface JsonReply {
  kind: "json";
  status: number;
  body: unknown;
  headers?: Headers;
}
/** Pre-serialized JSON text (e.g. produced by a worker). */
export interface TextReply {
  kind: "text";
  status: number;
  body: string | Uint8Array;
  contentType: string;
  headers?: Headers;
}
export interface EmptyReply {
  kind: "empty";
  status: 202 | 204;
  headers?: Headers;
}

export interface SseSink {
  /** write one already-framed SSE chunk; returns false once the client is gone */
  write(frame: string): boolean;
  end(): void;
}

export interface SseReply {
  kind: "sse";
  headers?: Headers;
  /** write a `: heartbeat` comment this often until the stream ends (open-ended streams: proxies, the SDK's idle watchdog) */
  heartbeatMs?: number;
  /** called once the headers are out; returns a cleanup run when the client disconnects early */
  start(sink: SseSink): (() => void) | void;
}

/** Status and headers now, body later, with a newline every heartbeatMs meanwhile (runs/wait). */
export interface DeferredReply {
  kind: "deferred";
  headers?: Headers;
  contentType: string;
  heartbeatMs: number;
  /** text, or UTF-8 bytes sent as they are */
  body: Promise<string | Uint8Array>;
  onAbort?: () => void;
}

/**
 * A body sent as it is produced (chunked), pulled no faster than the client takes it: the front end
 * calls `next` again only once the previous chunk went out (custom routes returning a stream).
 */
export interface StreamReply {
  kind: "stream";
  status: number;
  contentType: string;
  headers?: Headers;
  /** the next chunk; null once the body is complete. A rejection ends the reply by closing the connection. */
  next(): Promise<Uint8Array | null>;
  /** nobody will read the rest (client gone, HEAD, an in-process caller): the producer may stop */
  cancel(): void;
}

/** The server side of an accepted WebSocket (text frames only). */
export interface WsConnection {
  /** send one text frame; false once the socket is closed */
  send(text: string): boolean;
  /** close with a status code (4000 + HTTP status for refusals, as the SDK expects) and reason */
  close(code: number, reason: string): void;
}

export interface WsSession {
  onMessage(text: string): void;
  onClose(): void;
}

/** Answer to a WebSocket upgrade request: the front end completes the handshake, then calls open. */
export interface WebSocketReply {
  kind: "websocket";
  /** not sent: a handshake's response headers are uWS's own */
  headers?: Headers;
  open(conn: WsConnection): WsSession;
}

export type Reply = JsonReply | TextReply | EmptyReply | SseReply | DeferredReply | StreamReply | WebSocketReply;

export type Handler<B = unknown, Q = Record<string, unknown>> = (ctx: RequestContext<B, Q>) => Reply | Promise<Reply>;

export type ParamKind = "uuid" | "string";

export interface RouteDef<B = unknown, Q = Record<string, unknown>> {
  method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  /** path with :param segments, e.g. /threads/:thread_id/runs */
  path: string;
  operationId: string;
  summary: string;
  tag: string;
  params?: Record<string, ParamKind>;
  body?: Schema<B>;
  /** body may be omitted entirely (treated as {}) */
  bodyOptional?: boolean;
  query?: Schema<Q>;
  /** response schema, for the OpenAPI document */
  response?: { status: number; schema?: JsonSchema; description?: string; contentType?: string };
  handler: Handler<B, Q>;
}

/**
 * A route whose handler gets its body and query typed from its schemas (`Schema<T>`, built with
 * src/http/schemas/common.ts), kept in a list of plain routes. The dispatcher calls a handler only
 * with what those schemas validated: that is what makes the erasure here sound.
 */
export const route = <B = unknown, Q = Record<string, unknown>>(def: RouteDef<B, Q>): RouteDef => def as unknown as RouteDef;

export const json = (body: unknown, status = 200, headers?: Headers): JsonReply => ({ kind: "json", status, body, headers });
/** The text a JSON reply is sent as (an undefined body as `null`). */
export const jsonReplyText = (reply: JsonReply): string => (reply.body === undefined ? "null" : JSON.stringify(reply.body));
export const empty = (status: 202 | 204 = 204, headers?: Headers): EmptyReply => ({ kind: "empty", status, headers });
