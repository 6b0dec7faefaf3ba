// The storage port: every durable operation of a deployment server, as one typed interface with
// two adapters (LMDB embedded, PostgreSQL). Types only: nothing is wired to it yet (issue 21
// phase B moves the call sites). The contract — what commits before a reply, what is atomic, what
// each adapter does — is docs/STORAGE.md; the comments here say only what a caller relies on.
/*
 * Conventions
 * - Reads are async. The LMDB adapter answers them from a synchronous LMDB read inside (an
 *   already-resolved promise), so awaiting one costs a microtask, not I/O.
 * - Writes resolve once committed, unless they return `Issued`: those are handed to the adapter
 *   synchronously, in call order, and `committed` settles later. Writes issued for one thread
 *   commit in the order they were issued (LMDB: its write queue; Postgres: a per-thread chain),
 *   which is what lets an actor start its next run before the previous run's outcome commits.
 * - One writer per record family: thread, run and checkpoint records are written only by the
 *   thread's actor (the cluster issue moves that ownership between nodes, never shares it);
 *   assistants, crons, store items and TTL settings by whoever calls (conditional writes say
 *   what they check atomically).
 * - Searches take the filter shapes of the indexes issue (src/storage/indexes/ on issue 20) and
 *   return a Page; both adapters return the same records in the same order.
 */
import type {
  BaseCheckpointSaver,
  BaseStore,
  CheckpointMetadata,
  ListNamespacesOperation,
  PutOperation,
  SearchOperation,
  SerializerProtocol,
} from "@langchain/langgraph-checkpoint";
import type { RunnableConfig } from "@langchain/core/runnables";
import type {
  AssistantRecord,
  AssistantVersionRecord,
  CronRecord,
  Json,
  JsonObject,
  RunRecord,
  RunStatus,
  StoreItemRecord,
  ThreadRecord,
  ThreadStatus,
  WebhookDeliveryRecord,
  WebhookOutcomeRecord,
} from "./records.ts";
import type { StoreIndexOptions } from "./store-index.ts";
import type { StoreTtlOptions } from "../bridge/messages.ts";

/** A write handed to the adapter, ordered after every earlier write of the same thread. */
export interface Issued<T = void> {
  readonly committed: Promise<T>;
}

export interface Page<R> {
  items: R[];
  /** how many records match in all (X-Pagination-Total) */
  total: number;
}

export interface PageSpec<S extends string> {
  sortBy: S;
  order: "asc" | "desc";
  offset: number;
  limit: number;
}

/** A custom auth handler's filter on metadata (reference §11.2): equality, or {$eq}/{$contains}. */
export type AuthFilter = Record<string, unknown>;

// ---- assistants (written on the HTTP thread) -------------------------------------------------

export interface AssistantFilter {
  metadata?: JsonObject;
  graph_id?: string;
  /** case-insensitive substring of the name */
  name?: string;
  auth?: AuthFilter;
}

export type AssistantSort = "assistant_id" | "graph_id" | "created_at" | "updated_at" | "name";

export interface AssistantWrite {
  graph_id: string;
  config: AssistantRecord["config"];
  context: Json;
  metadata: JsonObject;
  name: string;
  description: string | null;
}

/**
 * What a run's create must find still current of the assistant it was built with (RunsPort.create):
 * the assistant's row as a cache on the HTTP thread last read it. Made and consumed by the same
 * adapter (PostgreSQL; docs/STORAGE.md, "The assistant of a run").
 */
export interface AssistantCheck {
  assistantId: string;
  /** the adapter's stamp of the row version read (opaque) */
  stamp: string;
}

/** The assistant a run is created with; `check` set when it was answered from a cache. */
export interface RunAssistant {
  record: AssistantRecord;
  check?: AssistantCheck;
}

