// What endpoint groups share: the main thread's storage handle, the actor runtime and the
// resolved config. Built once at startup by src/server/create.ts.
import type { ShardPool } from "../hub/shard-pool.ts";
import type { AuthRuntime } from "../auth/runtime.ts";
import type { ResolvedConfig } from "../config/index.ts";
import type { RunAssistant, StoragePort } from "../storage/port.ts";
import type { AssistantRecord } from "../storage/records.ts";
import type { StoreIndexOptions } from "../storage/store-index.ts";
import type { StoreTtlOptions } from "../bridge/messages.ts";
import type { WebhookUrlPolicy } from "../webhooks/url-policy.ts";
import type { WebhookCounters } from "../webhooks/counters.ts";
import type { StaticSchemas } from "../schemas/static-schemas.ts";
import type { ServerMetrics } from "../metrics/server-metrics.ts";

/**
 * This server as one node of its deployment: an LMDB server is a cluster of one; a cluster node
 * (docs/CLUSTER.md) reads the alive count from its last heartbeat, never per request.
 */
export interface NodeView {
  readonly id: string;
  aliveNodes(): number;
}

export interface AppContext {
  /** every durable record, through the storage port (docs/STORAGE.md) */
  storage: StoragePort;
  pool: ShardPool;
  config: ResolvedConfig;
  graphIds: ReadonlySet<string>;
  version: string;
  langgraphVersion: string;
  /** where webhooks may go: the config's `webhooks.url` with the command's defaults (dev or serve) */
  webhookPolicy: WebhookUrlPolicy;
  /** custom auth (`auth.path`), when configured: handlers call authorize() for their event */
  auth?: AuthRuntime;
  /** the store's semantic index (config `store.index`, module embed function), when configured */
  storeIndex?: StoreIndexOptions;
  /** store item TTLs (config `store.ttl`), as the /store routes and the graphs' store apply them */
  storeTtl: StoreTtlOptions;
  /** webhook deliveries made, retried and given up since start (counted by the webhook worker; for /metrics) */
  webhookCounters: WebhookCounters;
  /** graph schemas from the graph files' TypeScript types (extracted off this thread, kept per build) */
  staticSchemas: StaticSchemas;
  /** GET /metrics (absent: a server built without them, e.g. in route tests) */
  metrics?: ServerMetrics;
  /** which server this is and how many are alive (GET /info) */
  node: NodeView;
  /** resolve a graph id or assistant id to the assistant record; rejects with 404 */
  resolveAssistant(idOrGraph: string): Promise<AssistantRecord>;
  /**
   * The same for a run's create: possibly from a cache, with the check the create makes
   * (AssistantsPort.forRun); `fresh`: read now (the retry after ASSISTANT_CHANGED). Rejects with 404.
   */
  resolveRunAssistant(idOrGraph: string, fresh: boolean): Promise<RunAssistant>;
}
