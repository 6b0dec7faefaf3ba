// One LMDB environment per data directory holds every durable record of a deployment server.
// Each thread (HTTP thread, actor workers, webhook worker) opens it independently: lmdb-js
// shares the memory map and serialises write transactions across threads and processes.
// Values are packed with msgpackr (lmdb-js' default "msgpack" encoding).
import { open, type Database, type RootDatabase } from "lmdb";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { IndexDb } from "./indexes/index-db.ts";
import type { IndexBuildState } from "./indexes/build.ts";
import type {
  AssistantRecord,
  AssistantVersionRecord,
  CronRecord,
  RunRecord,
  StoreItemRecord,
  ThreadRecord,
  WebhookDeliveryRecord,
  WebhookOutcomeRecord,
} from "./records.ts";

export type Key = string | number | (string | number)[];

/**
 * A records DB as code outside its write functions sees it: reads only. Threads, assistants,
 * crons and store items have secondary indexes (storage/indexes/) written in the same
 * transaction as the record, so their writes go through put/remove functions there, never
 * through the DB itself.
 */
export type RecordsDb<V, K extends Key> = Pick<Database<V, K>, "get" | "getRange" | "getKeys" | "doesExist" | "getKeysCount" | "getStats">;

/** A LangGraph channel version (integers by default; savers may use strings). */
export type StoredChannelVersion = number | string;

/** Blob key [channel, version, tag]; tag is "" unless the version collided (see checkpoints/lmdb-saver.ts). */
export type StoredBlobRef = [string, StoredChannelVersion, string];

export interface StoredCheckpoint {
  /** serde type tag + bytes of the Checkpoint without channel_values (LangGraph serializer of the graph's own library copy) */
  type: string;
  checkpoint: Uint8Array;
  metadataType: string;
  metadata: Uint8Array;
  parentId: string | null;
  /** metadata.run_id when it is a string: lets rollback find a run's checkpoints without deserialising */
  runId: string | null;
  /** blobs this checkpoint's put created (what rollback deletes with it) */
  blobs: StoredBlobRef[];
  /** channels whose current value sits under a non-empty tag: channel -> [version, tag] */
  tags?: Record<string, [StoredChannelVersion, string]>;
}

export interface StoredWrite {
  channel: string;
  type: string;
  value: Uint8Array;
  /** task path for writesSortKey ordering; "" when the caller gave none */
  taskPath: string;
  /** run_id from the putWrites config metadata, when known */
  runId: string | null;
}

/** One channel value: serde type tag + bytes. */
export interface StoredBlob {
  type: string;
  /** the value's bytes; for a chunked message list, only the messages after its chunks (see checkpoints/message-chunks.ts) */
  value: Uint8Array;
  /** ids of the leading chunks in `blobChunks` (same thread, namespace and channel), in order */
  chunks?: string[];
}

export interface Storage {
  root: RootDatabase;
  /** written by storage/lmdb/assistants.ts (with assistantIndex) */
  assistants: RecordsDb<AssistantRecord, string>;
  /** key [assistant_id, version] */
  assistantVersions: Database<AssistantVersionRecord, [string, number]>;
  /** written by putThread/removeThread (storage/indexes/threads.ts, with threadIndex) */
  threads: RecordsDb<ThreadRecord, string>;
  /** store item key [namespace joined by NUL, key] -> its TTL and when it expires (store.ts) */
  storeTtl: Database<{ minutes: number; expiresAt: number }, [string, string]>;
  /** store item key -> the embeddings of its indexed texts (store-index.ts) */
  storeVectors: Database<number[][], [string, string]>;
  /** thread_id -> time to live in minutes, set by `ttl` on create/update (src/ttl/thread-sweeper.ts) */
  threadTtl: Database<number, string>;
  /** thread_id -> JSON text of the thread's latest state values (absent: none yet) */
  threadValues: Database<string, string>;
  /** key [thread_id, run_id]; run ids are UUID v7 so a thread's runs iterate in creation order */
  runs: Database<RunRecord, [string, string]>;
  /** run_id -> thread_id, for routes that name only a run */
  runThread: Database<string, string>;
  /** key [thread_id, run_id] of every run that is pending or running: what recovery scans */
  activeRuns: Database<number, [string, string]>;
  /** key [thread_id, checkpoint_ns, checkpoint_id] */
  checkpoints: Database<StoredCheckpoint, [string, string, string]>;
  /** key [thread_id, checkpoint_ns, checkpoint_id, task_id, idx] */
  writes: Database<StoredWrite, [string, string, string, string, number]>;
  /** channel values, key [thread_id, checkpoint_ns, channel, version, tag]: written only when a channel changes */
  blobs: Database<StoredBlob, [string, string, string, StoredChannelVersion, string]>;
  /**
   * Same keys as `blobs`: a random stamp written with every blob, so a cached decoded value can be
   * checked without reading (and mapping into memory) the blob's bytes.
   */
  blobStamps: Database<number, [string, string, string, StoredChannelVersion, string]>;
  /** shared chunks of long message lists, key [thread_id, checkpoint_ns, channel, chunk id] (checkpoints/message-chunks.ts) */
  blobChunks: Database<Uint8Array, [string, string, string, string]>;
  /** key [...namespace labels joined by "\u0000", item key]; written by storage/indexes/store-items.ts (with storeItemIndex) */
  store: RecordsDb<StoreItemRecord, [string, string]>;
  /** written by storage/indexes/crons.ts (with cronIndex) */
  crons: RecordsDb<CronRecord, string>;
  /** secondary indexes (storage/indexes/index-db.ts): dupSort, key -> [position..., id] */
  threadIndex: IndexDb;
  assistantIndex: IndexDb;
  cronIndex: IndexDb;
  storeItemIndex: IndexDb;
  /** per indexed resource: the index layout version built and, while a build runs, how far it got (indexes/build.ts) */
  indexMeta: Database<IndexBuildState, string>;
  /** key [thread_id, run_id]: webhook deliveries not yet delivered or given up (the outbox) */
  webhookOutbox: Database<WebhookDeliveryRecord, [string, string]>;
  /** key [thread_id, run_id]: how each finished delivery ended, while its run exists */
  webhookOutcomes: Database<WebhookOutcomeRecord, [string, string]>;
  close(): Promise<void>;
}

