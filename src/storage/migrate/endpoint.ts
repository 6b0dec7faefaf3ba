// What `troupe migrate` reads from one backend and writes to the other: every durable record of a
// deployment, family by family, each in an order of the source's own (a cursor only that source
// reads). Both backends are sources and targets. Records are copied as stored (timestamps,
// versions, TTL expiry, embeddings kept); checkpoints go through each backend's checkpointer
// (copy.ts), so each stores them in its own layout.
import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import type { ThreadCheckpointOps } from "../port.ts";
import type {
  AssistantRecord,
  AssistantVersionRecord,
  CronRecord,
  RunRecord,
  StoreItemRecord,
  ThreadRecord,
  WebhookDeliveryRecord,
  WebhookOutcomeRecord,
} from "../records.ts";

export interface AssistantCopy {
  record: AssistantRecord;
  /** every version, oldest first */
  versions: AssistantVersionRecord[];
}

/** A thread's records (its checkpoints are copied through the savers). */
export interface ThreadCopy {
  record: ThreadRecord;
  /** the latest state values as JSON text */
  valuesJson?: string;
  /** the thread's own TTL in minutes */
  ttl?: number;
  /** oldest first */
  runs: RunRecord[];
  /** webhook deliveries still in the outbox, by run id */
  deliveries: [string, WebhookDeliveryRecord][];
  /** how finished deliveries ended, by run id */
  outcomes: [string, WebhookOutcomeRecord][];
}

export interface StoreItemCopy {
  record: StoreItemRecord;
  ttl?: { minutes: number; expiresAt: number };
  /** embeddings of the item's indexed texts (semantic search) */
  vectors?: number[][];
}

export type Family = "assistants" | "crons" | "store" | "threads";
export const FAMILIES: readonly Family[] = ["assistants", "crons", "store", "threads"];

/** A position in a family's order, as the source that made it reads it (JSON). */
export type Cursor = string | string[];

export interface Copied<T> {
  item: T;
  /** where the next read resumes after this item */
  cursor: Cursor;
}

/** What the copy needs of a checkpointer: BaseCheckpointSaver, removing a thread, and waiting for queued writes (LMDB). */
export type CheckpointSaver = BaseCheckpointSaver & Pick<ThreadCheckpointOps, "deleteThread"> & { flush?(threadId?: string): Promise<void> };

/** How far a copy from one source got (kept in the target). */
export interface MigrationProgress {
  source: string;
  /** families finished */
  done: Family[];
  /** the family being copied and the cursor of the last item committed */
  current?: { family: Family; after: Cursor };
  /** records copied so far per family */
  copied: Partial<Record<Family, number>>;
}

export interface MigrationEndpoint {
  /** what it is, without secrets: "lmdb:/path" or "postgres://host:port/db" */
  readonly label: string;
  count(family: Family): Promise<number>;
  assistants(after?: Cursor): AsyncIterable<Copied<AssistantCopy>>;
  crons(after?: Cursor): AsyncIterable<Copied<CronRecord>>;
  storeItems(after?: Cursor): AsyncIterable<Copied<StoreItemCopy>>;
  threads(after?: Cursor): AsyncIterable<Copied<ThreadCopy>>;
  readonly saver: CheckpointSaver;

  /** replaces the assistant and all its versions */
  putAssistant(a: AssistantCopy): Promise<void>;
  putCron(c: CronRecord): Promise<void>;
  putStoreItems(items: readonly StoreItemCopy[]): Promise<void>;
  /** replaces the threads' records (their runs, values, TTLs, webhook rows) in one write; checkpoints: the saver */
  putThreads(threads: readonly ThreadCopy[]): Promise<void>;
  /** which of these threads may have checkpoints here (the copy clears only those before putting the source's) */
  threadsWithCheckpoints(threadIds: readonly string[]): Promise<Set<string>>;

  readProgress(source: string): Promise<MigrationProgress | undefined>;
  writeProgress(p: MigrationProgress): Promise<void>;
  close(): Promise<void>;
}
