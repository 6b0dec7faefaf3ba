// The typed messages between the HTTP thread and actor shards (worker threads). Every message
// has a literal `type`; every request carries a reqId and gets exactly one reply; run events and
// completions flow back unsolicited. Errors cross as SerializedError (code + message + stack).
import type { SerializedError } from "../errors.ts";
import type { AssistantRecord, Json, JsonObject, MultitaskStrategy, RunKwargs, RunRecord, ThreadRecord, ThreadStatus } from "../storage/records.ts";

export interface CheckpointSelector {
  checkpoint_id?: string;
  checkpoint_ns?: string;
  checkpoint_map?: JsonObject | null;
}

export interface CreateRunCommand {
  type: "run.create";
  threadId: string;
  runId: string;
  assistant: AssistantRecord;
  /** `assistant` came from the HTTP thread's cache: what the run's create checks (RunsPort.create; ASSISTANT_CHANGED) */
  assistantCheck?: AssistantCheck;
  kwargs: RunKwargs;
  metadata: JsonObject;
  multitaskStrategy: MultitaskStrategy;
  ifNotExists: "reject" | "create";
  afterSeconds: number;
  /** stateless run: temporary thread, deleted after completion unless onCompletion is keep */
  stateless: boolean;
  onCompletion: "delete" | "keep";
  /**
   * Someone reads the run's events from the start (a create-and-stream request, a resumable run, a
   * thread stream on its thread): set by buildCreateRun, the one place that decides. Other runs keep
   * their events in the worker until run.observe (ShardPool.observeRun).
   */
  observed: boolean;
  /**
   * A request waits for the run's output (/wait, an MCP tool call): run.done carries it whatever
   * its size. Other runs' large outputs stay in the worker until run.output asks (run-outputs.ts).
   */
  outputAwaited: boolean;
  /**
   * The thread-centric protocol's run.start: a thread is bound to the assistant of its first run,
   * checked by the actor (in its mailbox order) so two concurrent first runs cannot both bind it.
   */
  requireBoundAssistant?: boolean;
}

/** Commands of one thread's actor, run in its mailbox order (src/actors/thread-actor.ts). */
export type ActorCommand =
  | CreateRunCommand
  | { type: "run.cancel"; threadId: string; runId: string; action: "interrupt" | "rollback"; wait: boolean }
  /** `keepCheckpoints`: remove the run record only (an assistant's delete cascading to its runs) */
  | { type: "run.delete"; threadId: string; runId: string; keepCheckpoints?: boolean }
  | {
      type: "thread.create";
      threadId: string;
      metadata: JsonObject;
      ifExists: "raise" | "do_nothing";
      supersteps?: { updates: { values?: Json; command?: JsonObject | null; as_node: string }[] }[];
      graphAssistant?: AssistantRecord;
      /** the id was generated for this request: nobody else knows the thread yet (a cluster node creates it without its lease) */
      fresh?: boolean;
      /** cluster, fresh, a node alone: take the thread's lease in the create's statement (ThreadsPort.createTaking) */
      take?: LeaseTake;
    }
  | { type: "thread.patch"; threadId: string; metadata: JsonObject }
  | { type: "thread.patch_state"; threadId: string; metadata: JsonObject; checkpointId?: string }
  /**
   * `ifExpired`: a TTL sweep's delete, done only if the thread is still as the sweep judged it: no
   * run running or queued and updated_at unchanged (else `deleted: false`; a run that started
   * after the sweep's read must not be killed by it)
   */
  | { type: "thread.delete"; threadId: string; ifExpired?: { updatedAt: string } }
  | { type: "thread.copy"; threadId: string; newThreadId: string }
  /** prune strategy keep_latest: drop all but the latest checkpoint (refused while a run is queued or running) */
  | { type: "thread.prune_history"; threadId: string }
  | { type: "thread.state"; threadId: string; checkpoint?: CheckpointSelector; subgraphs: boolean; assistant?: AssistantRecord }
  | {
      type: "thread.update_state";
      threadId: string;
      values: Json | undefined;
      asNode?: string;
      checkpoint?: CheckpointSelector;
      assistant?: AssistantRecord;
    }
  | {
      type: "thread.history";
      threadId: string;
      limit: number;
      before?: string;
      metadata?: JsonObject;
      checkpoint?: CheckpointSelector;
      assistant?: AssistantRecord;
    };

/**
 * Commands the shard answers itself, outside every actor's mailbox: run event gates and kept
 * outputs live in the shard, and describing a graph needs no thread. `threadId` (or the
 * assistant id) only picks the shard.
 */
export type ShardCommand =
  /** a reader joined an unobserved run: send its buffered events (when replay) and then live ones */
  | { type: "run.observe"; threadId: string; runId: string; replay: boolean }
  /** the output of a finished run whose run.done came without it (ShardPool.runOutput) */
  | { type: "run.output"; threadId: string; runId: string }
  /**
   * cluster: this node took the thread's lease; its writes are fenced by `epoch` from now on and
   * its actor re-admits the thread's pending and running runs (as after a restart); `fenceOnly`:
   * the acquire saw none, the fence alone
   */
  | {
      type: "thread.recover";
      threadId: string;
      epoch: number;
      fenceOnly?: boolean;
      /** the thread's record read right after the lease was taken (null: none): its actor starts from it, no read */
      thread?: ThreadRecord | null;
      /** read with `thread`: the thread had no root checkpoint then (its savers answer the first latest-checkpoint read with none) */
      noCheckpoints?: boolean;
    }
  /** cluster: this node lost the thread's lease; its actor stops at once and writes nothing more (the new owner recovers the runs) */
  | { type: "thread.abandon"; threadId: string }
  | {
      type: "graph.describe";
      assistant: AssistantRecord;
      what: "graph" | "schemas" | "subgraphs";
      xray: boolean | number;
      namespace?: string;
      recurse: boolean;
    };

