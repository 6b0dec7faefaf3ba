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
import type { ThreadRecord, ThreadStatus } from "../records.ts";
import { threadValues } from "../thread-values.ts";
import { putIndexed, removeIndexed, writable, type IndexEntry } from "./index-db.ts";
import { applyMetadataDiff, authFilterTerms, metadataEntries, metadataFilterTerms, noTerms } from "./metadata-terms.ts";
import { countRecords, createdOrderCollection, orderEntries, searchRecords, UPDATED_ORDER, type RecordQuery } from "./planner.ts";
import type { Page, PageSpec, ThreadFilter, ThreadSort } from "../port.ts";

const STATUSES: readonly ThreadStatus[] = ["busy", "error", "idle", "interrupted"]; // ascending

export function threadEntries(t: ThreadRecord): IndexEntry[] {
  const { at, entries } = orderEntries(t, t.thread_id);
  entries.push({ key: ["s", t.status], dup: at });
  metadataEntries("m", t.metadata, at, entries);
  return entries;
}

/**
 * Queues the write of a thread record with its index entries: call inside a transaction or
 * batch callback. `prev` is the record this one replaces — read inside the same transaction, or
 * the one this writer queued last (an actor's batches) — undefined for a new thread.
 */
export function putThread(s: Storage, next: ThreadRecord, prev: ThreadRecord | undefined): void {
  if (prev === undefined || prev.thread_id !== next.thread_id || prev.created_at !== next.created_at) {
    putIndexed(s.threads, s.threadIndex, next.thread_id, next, prev, threadEntries);
    return;
  }
  writable(s.threads).put(next.thread_id, next);
  const index = s.threadIndex;
  // run creates and finishes change updated_at and status: only those entries are rewritten
  const at = [next.created_at, next.thread_id];
  if (prev.updated_at !== next.updated_at) {
    index.remove(UPDATED_ORDER, [prev.updated_at, prev.created_at, prev.thread_id]);
    index.put(UPDATED_ORDER, [next.updated_at, next.created_at, next.thread_id]);
  }
  if (prev.status !== next.status) {
    index.remove(["s", prev.status], at);
    index.put(["s", next.status], at);
  }
  if (prev.metadata !== next.metadata) applyMetadataDiff(index, "m", prev.metadata, next.metadata, at);
}

/** Queues the removal of a thread record (as read in the same transaction) and its entries. */
export function removeThread(s: Storage, prev: ThreadRecord): void {
  removeIndexed(s.threads, s.threadIndex, prev.thread_id, prev, threadEntries);
}

export type { ThreadFilter, ThreadSort };
export type ThreadSearch = ThreadFilter & PageSpec<ThreadSort>;

/** Sorted by status, the planner walks the status keys in turn. */
const threadCollection = (s: Storage) =>
  createdOrderCollection<ThreadRecord>({
    root: s.root,
    index: s.threadIndex,
    records: s.threads,
    id: (t) => t.thread_id,
    idField: "thread_id",
    groups: { status: STATUSES.map((st) => ["s", st]) },
  });

function threadQuery(s: Storage, f: ThreadFilter): RecordQuery<ThreadRecord> {
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
  return searchRecords(threadCollection(s), threadQuery(s, q), q);
}

export function countThreads(s: Storage, f: ThreadFilter): Promise<number> {
  return countRecords(threadCollection(s), threadQuery(s, f));
}
