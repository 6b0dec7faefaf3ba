// The typed protocol of the webhook worker thread: what its parent and the actor shards may send
// it, what it sends back (in-process dispatch requests), and the workerData it starts with.
import type { MessagePort } from "node:worker_threads";
import type { SerializedError } from "../errors.ts";
import type { WebhookUrlPolicy } from "./url-policy.ts";
import type { LogOptions } from "../log/logger.ts";

/**
 * A run's delivery was committed to the outbox (key [threadId, runId]): deliver it now. Accepted
 * on parentPort and on every port handed over by `webhook.port`.
 */
export interface WebhookDueMessage {
  type: "webhook.due";
  threadId: string;
  runId: string;
  /** when its next attempt is due (ISO; absent: now): a delivery taken over from a dead node */
  at?: string;
}

/** A direct channel from an actor shard; the worker listens on it for `webhook.due`. */
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

export type ToWebhookWorker = WebhookDueMessage | WebhookPortMessage | WebhookDispatchResultMessage;

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

/** `workerData` of workers/webhook.ts. `dataDir` and `headers` are required; the rest have defaults. */
export interface WebhookWorkerData {
  /** the server's data dir: the outbox is in its LMDB (unless databaseUri) */
  dataDir: string;
  /** the server's PostgreSQL (`--database-uri`): the outbox is there */
  databaseUri?: string;
  /** `--sync-commits` */
  syncCommits?: boolean;
  /** the server's cluster node id (Postgres): the worker takes on this node's deliveries only */
  nodeId?: string;
  headers: Record<string, string>;
  /** Standard Webhooks secret (`webhooks.signing_secret`); null/absent = unsigned */
  signingSecret?: string | null;
  /** where the worker counts deliveries (counters.ts); absent = a buffer of its own */
  counters?: SharedArrayBuffer;
  connectTimeoutMs?: number;
  requestTimeoutMs?: number;
  /** waits between attempts; default the documented schedule (retry-schedule.ts) */
  retryDelaysMs?: number[];
  /** Attempts in progress at once. Default 64. */
  maxInFlight?: number;
  /** Re-checked before sending (defence in depth; the HTTP layer checks at run creation). */
  urlPolicy?: WebhookUrlPolicy | null;
  /** true = relative URLs are sent to the parent as `webhook.dispatch` requests. */
  inProcessDispatch?: boolean;
  /** level and format of the structured log */
  log?: LogOptions;
}

export function isToWebhookWorker(msg: unknown): msg is ToWebhookWorker {
  if (!msg || typeof msg !== "object") return false;
  const m = msg as { type?: unknown; threadId?: unknown; runId?: unknown; at?: unknown; port?: unknown; id?: unknown };
  switch (m.type) {
    case "webhook.due":
      return typeof m.threadId === "string" && typeof m.runId === "string" && (m.at === undefined || typeof m.at === "string");
    case "webhook.port":
      return !!m.port && typeof (m.port as { on?: unknown }).on === "function";
    case "webhook.dispatch.result":
      return typeof m.id === "number";
    default:
      return false;
  }
}
