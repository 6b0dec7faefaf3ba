// Assistant records and their secondary index (`idx_assistants`). Entries of an assistant, each
// with the duplicate [created_at, assistant_id] unless noted:
//   ["@c"]                every assistant (the created_at order)
//   ["@u"]                duplicate [updated_at, created_at, assistant_id] (the updated_at order)
//   ["g", graph_id]       its graph (ids spelled by indexName, as everywhere)
//   ["m", key, spelling]  each top-level metadata pair with a scalar, null or array value
// `name` filters are case-insensitive substrings: no entry decides them, so they are checked on
// the records the other conditions leave (all assistants when there is none).
import { matchesFilter } from "../../domain/lifecycle.ts";
import { matchesAuthFilter } from "../../auth/filter.ts";
import type { Storage } from "../env.ts";
import type { AssistantRecord } from "../records.ts";
import { putIndexed, removeIndexed, type IndexEntry } from "./index-db.ts";
import { indexName } from "./index-value.ts";
import { authFilterTerms, metadataEntries, metadataFilterTerms, noTerms } from "./metadata-terms.ts";
import { countRecords, createdOrderCollection, orderEntries, searchRecords, type RecordQuery } from "./planner.ts";
import type { AssistantFilter, AssistantSort, Page, PageSpec } from "../port.ts";

export function assistantEntries(a: AssistantRecord): IndexEntry[] {
  const { at, entries } = orderEntries(a, a.assistant_id);
  entries.push({ key: ["g", indexName(a.graph_id)], dup: at });
  metadataEntries("m", a.metadata, at, entries);
  return entries;
}

/** Queues an assistant record with its index entries (inside a transaction); `prev` as read in it. */
export function putAssistant(s: Storage, next: AssistantRecord, prev: AssistantRecord | undefined): void {
  putIndexed(s.assistants, s.assistantIndex, next.assistant_id, next, prev, assistantEntries);
}

export function removeAssistant(s: Storage, prev: AssistantRecord): void {
  removeIndexed(s.assistants, s.assistantIndex, prev.assistant_id, prev, assistantEntries);
}

export type { AssistantFilter, AssistantSort };
export type AssistantSearch = AssistantFilter & PageSpec<AssistantSort>;

const collection = (s: Storage) =>
  createdOrderCollection<AssistantRecord>({ root: s.root, index: s.assistantIndex, records: s.assistants, id: (a) => a.assistant_id, idField: "assistant_id" });

function query(f: AssistantFilter): RecordQuery<AssistantRecord> {
  const t = noTerms();
  if (f.graph_id) t.terms.push(["g", indexName(f.graph_id)]);
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
  return searchRecords(collection(s), query(q), q);
}

export function countAssistants(s: Storage, f: AssistantFilter): Promise<number> {
  return countRecords(collection(s), query(f));
}
