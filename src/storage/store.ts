// The long-term memory store (LangGraph BaseStore) on LMDB: graphs get it as `config.store` in
// actor workers, and the /store routes use it on the HTTP thread, each thread with its own handle.
import { deepEqual } from "../util/deep-equal.ts";
import {
  BaseStore,
  type GetOperation,
  type Item,
  type ListNamespacesOperation,
  type MatchCondition,
  type Operation,
  type OperationResults,
  type PutOperation,
  type SearchItem,
  type SearchOperation,
} from "@langchain/langgraph-checkpoint";
import { TroupeError } from "../errors.ts";
import type { Transaction } from "lmdb";
import type { Storage } from "./env.ts";
import type { StoreTtlOptions } from "../bridge/messages.ts";
import { itemExpired, refreshItemTtls } from "./store-ttl.ts";
import { cosine, StoreIndex, type StoreIndexOptions } from "./store-index.ts";
import type { JsonObject, StoreItemRecord } from "./records.ts";
import type { ItemStore } from "./port.ts";
import { nowIso } from "./records.ts";
import { NS_AFTER, NS_SEP, putStoreItem, removeStoreItem, storeFilterTerms, storeItemsMatching, storeKeyOf, type StoreKey } from "./indexes/store-items.ts";
import { Slicer } from "./indexes/slices.ts";

/** Joins namespace labels in keys; labels may not contain it (LangGraph rejects NUL too). */
const SEP = NS_SEP;
/** One past SEP: [joined + NEXT] sorts after every key of `joined` and of its descendants. */
const AFTER = NS_AFTER;
const keyOf = storeKeyOf;

/** Key range holding exactly the namespaces that start with `labels` (the whole table for []). */
function subtree(labels: readonly string[]): { start?: StoreKey | [string]; end?: [string] } {
  if (labels.length === 0) return {};
  const joined = labels.join(SEP);
  return { start: [joined], end: [joined + AFTER] };
}

export function toItem(r: StoreItemRecord): Item {
  return { value: r.value, key: r.key, namespace: r.namespace, createdAt: new Date(r.created_at), updatedAt: new Date(r.updated_at) };
}

/**
 * Storage contract: reads are synchronous LMDB reads from a fresh snapshot, so they see every
 * commit that has resolved in any thread (lmdb-js would otherwise keep a thread's read snapshot
 * until its next event turn, missing a write another thread committed in between);
 * writes run in one LMDB transaction per batch and resolve after it commits. Result order of
 * search and listNamespaces is key order (namespace labels, then key); no sort is applied.
 * `query` ranks results by similarity when the store has an index (searchItems); otherwise it is ignored.
 */
export class LmdbStore extends BaseStore implements ItemStore {
  private readonly ttl: StoreTtlOptions;
  private readonly index: StoreIndex | undefined;

  /**
   * `ttl`: item TTLs (config `store.ttl`). An item with a TTL is hidden from reads once it expired
   * and removed by sweep(); reads may push its expiry out again (refreshOnRead, or `refresh_ttl`).
   * `index`: semantic search (config `store.index`, store-index.ts).
   */
  constructor(
    private readonly s: Storage,
    ttl?: StoreTtlOptions,
    index?: StoreIndexOptions,
  ) {
    super();
    this.ttl = ttl ?? { defaultTtlMinutes: null, refreshOnRead: false };
    this.index = index ? new StoreIndex(index) : undefined;
  }

  private expired(k: StoreKey, now: number): boolean {
    return itemExpired(this.s, k, now);
  }

