// The typed protocol of the webhook worker thread: what its parent and the actor shards may send
// it, what it sends back (in-process dispatch requests), and the workerData it starts with.
import type { MessagePort } from "node:worker_threads";
import type { SerializedError } from "../errors.ts";
import type { WebhookPayload } from "./payload.ts";
import type { WebhookUrlPolicy } from "./url-policy.ts";

/** Deliver one payload. Accepted on parentPort and on every port handed over by `webhook.port`. */
export interface WebhookSendMessage {
  type: "webhook.send";
  url: string;
  payload: WebhookPayload;
}

/** A direct channel from an actor shard; the worker listens on it for `webhook.send`. */
export interface WebhookPortMessage {
  type: "webhook.port";
  port: MessagePort;
}

/** Parent's answer to a `webhook.dispatch` request. */
export interface WebhookDispatchResultMessage {
  type: "webhook.dispatch.result";
  id: number;
  status?: number;
  headers?: Record<string, string>;
  error?: SerializedError;
}

export type ToWebhookWorker = WebhookSendMessage | WebhookPortMessage | WebhookDispatchResultMessage;

/** Worker → parent: deliver a relative-URL webhook through the server's router. */
export interface WebhookDispatchRequest {
  type: "webhook.dispatch";
  id: number;
  method: "POST";
  path: string;
  headers: Record<string, string>;
  body: string;
}

export type FromWebhookWorker = WebhookDispatchRequest;

/** `workerData` of workers/webhook.ts. Only `headers` is required; the rest have sender defaults. */
export interface WebhookWorkerData {
  headers: Record<string, string>;
  connectTimeoutMs?: number;
  requestTimeoutMs?: number;
  maxAttempts?: number;
  backoffBaseMs?: number;
  maxRetryAfterMs?: number;
  /** Deliveries in progress at once. Default 64. */
  maxInFlight?: number;
  /** Deliveries waiting for a slot before new ones are dropped (and logged). Default 10000. */
  maxQueued?: number;
  /** Re-checked before sending (defence in depth; the HTTP layer checks at run creation). */
  urlPolicy?: WebhookUrlPolicy | null;
  /** true = relative URLs are sent to the parent as `webhook.dispatch` requests. */
  inProcessDispatch?: boolean;
}

export function isToWebhookWorker(msg: unknown): msg is ToWebhookWorker {
  if (!msg || typeof msg !== "object") return false;
  const m = msg as { type?: unknown; url?: unknown; payload?: unknown; port?: unknown; id?: unknown };
  switch (m.type) {
    case "webhook.send":
      return typeof m.url === "string" && !!m.payload && typeof m.payload === "object";
    case "webhook.port":
      return !!m.port && typeof (m.port as { on?: unknown }).on === "function";
    case "webhook.dispatch.result":
      return typeof m.id === "number";
    default:
      return false;
  }
}
