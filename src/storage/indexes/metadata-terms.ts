// Metadata filters as index terms. Records index each top-level metadata pair whose value is a
// string, number, boolean, null or array (objects are not indexed) under [kind, key, spelling]
// (index-value.ts). A filter condition becomes a term when the entry decides it exactly:
//   - search filters (domain/lifecycle.ts matchesFilter): a scalar or array value is equality;
//     null never matches (the record's value must be non-null); an object value matches as a
//     subset of a nested object, which no entry decides (left to the record);
//   - auth filters (auth/filter.ts matchesAuthFilter): a scalar, null or array value, or
//     {$eq: that}, is equality; $contains and object values are left to the record.
import type { JsonObject } from "../records.ts";
import type { IndexDb, IndexEntry, IndexKey } from "./index-db.ts";
import { indexName, indexValue } from "./index-value.ts";

export interface Terms {
  terms: IndexKey[];
  /** every condition became a term */
  exact: boolean;
  /** a condition no record can meet */
  none: boolean;
}

/** Index entries of a record's metadata pairs, each with the record's duplicate `dup`. */
export function metadataEntries(kind: string, metadata: JsonObject | null | undefined, dup: string[], out: IndexEntry[]): void {
  if (metadata === null || metadata === undefined) return;
  for (const k of Object.keys(metadata)) {
    const iv = indexValue(metadata[k]);
    if (iv !== undefined) out.push({ key: [kind, indexName(k), iv], dup });
  }
}

/** Queues the entry changes between two metadata objects of one record (same duplicate `dup`). */
export function applyMetadataDiff(index: IndexDb, kind: string, prev: JsonObject | null | undefined, next: JsonObject | null | undefined, dup: string[]): void {
  const before = prev ?? {};
  const after = next ?? {};
  for (const k of Object.keys(after)) {
    const had = Object.hasOwn(before, k);
    // the same value (a run copies the thread's metadata into a new object): no spelling to compute
    if (had && before[k] === after[k]) continue;
    const was = had ? indexValue(before[k]) : undefined;
    const now = indexValue(after[k]);
    if (was === now) continue;
    if (was !== undefined) index.remove([kind, indexName(k), was], dup);
    if (now !== undefined) index.put([kind, indexName(k), now], dup);
  }
  for (const k of Object.keys(before)) {
    if (Object.hasOwn(after, k)) continue;
    const was = indexValue(before[k]);
    if (was !== undefined) index.remove([kind, indexName(k), was], dup);
  }
}

/** Terms of a search metadata filter (matchesFilter semantics). */
export function metadataFilterTerms(kind: string, filter: JsonObject | null | undefined, into: Terms): void {
  if (filter === null || filter === undefined) return;
  for (const k of Object.keys(filter)) {
    const v = filter[k];
    if (v === null) {
      into.none = true;
      continue;
    }
    const iv = indexValue(v);
    if (iv === undefined) into.exact = false;
    else into.terms.push([kind, indexName(k), iv]);
  }
}

/** Terms of an auth handler's filter on metadata (matchesAuthFilter semantics). */
export function authFilterTerms(kind: string, filter: Record<string, unknown> | undefined, into: Terms): void {
  if (filter === undefined) return;
  for (const k of Object.keys(filter)) {
    const cond = filter[k];
    let eq: unknown = cond;
    if (typeof cond === "object" && cond !== null && !Array.isArray(cond)) {
      const ops = cond as Record<string, unknown>;
      const hasEq = Object.hasOwn(ops, "$eq");
      const hasContains = Object.hasOwn(ops, "$contains");
      if (!hasEq) {
        into.exact = false; // $contains, or equality with an object: decided on the record
        continue;
      }
      if (hasContains) into.exact = false;
      eq = ops.$eq;
    }
    const iv = eq === undefined ? undefined : indexValue(eq);
    if (iv === undefined) into.exact = false;
    else into.terms.push([kind, indexName(k), iv]);
  }
}

export const noTerms = (): Terms => ({ terms: [], exact: true, none: false });
