// Store items and their secondary index (`idx_store`): for each top-level field of an item's
// value, the entry ["f", field, spelling] with the duplicate [namespace joined by NUL, key] — the
// item's own primary key, so an entry's duplicates sort exactly as the `store` DB does and a
// namespace prefix is a range of them. Values are spelled by index-value.ts, objects included
// (store filters compare a field's whole value). A search whose filter has an equality condition
// ({field: value} or {field: {$eq: value}}) walks the smallest such entry within the namespace
// prefix instead of every item under the prefix; each item found is checked against the whole filter.
// Results come in key order, as a prefix walk gives them.
import type { Transaction } from "lmdb";
import type { Storage } from "../env.ts";
import type { StoreItemRecord } from "../records.ts";
import { putIndexed, removeIndexed, type IndexEntry, type IndexKey } from "./index-db.ts";
import { indexName, indexValue } from "./index-value.ts";

/** Joins namespace labels in keys; labels may not contain it. */
export const NS_SEP = "\u0000";
/** One past NS_SEP: [joined + NS_AFTER] sorts after every key of `joined` and of its descendants. */
export const NS_AFTER = "\u0001";

export type StoreKey = [string, string];
export const storeKeyOf = (namespace: readonly string[], key: string): StoreKey => [namespace.join(NS_SEP), key];

const OPERATORS = new Set(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin"]);

export function storeItemEntries(r: StoreItemRecord): IndexEntry[] {
  const dup = storeKeyOf(r.namespace, r.key);
  const out: IndexEntry[] = [];
  const value = r.value ?? {};
  for (const field of Object.keys(value)) {
    const iv = indexValue(value[field], true);
    if (iv !== undefined) out.push({ key: ["f", indexName(field), iv], dup });
  }
  return out;
}

/** Queues a store item with its index entries (inside a transaction); `prev` as read in it. */
export function putStoreItem(s: Storage, next: StoreItemRecord, prev: StoreItemRecord | undefined): void {
  putIndexed(s.store, s.storeItemIndex, storeKeyOf(next.namespace, next.key), next, prev, storeItemEntries);
}

/** Queues the removal of a store item (as read in the same transaction) and its entries. */
export function removeStoreItem(s: Storage, prev: StoreItemRecord): void {
  removeIndexed(s.store, s.storeItemIndex, storeKeyOf(prev.namespace, prev.key), prev, storeItemEntries);
}

/** The equality conditions of a store filter as index terms (every item found is still checked against the whole filter). */
export function storeFilterTerms(filter: Record<string, unknown> | undefined): IndexKey[] {
  const terms: IndexKey[] = [];
  for (const field of Object.keys(filter ?? {})) {
    const cond = filter![field];
    const eq = isOperatorObject(cond) ? cond.$eq : cond;
    const iv = eq === undefined ? undefined : indexValue(eq, true);
    if (iv !== undefined) terms.push(["f", indexName(field), iv]);
  }
  return terms;
}

function isOperatorObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return false;
  const keys = Object.keys(v);
  return keys.length > 0 && keys.every((k) => OPERATORS.has(k));
}

/** Entries read per LMDB range call; the walk yields `null` after each batch (a point to pause at). */
const BATCH = 256;

/**
 * Items whose namespace starts with `prefix` and which `matches` accepts (given the filter's
 * terms), in key order; `null` between batches. Reads through `txn`.
 */
export function* storeItemsMatching(
  s: Storage,
  txn: Transaction,
  prefix: readonly string[],
  terms: readonly IndexKey[],
  matches: (r: StoreItemRecord) => boolean,
): Generator<StoreItemRecord | null> {
  const bounds = prefix.length === 0 ? {} : { start: [prefix.join(NS_SEP)], end: [prefix.join(NS_SEP) + NS_AFTER] };
  const hasPrefix = (ns: readonly string[]) => prefix.length <= ns.length && prefix.every((p, i) => p === ns[i]);
  if (terms.length === 0) {
    let after: StoreKey | undefined;
    for (;;) {
      let n = 0;
      const range = { ...bounds, ...(after === undefined ? {} : { start: after, exclusiveStart: true }), limit: BATCH, transaction: txn };
      for (const { key, value } of s.store.getRange(range)) {
        n++;
        after = key;
        if (hasPrefix(value.namespace) && matches(value)) yield value;
      }
      if (n < BATCH) return;
      yield null;
    }
  }
  const counted = terms.map((key) => ({ key, n: s.storeItemIndex.getValuesCount(key, { transaction: txn }) })).sort((a, b) => a.n - b.n);
  if (counted[0].n === 0) return;
  const driver = counted[0];
  let after: string[] | undefined;
  for (;;) {
    let n = 0;
    const range = { ...bounds, ...(after === undefined ? {} : { start: after, exclusiveStart: true }), limit: BATCH, transaction: txn };
    for (const dup of s.storeItemIndex.getValues(driver.key, range)) {
      n++;
      after = dup;
      const item = s.store.get(dup as StoreKey, { transaction: txn });
      if (item !== undefined && hasPrefix(item.namespace) && matches(item)) yield item;
    }
    if (n < BATCH) return;
    yield null;
  }
}