  /**
   * LangGraph batch semantics (as InMemoryStore): reads see the state before the batch's
   * writes; several puts of one item in a batch keep the last.
   */
  async batch<Op extends Operation[]>(operations: Op): Promise<OperationResults<Op>> {
    const results: unknown[] = new Array(operations.length);
    const puts = new Map<string, PutOperation>();
    const searches: Promise<void>[] = [];
    operations.forEach((op, i) => {
      if ("value" in op) {
        puts.set(JSON.stringify(keyOf(op.namespace, op.key)), op);
        results[i] = undefined;
      } else if ("namespacePrefix" in op) {
        searches.push(
          this.searchItems(op).then((found) => {
            if (this.ttl.refreshOnRead) this.refresh(found);
            results[i] = found.map((r): SearchItem => ({ ...toItem(r), ...(r.score !== undefined ? { score: r.score } : {}) }));
          }),
        );
      } else if ("key" in op) {
        const r = this.getRecord((op as GetOperation).namespace, op.key);
        if (r && this.ttl.refreshOnRead) this.refresh([r]);
        results[i] = r ? toItem(r) : null;
      } else {
        results[i] = this.namespaces(op);
      }
    });
    await Promise.all(searches); // read before the batch's writes land, as the synchronous reads did
    if (puts.size > 0) await this.write([...puts.values()]);
    return results as OperationResults<Op>;
  }

  item(namespace: readonly string[], key: string): Promise<StoreItemRecord | null> {
    return Promise.resolve(this.getRecord(namespace, key));
  }

  scanItems(op: SearchOperation): Promise<StoreItemRecord[]> {
    return Promise.resolve(this.searchRecords(op));
  }

  namespacesOf(op: ListNamespacesOperation): Promise<string[][]> {
    return Promise.resolve(this.namespaces(op));
  }

  /** Wire shape of one item, or null (synchronous: batch() reads before its writes land). */
  getRecord(namespace: readonly string[], key: string): StoreItemRecord | null {
    this.s.root.resetReadTxn();
    const k = keyOf(namespace, key);
    const r = this.s.store.get(k);
    return r === undefined || this.expired(k, Date.now()) ? null : r;
  }

  /**
   * Upserts (value = object) and deletes (value = null) in one transaction; resolves after commit.
   * `ttlMinutes`: the items' TTL; null for none; undefined for the configured default.
   */
  async write(ops: readonly PutOperation[], ttlMinutes?: number | null): Promise<void> {
    for (const op of ops) if (op.value !== null) checkNamespace(op.namespace);
    const now = nowIso();
    const minutes = ttlMinutes === undefined ? this.ttl.defaultTtlMinutes : ttlMinutes;
    const expiresAt = minutes === null ? 0 : Date.parse(now) + minutes * 60_000;
    const vectors = await (this.index?.embedPuts(ops) ?? new Map<PutOperation, number[][]>());
    await this.s.root.transaction(() => {
      for (const op of ops) {
        const k = keyOf(op.namespace, op.key);
        if (this.index) {
          const v = vectors.get(op);
          if (v) this.s.storeVectors.put(k, v);
          else this.s.storeVectors.remove(k);
        }
        const prev = this.s.store.get(k);
        if (op.value === null) {
          if (prev !== undefined) removeStoreItem(this.s, prev);
          this.s.storeTtl.remove(k);
          continue;
        }
        putStoreItem(
          this.s,
          {
            namespace: [...op.namespace],
            key: op.key,
            value: op.value as JsonObject,
            created_at: prev?.created_at ?? now,
            updated_at: now,
          },
          prev,
        );
        if (minutes === null) this.s.storeTtl.remove(k);
        else this.s.storeTtl.put(k, { minutes, expiresAt });
      }
    });
  }

  /**
   * searchRecords, ranked by similarity to `query` when the store has an index (every matching
   * item is scored: its best field's cosine similarity; unindexed items last, without a score).
   */
  async searchItems(op: SearchOperation): Promise<(StoreItemRecord & { score?: number })[]> {
    if (!op.query || !this.index) return this.findRecords(op);
    const all = await this.findRecords({ ...op, limit: Number.MAX_SAFE_INTEGER, offset: 0, query: undefined });
    const offset = op.offset ?? 0;
    return (await this.rank(all, op.query)).slice(offset, offset + (op.limit ?? 10));
  }

