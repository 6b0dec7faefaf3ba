// Assistant records and their secondary index (`idx_assistants`). Entries of an assistant, each
// with the duplicate [created_at, assistant_id] unless noted:
//   ["@c"]                every assistant (the created_at order)
//   ["@u"]                duplicate [updated_at, created_at, assistant_id] (the updated_at order)
//   ["g", graph_id]       its graph
//   ["m", key, spelling]  each top-level metadata pair with a scalar, null or array value
// `name` filters are case-insensitive substrings: no entry decides them, so they are checked on
// the records the other conditions leave (all assistants when there is none).
import { matchesFilter } from "../../domain/lifecycle.ts";
import { matchesAuthFilter } from "../../auth/filter.ts";
import type { Storage } from "../env.ts";
import type { AssistantRecord, JsonObject } from "../records.ts";
import { applyIndexDiff, writable, type IndexEntry, type IndexKey } from "./index-db.ts";
import { authFilterTerms, metadataEntries, metadataFilterTerms, noTerms } from "./metadata-terms.ts";
import { countRecords, searchRecords, type Collection, type Page, type RecordQuery } from "./planner.ts";

const ALL: IndexKey = ["@c"];
const BY_UPDATED: IndexKey = ["@u"];

export function assistantEntries(a: AssistantRecord): IndexEntry[] {
  const at = [a.created_at, a.assistant_id];
  const out: IndexEntry[] = [
    { key: ALL, dup: at },
    { key: BY_UPDATED, dup: [a.updated_at, a.created_at, a.assistant_id] },
    { key: ["g", a.graph_id], dup: at },
  ];
  metadataEntries("m", a.metadata, at, out);
  return out;
}

/** Queues an assistant record with its index entries (inside a transaction); `prev` as read in it. */
export function putAssistant(s: Storage, next: AssistantRecord, prev: AssistantRecord | undefined): void {
  writable(s.assistants).put(next.assistant_id, next);
  applyIndexDiff(s.assistantIndex, prev === undefined ? [] : assistantEntries(prev), assistantEntries(next));
}

export function removeAssistant(s: Storage, prev: AssistantRecord): void {
  writable(s.assistants).remove(prev.assistant_id);
  applyIndexDiff(s.assistantIndex, assistantEntries(prev), []);
}

export interface AssistantFilter {
  metadata?: JsonObject;
  graph_id?: string;
  /** case-insensitive substring of the name */
  name?: string;
  auth?: Record<string, unknown>;
}

export type AssistantSort = "assistant_id" | "graph_id" | "created_at" | "updated_at" | "name";

export interface AssistantSearch extends AssistantFilter {
  sortBy: AssistantSort;
  order: "asc" | "desc";
  offset: number;
  limit: number;
}

function collection(s: Storage): Collection<AssistantRecord> {
  return {
    root: s.root,
    index: s.assistantIndex,
    records: s.assistants,
    all: ALL,
    position: (a) => [a.created_at, a.assistant_id],
    orders: { updated_at: BY_UPDATED },
    groups: {},
    idField: "assistant_id",
    sortValue: (a, field) => a[field as AssistantSort],
  };
}

function query(f: AssistantFilter): RecordQuery<AssistantRecord> {
  const t = noTerms();
  if (f.graph_id) t.terms.push(["g", f.graph_id]);
  metadataFilterTerms("m", f.metadata, t);
  authFilterTerms("m", f.auth, t);
  const name = f.name?.toLowerCase();
  if (name) t.exact = false;
  const { metadata, graph_id, auth } = f;
  return {
    ...t,
    matches: (a) =>
      (!graph_id || a.graph_id === graph_id) &&
      (!name || a.name.toLowerCase().includes(name)) &&
      (!metadata || matchesFilter(metadata, a.metadata)) &&
      matchesAuthFilter(auth, a.metadata),
  };
}

export function searchAssistants(s: Storage, q: AssistantSearch): Promise<Page<AssistantRecord>> {
  return searchRecords(collection(s), query(q), { sortBy: q.sortBy, order: q.order, offset: q.offset, limit: q.limit });
}

export function countAssistants(s: Storage, f: AssistantFilter): Promise<number> {
  return countRecords(collection(s), query(f));
}