export interface AssistantsPort {
  get(assistantId: string): Promise<AssistantRecord | undefined>;
  /**
   * The assistant a run is created with. An adapter whose reads are round trips answers from a
   * cache on the calling thread, with the `check` the run's create makes (a changed or deleted
   * assistant fails it with ASSISTANT_CHANGED: nothing is written); `fresh` reads it now (the retry
   * after such a refusal), with no check, as `get` does. LMDB always reads (a local read).
   */
  forRun(assistantId: string, fresh: boolean): Promise<RunAssistant | undefined>;
  /** version 1 and its version row, atomically; "exists" when the id is taken (nothing written) */
  create(record: AssistantRecord): Promise<AssistantRecord | "exists">;
  /**
   * A new version (max + 1) from the latest, read-modify-write in one transaction: fields given
   * replace, `metadata` merges into the current one. undefined: no such assistant.
   */
  patch(assistantId: string, change: Partial<AssistantWrite>, now: string): Promise<AssistantRecord | undefined>;
  /** makes an existing version the latest (its config, metadata and name); undefined: no such assistant */
  setLatest(assistantId: string, version: number, now: string): Promise<AssistantRecord | "no-version" | undefined>;
  /** the assistant and all its versions; false when it did not exist */
  delete(assistantId: string): Promise<boolean>;
  versions(assistantId: string, q: { metadata?: JsonObject; offset: number; limit: number }): Promise<AssistantVersionRecord[]>;
  search(q: AssistantFilter & PageSpec<AssistantSort>): Promise<Page<AssistantRecord>>;
  count(f: AssistantFilter): Promise<number>;
  /** creates each graph's default assistant unless present (startup; concurrent servers create it once) */
  ensureDefaults(defaults: readonly AssistantRecord[]): Promise<void>;
}

// ---- threads (records written only by the thread's actor) ------------------------------------

export interface ThreadFilter {
  metadata?: JsonObject | null;
  /** matched against the thread's state values */
  values?: JsonObject | null;
  status?: ThreadStatus | null;
  ids?: readonly string[] | null;
  auth?: AuthFilter;
}

export type ThreadSort = "thread_id" | "status" | "created_at" | "updated_at";

export interface ThreadsPort {
  get(threadId: string): Promise<ThreadRecord | undefined>;
  /** the latest state values as JSON text (what run ends write), undefined when none */
  valuesJson(threadId: string): Promise<string | undefined>;
  search(q: ThreadFilter & PageSpec<ThreadSort>): Promise<Page<ThreadRecord>>;
  count(f: ThreadFilter): Promise<number>;
  /** the TTL set on the thread (minutes), if any */
  ttl(threadId: string): Promise<number | undefined>;
  /** sets (minutes) or clears (null) the thread's own TTL */
  setTtl(threadId: string, minutes: number | null): Promise<void>;
  /**
   * Thread ids after `after` in id order, at most `limit`, for the TTL sweeper: every thread
   * (`all`) or only those with a TTL of their own (such an id may name a thread already gone).
   */
  sweepCandidates(q: { all: boolean; after?: string; limit: number }): Promise<string[]>;

  // writes, by the thread's actor
  /** the record, unless one exists ("exists": nothing written) */
  create(record: ThreadRecord, valuesJson?: string): Promise<ThreadRecord | "exists">;
  /**
   * cluster (PostgreSQL): `create`, and the thread's lease taken for `take.nodeId` in the same
   * statement (a thread whose id the server just generated, on a node alone: its first run finds
   * the lease held here). Answers the holding (undefined: created, but a lease row stood), or
   * "exists" (nothing written). Absent where there are no leases (LMDB).
   */
  createTaking?(record: ThreadRecord, take: LeaseTake): Promise<TakenLease | undefined | "exists">;
  /**
   * Replaces the record, and the values when given (a state update, supersteps, metadata patch).
   * `prev`: the record it replaces as the actor last wrote or read it (undefined: none), as for
   * runs.create (the LMDB adapter diffs the index entries against it without reading).
   */
  save(record: ThreadRecord, valuesJson: string | undefined, prev: ThreadRecord | undefined): Promise<void>;
  /**
   * The record, its values, TTL, runs and their indexes and webhook outcomes, in one transaction
   * (checkpoints: CheckpointPort); `webhook`: a stateless run's delivery, enqueued in the same commit.
   */
  delete(threadId: string, webhook?: { runId: string; delivery: WebhookDeliveryRecord }): Promise<void>;
}

// ---- runs (written only by their thread's actor) ---------------------------------------------

export interface RunKey {
  threadId: string;
  runId: string;
}

export interface ActiveRun extends RunKey {
  run: RunRecord | undefined;
}

export interface RunsPort {
  get(threadId: string, runId: string): Promise<RunRecord | undefined>;
  /** whether the run's record exists (the actor's check at a run's end: no record to decode) */
  exists(threadId: string, runId: string): Promise<boolean>;
  /** the thread of a run, for routes that name only the run */
  threadOf(runId: string): Promise<string | undefined>;
  /** a thread's runs oldest first (run ids are UUID v7), optionally of one status */
  list(threadId: string, q: { status?: RunStatus; offset: number; limit: number }): Promise<RunRecord[]>;
  /** the thread's newest run */
  latest(threadId: string): Promise<RunRecord | undefined>;
  /**
   * Pending and running runs, of one thread or all (recovery, bulk cancel), oldest first per
   * thread; `run` undefined: an active entry whose record is gone (left by a crash: dropActive).
   */
  active(threadId?: string): AsyncIterable<ActiveRun>;
  /** runs of an assistant (assistant delete, A2A tasks), of one thread or all, in [thread_id, run_id] order */
  ofAssistant(assistantId: string, threadId?: string): AsyncIterable<RunRecord>;