  /** `records` by similarity to `query`, best first, with scores (unchanged without an index). */
  async rank(records: readonly StoreItemRecord[], query: string): Promise<(StoreItemRecord & { score?: number })[]> {
    if (!this.index) return [...records];
    const q = await this.index.embedQuery(query);
    const scored = records.map((r): StoreItemRecord & { score?: number } => {
      const vs = this.s.storeVectors.get(keyOf(r.namespace, r.key));
      return vs && vs.length ? { ...r, score: Math.max(...vs.map((v) => cosine(q, v))) } : { ...r };
    });
    return scored.sort((a, b) => (b.score ?? -Infinity) - (a.score ?? -Infinity));
  }

  /** Pushes the expiry of these items (those with a TTL) out by their TTL again; not awaited by readers. */
  refresh(records: readonly StoreItemRecord[]): void {
    refreshItemTtls(
      this.s,
      records.map((r) => keyOf(r.namespace, r.key)),
    );
  }

  /**
   * Wire shape of matching items in key order, from `offset`, at most `limit`: a walk of the
   * namespace prefix, or of the smallest equality condition's index entries within it
   * (indexes/store-items.ts). Synchronous, for callers that bound it themselves (auth's scan).
   */
  searchRecords(op: SearchOperation): StoreItemRecord[] {
    const page = this.page(op);
    this.s.root.resetReadTxn();
    const txn = this.s.root.useReadTransaction();
    try {
      for (const r of this.matching(txn, op)) if (r !== null && page.take(r)) break;
    } finally {
      txn.done();
    }
    return page.items;
  }

  /** searchRecords in slices (indexes/slices.ts): a long walk lets other requests in every few ms. */
  async findRecords(op: SearchOperation): Promise<StoreItemRecord[]> {
    const page = this.page(op);
    const slicer = new Slicer();
    this.s.root.resetReadTxn();
    const txn = this.s.root.useReadTransaction();
    try {
      for (const r of this.matching(txn, op)) {
        if (r === null) await slicer.tick();
        else if (page.take(r)) break;
      }
    } finally {
      txn.done();
    }
    return page.items;
  }

  private matching(txn: Transaction, op: SearchOperation): Generator<StoreItemRecord | null> {
    const filter = op.filter;
    return storeItemsMatching(this.s, txn, op.namespacePrefix, storeFilterTerms(filter), (r) => !filter || matchesFilter(r.value, filter));
  }

  /** Collects a page of items, skipping expired ones; take() says when it is full. */
  private page(op: SearchOperation): { items: StoreItemRecord[]; take(r: StoreItemRecord): boolean } {
    const limit = op.limit ?? 10;
    const offset = op.offset ?? 0;
    const items: StoreItemRecord[] = [];
    const now = Date.now();
    const anyTtl = this.s.storeTtl.getKeysCount({ limit: 1 }) > 0;
    let skipped = 0;
    return {
      items,
      take: (r) => {
        if (items.length >= limit) return true;
        if (anyTtl && this.expired(keyOf(r.namespace, r.key), now)) return false;
        if (skipped < offset) {
          skipped++;
          return false;
        }
        items.push(r);
        return items.length >= limit;
      },
    };
  }

