// Cron records and their secondary index (`idx_crons`). Entries of a cron, each with the
// duplicate [created_at, cron_id] unless noted:
//   ["@c"]                every cron (the created_at order)
//   ["@u"]                duplicate [updated_at, created_at, cron_id] (the updated_at order)
//   ["a", assistant_id]   its assistant
//   ["t", thread_id]      its thread (thread crons only)
//   ["e", "t" | "f"]      enabled
//   ["m", key, spelling]  each top-level metadata pair with a scalar, null or array value
// Sorting by another field (next_run_date, end_time, thread_id, assistant_id) sorts the matches.
import { matchesFilter } from "../../domain/lifecycle.ts";
import { matchesAuthFilter } from "../../auth/filter.ts";
import type { Storage } from "../env.ts";
import type { CronRecord, JsonObject } from "../records.ts";
import { applyIndexDiff, writable, type IndexEntry, type IndexKey } from "./index-db.ts";
import { authFilterTerms, metadataEntries, metadataFilterTerms, noTerms } from "./metadata-terms.ts";
import { countRecords, searchRecords, type Collection, type Page, type RecordQuery } from "./planner.ts";

const ALL: IndexKey = ["@c"];
const BY_UPDATED: IndexKey = ["@u"];

export function cronEntries(c: CronRecord): IndexEntry[] {
  const at = [c.created_at, c.cron_id];
  const out: IndexEntry[] = [
    { key: ALL, dup: at },
    { key: BY_UPDATED, dup: [c.updated_at, c.created_at, c.cron_id] },
    { key: ["a", c.assistant_id], dup: at },
    { key: ["e", c.enabled ? "t" : "f"], dup: at },
  ];
  if (c.thread_id !== null) out.push({ key: ["t", c.thread_id], dup: at });
  metadataEntries("m", c.metadata, at, out);
  return out;
}

/** Queues a cron record with its index entries (inside a transaction); `prev` as read in it. */
export function putCron(s: Storage, next: CronRecord, prev: CronRecord | undefined): void {
  writable(s.crons).put(next.cron_id, next);
  applyIndexDiff(s.cronIndex, prev === undefined ? [] : cronEntries(prev), cronEntries(next));
}

export function removeCron(s: Storage, prev: CronRecord): void {
  writable(s.crons).remove(prev.cron_id);
  applyIndexDiff(s.cronIndex, cronEntries(prev), []);
}

export interface CronFilter {
  assistant_id?: string | null;
  thread_id?: string | null;
  enabled?: boolean | null;
  metadata?: JsonObject | null;
  auth?: Record<string, unknown>;
}

export type CronSort = "cron_id" | "assistant_id" | "thread_id" | "next_run_date" | "end_time" | "created_at" | "updated_at";

export interface CronSearch extends CronFilter {
  sortBy: CronSort;
  order: "asc" | "desc";
  offset: number;
  limit: number;
}

function collection(s: Storage): Collection<CronRecord> {
  return {
    root: s.root,
    index: s.cronIndex,
    records: s.crons,
    all: ALL,
    position: (c) => [c.created_at, c.cron_id],
    orders: { updated_at: BY_UPDATED },
    groups: {},
    idField: "cron_id",
    sortValue: (c, field) => c[field as CronSort],
  };
}

function query(f: CronFilter): RecordQuery<CronRecord> {
  const t = noTerms();
  if (f.assistant_id != null) t.terms.push(["a", f.assistant_id]);
  if (f.thread_id != null) t.terms.push(["t", f.thread_id]);
  if (f.enabled != null) t.terms.push(["e", f.enabled ? "t" : "f"]);
  metadataFilterTerms("m", f.metadata, t);
  authFilterTerms("m", f.auth, t);
  const { assistant_id, thread_id, enabled, metadata, auth } = f;
  return {
    ...t,
    matches: (c) =>
      (assistant_id == null || c.assistant_id === assistant_id) &&
      (thread_id == null || c.thread_id === thread_id) &&
      (enabled == null || c.enabled === enabled) &&
      (metadata == null || matchesFilter(metadata, c.metadata)) &&
      matchesAuthFilter(auth, c.metadata),
  };
}

export function searchCrons(s: Storage, q: CronSearch): Promise<Page<CronRecord>> {
  return searchRecords(collection(s), query(q), { sortBy: q.sortBy, order: q.order, offset: q.offset, limit: q.limit });
}

export function countCrons(s: Storage, f: CronFilter): Promise<number> {
  return countRecords(collection(s), query(f));
}