  // writes, by the thread's actor; each is one atomic commit. `prev` is the thread record the
  // write replaces as the actor last wrote it (the LMDB adapter diffs the thread's index entries
  // against it; Postgres may ignore it).
  /**
   * The run (pending, listed active) and the thread's next record. A run superseding others
   * (multitask interrupt/rollback) commits in the same unit the running run's record with its
   * recorded stop (`running`) and the end of each queued run it stopped (`stopped`). `assistant`:
   * the check of a cached assistant (AssistantsPort.forRun); when the assistant's row is no longer
   * the one checked, nothing is written and the create fails ASSISTANT_CHANGED.
   */
  create(c: {
    run: RunRecord;
    thread: ThreadRecord;
    prev: ThreadRecord | undefined;
    running?: RunRecord;
    stopped?: readonly QueuedStop[];
    assistant?: AssistantCheck;
  }): Issued;
  /** replaces an existing run's record: its start (running, attempt + 1), a stop recorded while it runs (cancel_reason) */
  save(run: RunRecord): Issued;
  /**
   * A run's end: its final record (or its removal, for a rollback), no longer active, the thread's
   * record with its values (undefined: the thread has none), and its webhook delivery (the outbox).
   */
  finish(end: {
    run: RunRecord | { rolledBack: RunKey };
    thread: ThreadRecord;
    prev: ThreadRecord;
    valuesJson: Uint8Array | undefined;
    webhook?: WebhookDeliveryRecord;
  }): Issued;
  /**
   * A queued run ended by a stop on its own (cancel): its end as `stop` says, and the thread's
   * record (read in the same unit) with `threadStatus` and `updated_at` = `now`, nothing else
   * changed (the actor keeps that record without reading it); nothing for the thread when it is gone.
   */
  stopQueued(threadId: string, stop: QueuedStop, threadStatus: ThreadStatus, now: string): Promise<void>;
  /** a run whose thread was deleted while it ran: its record, run→thread and active entries go; its webhook delivery is enqueued */
  discard(key: RunKey, webhook?: WebhookDeliveryRecord): Promise<void>;
  /** a finished run deleted: its record, run→thread entry and webhook outcome (its checkpoints: CheckpointPort.deleteCheckpointsOfRun) */
  delete(threadId: string, runId: string): Promise<void>;
  /** an active-run entry whose run record is gone (left by a crash) */
  dropActive(key: RunKey): Promise<void>;
}

/** How a stop ends a queued run: interrupt writes its final record (and enqueues its webhook), rollback removes it. */
export type QueuedStop = { final: RunRecord; webhook?: WebhookDeliveryRecord } | { rolledBack: RunKey };

// ---- checkpoints ------------------------------------------------------------------------------

/** Checkpoint operations on whole threads and runs, beyond BaseCheckpointSaver (ThreadCheckpointOps). */
export interface ThreadCheckpointOps {
  deleteThread(threadId: string): Promise<void>;
  copyThread(fromThreadId: string, toThreadId: string): Promise<void>;
  /** how many checkpoints went */
  deleteCheckpointsOfRun(threadId: string, runId: string): Promise<number>;
  hasCheckpointOfRun(threadId: string, runId: string): Promise<boolean>;
  hasCheckpoint(threadId: string, ns: string, checkpointId: string): Promise<boolean>;
  pruneToLatest(threadId: string): Promise<number>;
  patchMetadata(threadId: string, patch: Record<string, unknown>, checkpointId?: string): Promise<boolean>;
  /**
   * the thread's checkpoint writes issued from now on reach the database only after `until`
   * settles. With `refuseUntil`, a rejected `until` fails them instead (nothing of them is
   * written), and so every checkpoint write of the thread issued before `refuseUntil` settles
   * (a run started before its create committed: a failed create leaves none of its checkpoints)
   */
  holdWritesUntil(threadId: string, until: Promise<unknown>, refuseUntil?: Promise<unknown>): void;
  /**
   * the checkpoint writes of the run execution `execution` (configurable EXECUTION_KEY: a run
   * started before its create committed) fail from now on, whenever they come: its create failed,
   * and LangGraph may still put a checkpoint after an aborted run's stream has ended (its loop
   * runs on, past holdWritesUntil's refusal). Absent where runs never start before their create
   * commits (LMDB).
   */
  refuseExecution?(execution: string): void;
  /** resolves once the thread's checkpoint writes issued so far settled; rejects (once) with a failure of one of them */
  flush(threadId: string): Promise<void>;
  /**
   * cluster: the thread had no root checkpoint as read right after this node took its lease under
   * `epoch` (the fence: nobody else writes its checkpoints while that holding stands), so its
   * savers may answer the latest root checkpoint with none, without a read, until they write the
   * thread or the holding changes. Absent where there are no leases (LMDB).
   */
  learnNoCheckpoints?(threadId: string, epoch: number): void;
}