  /**
   * Distinct namespaces matching every condition ("*" matches any label), truncated to maxDepth
   * and de-duplicated. Visits one key per distinct namespace: after reading a namespace's first
   * key it seeks past that namespace, or past its whole subtree once it was listed truncated.
   */
  namespaces(op: ListNamespacesOperation): string[][] {
    const conditions = op.matchConditions ?? [];
    const limit = op.limit ?? 100;
    const offset = op.offset ?? 0;
    const depth = op.maxDepth;
    const out: string[][] = [];
    if (limit <= 0) return out;
    this.s.root.resetReadTxn();
    // the leading literal labels of every prefix condition bound the scan
    const fixed = conditions
      .filter((c) => c.matchType === "prefix")
      .map((c) => literalHead(c.path))
      .reduce<string[]>((a, b) => (b.length > a.length ? b : a), []);
    const { start: lo, end } = subtree(fixed);
    let start: StoreKey | [string] | undefined = lo;
    let skipped = 0;
    for (let done = false; !done;) {
      const first = firstKey(this.s, start, end);
      if (!first) break;
      const ns = first[0] === "" ? [] : first[0].split(SEP);
      // smallest key of the next namespace (a child of ns, or whatever follows)
      start = [first[0] + SEP];
      if (!conditions.every((c) => matches(c, ns))) continue;
      let shown = ns;
      if (depth !== undefined && ns.length >= depth) {
        // every later namespace under the truncated one would show the same: seek past its subtree
        shown = ns.slice(0, Math.max(depth, 0));
        if (shown.length > 0) start = [shown.join(SEP) + AFTER];
        else done = true;
      }
      if (skipped < offset) {
        skipped++;
        continue;
      }
      out.push(shown);
      if (out.length >= limit) break;
    }
    return out;
  }
}

function firstKey(s: Storage, start: StoreKey | [string] | undefined, end: [string] | undefined): StoreKey | undefined {
  // bounds left out rather than undefined: an explicit `start: undefined` also yields the DB's
  // shared-structures key (see storage/env.ts)
  const range = { ...(start === undefined ? {} : { start }), ...(end === undefined ? {} : { end }), limit: 1 };
  for (const k of s.store.getKeys(range)) return k;
  return undefined;
}

function literalHead(path: readonly string[]): string[] {
  const i = path.indexOf("*");
  return i < 0 ? [...path] : path.slice(0, i);
}

function matches(c: MatchCondition, ns: readonly string[]): boolean {
  const { path } = c;
  if (path.length > ns.length) return false;
  const at = c.matchType === "prefix" ? 0 : ns.length - path.length;
  return path.every((p, i) => p === "*" || p === ns[at + i]);
}

/** Labels are non-empty strings without the key separator; writes need at least one. */
function checkNamespace(namespace: readonly string[]): void {
  if (namespace.length === 0) throw new TroupeError("VALIDATION", "Namespace is required");
  for (const label of namespace) {
    if (typeof label !== "string" || label === "" || label.includes(SEP)) {
      throw new TroupeError("VALIDATION", `Namespace labels must be non-empty strings without NUL characters. Received: ${JSON.stringify(namespace)}`);
    }
  }
}

// ---- filter: LangGraph store semantics (top-level value fields; equality or operator objects)

const OPERATORS = new Set(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin"]);

export function matchesFilter(value: Record<string, unknown>, filter: Record<string, unknown>): boolean {
  return Object.entries(filter).every(([field, cond]) => compare(value[field], cond));
}

function isOperatorObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return false;
  const keys = Object.keys(v);
  return keys.length > 0 && keys.every((k) => OPERATORS.has(k));
}

function compare(actual: unknown, cond: unknown): boolean {
  if (!isOperatorObject(cond)) return deepEqual(actual, cond);
  return Object.entries(cond).every(([op, expected]) => {
    switch (op) {
      case "$eq":
        return deepEqual(actual, expected);
      case "$ne":
        return !deepEqual(actual, expected);
      case "$gt":
        return order(actual, expected) > 0;
      case "$gte":
        return order(actual, expected) >= 0;
      case "$lt":
        return order(actual, expected) < 0;
      case "$lte":
        return order(actual, expected) <= 0;
      case "$in":
        return Array.isArray(expected) && expected.some((e) => deepEqual(actual, e));
      case "$nin":
        return !Array.isArray(expected) || !expected.some((e) => deepEqual(actual, e));
      default:
        return false;
    }
  });
}

/** Numbers compare numerically, strings lexically (ISO dates work); anything else is unordered (NaN). */
function order(a: unknown, b: unknown): number {
  if (typeof a === "number" && typeof b === "number") return a - b;
  if (typeof a === "string" && typeof b === "string") return a < b ? -1 : a > b ? 1 : 0;
  return Number.NaN;
}
