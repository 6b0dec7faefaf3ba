// Cron records and their secondary index (`idx_crons`). Entries of a cron, each with the
// duplicate [created_at, cron_id] unless noted:
//   ["@c"]                every cron (the created_at order)
//   ["@u"]                duplicate [updated_at, created_at, cron_id] (the updated_at order)
//   ["a", assistant_id]   its assistant (ids spelled by indexName, as everywhere)
//   ["t", thread_id]      its thread (thread crons only)
//   ["e", "t" | "f"]      enabled
//   ["m", key, spelling]  each top-level metadata pair with a scalar, null or array value
// Sorting by another field (next_run_date, end_time, thread_id, assistant_id) sorts the matches.
import { matchesFilter } from "../../domain/lifecycle.ts";
import { matchesAuthFilter } from "../../auth/filter.ts";
import type { Storage } from "../env.ts";
import type { CronRecord } from "../records.ts";
import { putIndexed, removeIndexed, type IndexEntry } from "./index-db.ts";
import { indexName } from "./index-value.ts";
import { authFilterTerms, metadataEntries, metadataFilterTerms, noTerms } from "./metadata-terms.ts";
import { countRecords, createdOrderCollection, orderEntries, searchRecords, type RecordQuery } from "./planner.ts";
import type { CronFilter, CronSort, Page, PageSpec } from "../port.ts";

export function cronEntries(c: CronRecord): IndexEntry[] {
  const { at, entries } = orderEntries(c, c.cron_id);
  entries.push({ key: ["a", indexName(c.assistant_id)], dup: at }, { key: ["e", c.enabled ? "t" : "f"], dup: at });
  if (c.thread_id !== null) entries.push({ key: ["t", indexName(c.thread_id)], dup: at });
  metadataEntries("m", c.metadata, at, entries);
  return entries;
}

/** Queues a cron record with its index entries (inside a transaction); `prev` as read in it. */
export function putCron(s: Storage, next: CronRecord, prev: CronRecord | undefined): void {
  putIndexed(s.crons, s.cronIndex, next.cron_id, next, prev, cronEntries);
}

export function removeCron(s: Storage, prev: CronRecord): void {
  removeIndexed(s.crons, s.cronIndex, prev.cron_id, prev, cronEntries);
}

export type { CronFilter, CronSort };
export type CronSearch = CronFilter & PageSpec<CronSort>;

const collection = (s: Storage) =>
  createdOrderCollection<CronRecord>({ root: s.root, index: s.cronIndex, records: s.crons, id: (c) => c.cron_id, idField: "cron_id" });

function query(f: CronFilter): RecordQuery<CronRecord> {
  const t = noTerms();
  if (f.assistant_id != null) t.terms.push(["a", indexName(f.assistant_id)]);
  if (f.thread_id != null) t.terms.push(["t", indexName(f.thread_id)]);
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
  return searchRecords(collection(s), query(q), q);
}

export function countCrons(s: Storage, f: CronFilter): Promise<number> {
  return countRecords(collection(s), query(f));
}