export interface CheckpointSaverOptions {
  /** the graph's own library copy's serializer */
  serde?: SerializerProtocol;
  /** what each put stores as the checkpoint's metadata (the server adds the run's keys) */
  putMetadata?: (config: RunnableConfig, metadata: CheckpointMetadata) => CheckpointMetadata;
}

export interface CheckpointSavers {
  saver(opts?: CheckpointSaverOptions): BaseCheckpointSaver & ThreadCheckpointOps;
}

export interface CheckpointPort {
  /** the savers on this storage; the first call loads LangGraph's checkpoint library (kept off the HTTP thread) */
  open(): Promise<CheckpointSavers>;
}

// ---- store (BaseStore items; written by graphs and the /store routes) ----------------------

/** How a store handle applies TTLs and semantic search (config `store.ttl`, `store.index`). */
export interface StoreOptions {
  ttl?: StoreTtlOptions;
  index?: StoreIndexOptions;
}

/**
 * The store as graphs (`BaseStore`, their `config.store`) and the /store routes use it. Reads see
 * every commit that resolved in any thread; expired items (TTL) are hidden. Result order of
 * searches and namespace lists is key order (namespace labels, then key) unless ranked.
 */
export interface ItemStore extends BaseStore {
  /** one item, null when absent or expired */
  item(namespace: readonly string[], key: string): Promise<StoreItemRecord | null>;
  /** upserts (value: object) and deletes (value: null) in one commit; ttlMinutes null: none, undefined: the store's default */
  write(ops: readonly PutOperation[], ttlMinutes?: number | null): Promise<void>;
  /** matching items from op.offset, at most op.limit; ranked by similarity to op.query when the store has an index */
  searchItems(op: SearchOperation): Promise<(StoreItemRecord & { score?: number })[]>;
  /** matching items in key order, never ranked, at most op.limit (callers that bound a scan themselves) */
  scanItems(op: SearchOperation): Promise<StoreItemRecord[]>;
  /** `records` by similarity to `query`, best first, with scores (unchanged without an index) */
  rank(records: readonly StoreItemRecord[], query: string): Promise<(StoreItemRecord & { score?: number })[]>;
  /** pushes the expiry of these items (those with a TTL) out by their TTL again; not awaited by readers */
  refresh(records: readonly StoreItemRecord[]): void;
  /** distinct namespaces matching every condition ("*" matches any label), truncated to maxDepth */
  namespacesOf(op: ListNamespacesOperation): Promise<string[][]>;
}

export interface StorePort {
  /** a store handle; the first call may load LangGraph's BaseStore (kept off the HTTP thread until a /store route needs it) */
  open(opts: StoreOptions): Promise<ItemStore>;
  /** removes up to `limit` expired items with their TTL rows and vectors; how many went */
  sweepExpired(limit: number): Promise<number>;
}

// ---- crons (written on the HTTP thread: API and scheduler) ------------------------------------

export interface CronFilter {
  assistant_id?: string | null;
  thread_id?: string | null;
  enabled?: boolean | null;
  metadata?: JsonObject | null;
  auth?: AuthFilter;
}

export type CronSort = "cron_id" | "assistant_id" | "thread_id" | "next_run_date" | "end_time" | "created_at" | "updated_at";

