// Thread records and their secondary index (`idx_threads`). Entries of a thread, each with the
// duplicate [created_at, thread_id] unless noted:
//   ["@c"]                   every thread (the created_at order)
//   ["@u"]                   every thread, duplicate [updated_at, created_at, thread_id] (the updated_at order)
//   ["s", status]            its status
//   ["m", key, spelling]     each top-level metadata pair with a scalar, null or array value
//                            (graph_id and assistant_id included); see metadata-terms.ts
// putThread/removeThread are the only writers of the `threads` DB: whoever writes a thread record
// writes its entries in the same transaction or batch, so a crash can never separate them.
// searchThreads/countThreads take plain query descriptions (a storage port's shape) and answer
// them through the planner (planner.ts).
import { matchesFilter } from "../../domain/lifecycle.ts";
import { matchesAuthFilter } from "../../auth/filter.ts";
import type { Storage } from "../env.ts";
import type { JsonObject, ThreadRecord, ThreadStatus } from "../records.ts";
import { threadValues } from "../thread-values.ts";
import { applyIndexDiff, writable, type IndexEntry, type IndexKey } from "./index-db.ts";
import { applyMetadataDiff, authFilterTerms, metadataEntries, metadataFilterTerms, noTerms } from "./metadata-terms.ts";
import { countRecords, searchRecords, type Collection, type Page, type PageSpec, type RecordQuery } from "./planner.ts";

const ALL: IndexKey = ["@c"];
const BY_UPDATED: IndexKey = ["@u"];
const STATUSES: readonly ThreadStatus[] = ["busy", "error", "idle", "interrupted"]; // ascending

export function threadEntries(t: ThreadRecord): IndexEntry[] {
  const at = [t.created_at, t.thread_id];
  const out: IndexEntry[] = [
    { key: ALL, dup: at },
    { key: BY_UPDATED, dup: [t.updated_at, t.created_at, t.thread_id] },
    { key: ["s", t.status], dup: at },
  ];
  metadataEntries("m", t.metadata, at, out);
  return out;
}

/**
 * Queues the write of a thread record with its index entries: call inside a transaction or
 * batch callback. `prev` is the record this one replaces — read inside the same transaction, or
 * the one this writer queued last (an actor's batches) — undefined for a new thread.
 */
export function putThread(s: Storage, next: ThreadRecord, prev: ThreadRecord | undefined): void {
  writable(s.threads).put(next.thread_id, next);
  const index = s.threadIndex;
  if (prev === undefined || prev.thread_id !== next.thread_id || prev.created_at !== next.created_at) {
    applyIndexDiff(index, prev === undefined ? [] : threadEntries(prev), threadEntries(next));
    return;
  }
  // run creates and finishes change updated_at and status: only those entries are rewritten
  const at = [next.created_at, next.thread_id];
  if (prev.updated_at !== next.updated_at) {
    index.remove(BY_UPDATED, [prev.updated_at, prev.created_at, prev.thread_id]);
    index.put(BY_UPDATED, [next.updated_at, next.created_at, next.thread_id]);
  }
  if (prev.status !== next.status) {
    index.remove(["s", prev.status], at);
    index.put(["s", next.status], at);
  }
  if (prev.metadata !== next.metadata) applyMetadataDiff(index, "m", prev.metadata, next.metadata, at);
}

/** Queues the removal of a thread record (as read in the same transaction) and its entries. */
export function removeThread(s: Storage, prev: ThreadRecord): void {
  writable(s.threads).remove(prev.thread_id);
  applyIndexDiff(s.threadIndex, threadEntries(prev), []);
}

/** The conditions of a thread search or count. */
export interface ThreadFilter {
  metadata?: JsonObject | null;
  /** matched against the thread's state values: no index, so its candidates' values are read */
  values?: JsonObject | null;
  status?: ThreadStatus | null;
  ids?: readonly string[] | null;
  /** a custom auth handler's filter on metadata */
  auth?: Record<string, unknown>;
}

export type ThreadSort = "thread_id" | "status" | "created_at" | "updated_at";

export interface ThreadSearch extends ThreadFilter {
  sortBy: ThreadSort;
  order: "asc" | "desc";
  offset: number;
  limit: number;
}

export function threadCollection(s: Storage): Collection<ThreadRecord> {
  return {
    root: s.root,
    index: s.threadIndex,
    records: s.threads,
    all: ALL,
    position: (t) => [t.created_at, t.thread_id],
    orders: { updated_at: BY_UPDATED },
    groups: { status: STATUSES.map((st) => ["s", st]) },
    idField: "thread_id",
    sortValue: (t, field) => t[field as ThreadSort],
  };
}

export function threadQuery(s: Storage, f: ThreadFilter): RecordQuery<ThreadRecord> {
  const t = noTerms();
  if (f.status) t.terms.push(["s", f.status]);
  metadataFilterTerms("m", f.metadata, t);
  authFilterTerms("m", f.auth, t);
  if (f.values) t.exact = false;
  const { metadata, values, status, auth } = f;
  return {
    ...t,
    ids: f.ids?.length ? f.ids : undefined,
    matches: (r) =>
      (!status || r.status === status) &&
      (!metadata || matchesFilter(metadata, r.metadata)) &&
      matchesAuthFilter(auth, r.metadata) &&
      (!values || matchesFilter(values, threadValues(s, r.thread_id) ?? {})),
  };
}

export function searchThreads(s: Storage, q: ThreadSearch): Promise<Page<ThreadRecord>> {
  const page: PageSpec = { sortBy: q.sortBy, order: q.order, offset: q.offset, limit: q.limit };
  return searchRecords(threadCollection(s), threadQuery(s, q), page);
}

export function countThreads(s: Storage, f: ThreadFilter): Promise<number> {
  return countRecords(threadCollection(s), threadQuery(s, f));
}
