// The secondary indexes' shape in LMDB: one dupSort DB per indexed resource. An entry is an
// index key (what is looked up: ["s", "idle"], ["m", "kuser_id", "sann"]) and a sorted duplicate
// value naming the record, whose first parts order the record within that key ([created_at, id]
// for threads, assistants and crons; [namespace, key] for store items). LMDB counts a key's
// duplicates in O(1) (mdb_cursor_count), which is what the planner's estimates and counts read.
// Entries are written in the same transaction (or lmdb-js batch) as their record, by the
// resource's write functions only; `indexDiff` computes what a record change adds and removes.
import type { Database } from "lmdb";
import type { Key, RecordsDb } from "../env.ts";

/** An index key: the kind of entry first, then its parts. */
export type IndexKey = string[];
/** A duplicate value: the record's position within its key, ending with (or being) its primary key. */
export type IndexDup = string[];
export interface IndexEntry {
  key: IndexKey;
  dup: IndexDup;
}

export type IndexDb = Database<IndexDup, IndexKey>;

const signature = (e: IndexEntry): string => `${e.key.join("\u0001")}\u0002${e.dup.join("\u0001")}`;

/** Queues the removal of `prev`'s entries that `next` lacks and the put of `next`'s new ones (call inside a transaction or batch). */
export function applyIndexDiff(index: IndexDb, prev: readonly IndexEntry[], next: readonly IndexEntry[]): void {
  if (prev.length === 0) {
    for (const e of next) index.put(e.key, e.dup);
    return;
  }
  const before = new Map(prev.map((e) => [signature(e), e]));
  for (const e of next) {
    const sig = signature(e);
    if (before.has(sig)) before.delete(sig);
    else index.put(e.key, e.dup);
  }
  for (const e of before.values()) index.remove(e.key, e.dup);
}

/** The writable DB behind a RecordsDb: for the put/remove functions in storage/ that keep its indexes. */
export const writable = <V, K extends Key>(db: RecordsDb<V, K>): Database<V, K> => db as Database<V, K>;

/** Queues a record and its entries' changes from `prev` (the record it replaces, or undefined); inside a transaction or batch. */
export function putIndexed<V, K extends Key>(db: RecordsDb<V, K>, index: IndexDb, key: K, next: V, prev: V | undefined, entries: (r: V) => IndexEntry[]): void {
  writable(db).put(key, next);
  applyIndexDiff(index, prev === undefined ? [] : entries(prev), entries(next));
}

/** Queues the removal of a record (as read in the same transaction) and its entries. */
export function removeIndexed<V, K extends Key>(db: RecordsDb<V, K>, index: IndexDb, key: K, prev: V, entries: (r: V) => IndexEntry[]): void {
  writable(db).remove(key);
  applyIndexDiff(index, entries(prev), []);
}