export interface CronsPort {
  get(cronId: string): Promise<CronRecord | undefined>;
  search(q: CronFilter & PageSpec<CronSort>): Promise<Page<CronRecord>>;
  count(f: CronFilter): Promise<number>;
  /** every cron (the scheduler's start: it schedules the live ones and clears the others' next_run_date) */
  all(): Promise<CronRecord[]>;
  /** creates or replaces the cron */
  put(record: CronRecord): Promise<void>;
  /**
   * Replaces the cron with `change(current)` atomically (a tick persisting next_run_date never
   * undoes a concurrent PATCH or DELETE); `undefined` from change keeps it. Resolves to the stored
   * record; undefined: no such cron.
   */
  update(cronId: string, change: (current: CronRecord) => CronRecord | undefined): Promise<CronRecord | undefined>;
  /** false when the cron did not exist */
  remove(cronId: string): Promise<boolean>;
}

// ---- webhooks (the outbox: enqueued by the thread's actor, delivered by the webhook worker) ----

/**
 * A run's webhook delivery enters the outbox in the commit of the run's final record (its
 * finish, or the stop that ended it), so no crash loses it; the webhook worker makes the attempts,
 * records each retry, and ends it (delivered or given up), keeping the outcome while the run exists.
 */
export interface WebhooksPort {
  /** whether any delivery waits (the server then starts the webhook worker at once) */
  anyPending(): Promise<boolean>;
  /** every waiting delivery and when its next attempt is due (the worker's start) */
  pending(): Promise<{ key: RunKey; nextAttemptAt: string }[]>;
  /** a delivery still in the outbox */
  get(key: RunKey): Promise<WebhookDeliveryRecord | undefined>;
  /** how a run's finished delivery ended, while the run exists */
  outcome(key: RunKey): Promise<WebhookOutcomeRecord | undefined>;
  /** an attempt failed and will be retried: the delivery as it stays (attempts, next_attempt_at, last_attempt) */
  retry(key: RunKey, delivery: WebhookDeliveryRecord): Promise<void>;
  /** the delivery leaves the outbox; its outcome is kept if the run still exists (one commit) */
  end(key: RunKey, outcome: WebhookOutcomeRecord): Promise<void>;
}

/**
 * LMDB: the data file's size and the pages in use up to the highest one written. PostgreSQL: the
 * database's size and Troupe's tables (with their indexes and TOAST).
 */
export interface StorageUsage {
  fileBytes: number;
  usedBytes: number;
}

// ---- the whole port ------------------------------------------------------------------------

export interface StoragePort {
  readonly backend: "lmdb" | "postgres";
  readonly assistants: AssistantsPort;
  readonly threads: ThreadsPort;
  readonly runs: RunsPort;
  readonly checkpoints: CheckpointPort;
  readonly store: StorePort;
  readonly crons: CronsPort;
  readonly webhooks: WebhooksPort;
  /** how much space the records take, for /metrics (undefined when the store cannot tell, or is closed) */
  usage(): Promise<StorageUsage | undefined>;
  /** after a load burst: gives back memory the storage keeps mapped (LMDB: the data file's resident pages) */
  releaseMemory(): void;
  /**
   * Called when another thread or process may have committed (a shard's messages arrived): the
   * LMDB adapter renews its read snapshot (resetReadTxn); Postgres has nothing to do.
   */
  refreshReads(): void;
  /** cluster mode (Postgres only): a thread's writes (records, runs, checkpoints) fenced by its lease */
  readonly fences?: ThreadFences;
  close(): Promise<void>;
}

/**
 * Fenced writes (docs/CLUSTER.md): while a thread's holding is set, its writes — thread records
 * (create, save, delete), runs (create, start, finish, discard, a queued run's stop, delete) and
 * checkpoints (puts, pending writes, the saver's thread operations) — commit only while the lease
 * row still carries that epoch; a refused write rejects with an UNAVAILABLE error, after the
 * `refused` listener was told (the shard abandons the thread's actor: it must not write again).
 */
/** A lease to take with a thread's create (ThreadsPort.createTaking): for whom, for how long, stamped when (null: the database's clock). */
export interface LeaseTake {
  nodeId: string;
  ttlMs: number;
  stamp: Date | null;
}

/** A lease taken with a thread's create; `noCheckpoints`: the thread had no root checkpoint (as read in that statement). */
export interface TakenLease {
  epoch: number;
  expiresAt: Date;
  noCheckpoints: boolean;
}

export interface ThreadFences {
  fence(threadId: string, epoch: number): void;
  unfence(threadId: string): void;
  /** the epoch the thread's writes are fenced by now, if any */
  epochOf(threadId: string): number | undefined;
  /** a fenced write was refused: the holding of `epoch` is no longer the thread's lease */
  onRefused(listener: (threadId: string, epoch: number) => void): void;
}