export interface StorageOptions {
  /** fsync every commit (survives power loss); off = survives process crash (kill -9) only */
  syncCommits?: boolean;
}

/** The LMDB data file of a data dir. */
export function dataFilePath(dataDir: string): string {
  return join(dataDir, "troupe.mdb");
}

/**
 * Where each msgpack DB keeps its shared record structures. A symbol key sorts before every key we
 * write, and lmdb-js leaves it out of a range without a `start`; a range with an explicit
 * `start: undefined` includes it, so ranges leave absent bounds out instead.
 */
const STRUCTURES_KEY = Symbol.for("structures");

export function openStorage(dataDir: string, opts: StorageOptions = {}): Storage {
  mkdirSync(dataDir, { recursive: true });
  const options = {
    path: dataFilePath(dataDir),
    maxDbs: 32, // headroom above the named DBs below, so adding one needs no change here
    // 64 GiB of address space; the file grows as needed.
    mapSize: 64 * 1024 ** 3,
    // Default: commits reach the OS before we answer (survives kill -9), no fsync per commit
    // (power loss may lose the last commits). --sync-commits turns fsync on.
    noSync: opts.syncCommits !== true,
    compression: false,
    // Big checkpoint blobs are read once per step; kernel read-ahead would map (and count in RSS)
    // neighbouring pages we never touch.
    noReadAhead: true, // honoured by lmdb-js (MDB_NORDAHEAD) but missing from its typings
    // File-backed RSS: commits reach the file with pwrite, so written pages are page cache but not
    // mapped into this process; only pages *read* through the map count in RssFile (clean, and
    // reclaimable by the kernel). A writable map would map every written page too: keep it off
    // (lmdb-js default). `remapChunks` was measured not to shrink RssFile (reading 90 MB of 300 KB
    // values added ~90 MB either way), so the map stays static.
    useWritemap: false,
  };
  const root = open(options);
  // Shared structures (lmdb-js keeps each DB's record shapes under one key, msgpackr refers to them
  // by id): a run record packs in ~3 us instead of ~5.5, reads in ~2 us instead of ~5, and takes
  // 374 bytes instead of 680 (the keys are not written into every record). Records written
  // without them (older data dirs) still read: their shapes are inline.
  const db = <V, K extends Key>(name: string) => root.openDB<V, K>({ name, encoding: "msgpack", sharedStructuresKey: STRUCTURES_KEY });
  return {
    root,
    assistants: db("assistants"),
    assistantVersions: db("assistant_versions"),
    threads: db("threads"),
    threadTtl: db("thread_ttl"),
    storeTtl: db("store_ttl"),
    storeVectors: db("store_vectors"),
    threadValues: root.openDB<string, string>({ name: "thread_values", encoding: "string" }),
    runs: db("runs"),
    runThread: db("run_thread"),
    activeRuns: db("active_runs"),
    checkpoints: db("checkpoints"),
    writes: db("writes"),
    blobs: db("blobs"),
    blobStamps: db("blob_stamps"),
    blobChunks: root.openDB<Uint8Array, [string, string, string, string]>({ name: "blob_chunks", encoding: "binary" }),
    store: db("store"),
    crons: db("crons"),
    webhookOutbox: db("webhook_outbox"),
    webhookOutcomes: db("webhook_outcomes"),
    // ordered-binary duplicates: sorted as tuples, and usable as range bounds (planner.ts)
    threadIndex: root.openDB({ name: "idx_threads", dupSort: true, encoding: "ordered-binary" }),
    assistantIndex: root.openDB({ name: "idx_assistants", dupSort: true, encoding: "ordered-binary" }),
    cronIndex: root.openDB({ name: "idx_crons", dupSort: true, encoding: "ordered-binary" }),
    storeItemIndex: root.openDB({ name: "idx_store", dupSort: true, encoding: "ordered-binary" }),
    indexMeta: root.openDB<IndexBuildState, string>({ name: "index_meta", encoding: "msgpack" }),
    close: () => root.close(),
  };
}