/** The four schemas of one graph (`/schemas` wire names); null when the graph does not expose that one. */
export interface GraphSchemas {
  input_schema: JsonObject | null;
  output_schema: JsonObject | null;
  state_schema: JsonObject | null;
  config_schema: JsonObject | null;
  context_schema: JsonObject | null;
}

/** What a loaded graph says about its schemas (graph.describe `schemas`; `subgraphs` gives one per namespace). */
export interface DescribedSchemas {
  /** from zod / StateSchema definitions; null when the graph has none (then its TypeScript types decide) */
  runtime: GraphSchemas | null;
  /** from the state channels: names, messages lists typed; the fallback for what nothing else says */
  channels: GraphSchemas;
}

/** Either kind of command: what ShardPool.request sends. */
export type ShardRequest = ActorCommand | ShardCommand;

/** shutdown: start no new runs, let running ones finish for up to graceMs, then stop */
export type ToShard = { type: "request"; reqId: number; cmd: ShardRequest } | { type: "shutdown"; graceMs: number };

/** Wire event of a run stream; data is already serialized JSON text. */
export interface RunEvent {
  id: number;
  event: string;
  data: string;
}

export interface RunDone {
  runId: string;
  threadId: string;
  status: RunRecord["status"];
  /**
   * JSON of the /wait body, UTF-8: last values, {"__interrupt__": [...]} or {"__error__": {...}}.
   * Bytes, not a string: see json-segments.ts; jsonText() reads it as text. Absent when the worker
   * kept it (a large output nobody awaited, run-outputs.ts): ShardPool.runOutput fetches it.
   */
  output?: Uint8Array;
  threadStatus: ThreadStatus | "deleted";
}

export type FromShard =
  | { type: "reply"; reqId: number; ok: true; value: unknown }
  | { type: "reply"; reqId: number; ok: false; error: SerializedError }
  | { type: "run.start"; runId: string; threadId: string; resumable: boolean; attempt: number; protocol: boolean }
  | { type: "run.events"; runId: string; events: RunEvent[] }
  | { type: "run.done"; done: RunDone }
  /** cluster: the thread's actor was dropped from memory with nothing in flight (its lease may go) */
  | { type: "thread.idle"; threadId: string }
  /** cluster: a write of the thread under lease `epoch` was refused (the lease moved): the node gives that holding up */
  | { type: "thread.refused"; threadId: string; epoch: number };

/** Replies of the commands, keyed by command type. */
export interface ShardReplies {
  "run.create": RunRecord;
  "run.cancel": { found: boolean };
  "run.observe": { gated: boolean };
  /** null: the worker no longer has it (expired, or the server restarted since) */
  "run.output": { output: Uint8Array | null };
  "thread.recover": { runs: number };
  "thread.abandon": { abandoned: boolean };
  "run.delete": { deleted: boolean };
  /** `taken`: the lease the create took (`take`), fenced in the shard already; the HTTP thread holds it */
  "thread.create": ThreadRecord & { taken?: TakenLease };
  "thread.patch": ThreadRecord;
  "thread.patch_state": { patched: boolean };
  "thread.delete": { deleted: boolean };
  "thread.copy": ThreadRecord;
  "thread.prune_history": { pruned: boolean };
  "thread.state": JsonObject;
  "thread.update_state": { checkpoint: JsonObject; configurable: JsonObject };
  "thread.history": JsonObject[];
  "graph.describe": Json;
}

export interface ShardTask {
  shardIndex: number;
  shardCount: number;
  port: MessagePort;
  webhookPort: MessagePort | null;
  dataDir: string;
  /** the server's PostgreSQL (`--database-uri`); absent: LMDB in dataDir */
  databaseUri?: string;
  /** `--sync-commits` */
  syncCommits?: boolean;
  /** the server's cluster node id (Postgres) */
  nodeId?: string;
  /**
   * a cluster node (docs/CLUSTER.md): the shard recovers only threads whose lease this node takes
   * (thread.recover), not every active run at start, and reports actors dropped when idle (thread.idle)
   */
  cluster?: boolean;
  graphs: GraphSpecLite[];
  /** env vars from the config, applied in the worker before graphs load */
  env: Record<string, string>;
  /** store item TTLs (config `store.ttl`) as the graphs' store applies them */
  storeTtl?: StoreTtlOptions;
  /** semantic index of the store (config `store.index`, module embed function) */
  storeIndex?: StoreIndexOptions;
  /** the user's modules compiled by the main thread (graphs, embed function): workers run no tsx */
  modules: CompiledModules;
  /** this shard's slot on the server's idle board (src/util/idle-gc.ts) */
  idleBoard: IdleBoardSlot;
  /** the run metrics board of all shards (src/bridge/shard-metrics.ts); this shard writes region shardIndex */
  metricsBoard: SharedArrayBuffer;
  /** level and format of the structured log */
  log: LogOptions;
}

export type { StoreIndexOptions } from "../storage/store-index.ts";
import type { CompiledModules } from "../loader/compile-modules.ts";
import type { IdleBoardSlot } from "../util/idle-gc.ts";
import type { LogOptions } from "../log/logger.ts";
import type { StoreIndexOptions } from "../storage/store-index.ts";
import type { AssistantCheck, LeaseTake, TakenLease } from "../storage/port.ts";

export interface StoreTtlOptions {
  /** TTL of items written without one (graphs always write without one); null: none */
  defaultTtlMinutes: number | null;
  /** reads (get, search) push an item's expiry out by its TTL again */
  refreshOnRead: boolean;
}

export interface GraphSpecLite {
  graphId: string;
  filePath: string;
  exportName: string;
}
