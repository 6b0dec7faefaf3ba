// The query planner for records ordered by creation (threads, assistants, crons). A query is a
// set of index terms (index keys every match has) plus, when the terms do not say everything
// (`exact` false: a `values` filter, a nested-object metadata filter, an auth `$contains`), the
// whole filter as a predicate on the record. The planner
//   - estimates each term by its key's duplicate count (O(1) in LMDB) and drives the query from
//     the smallest; a term with no entries answers at once;
//   - counts in O(1) when one exact term (or none) is the whole filter, else walks the driver and
//     checks each candidate's record against the whole filter (one record read costs less than
//     one index lookup per other term: ~4 vs ~6 us);
//   - pages: sorted by created_at it walks the driver in order (each key's duplicates are
//     [created_at, id]) and stops at offset + limit; sorted by another field with an order index
//     (updated_at, a group of keys such as the statuses, the id) it walks that order checking
//     each candidate, when that is expected to be cheaper than reading every match and sorting
//     (and falls back to that once the walk costs twice as much); otherwise it collects the
//     matches and sorts them, keeping the best offset + limit.
// Every walk reads one LMDB snapshot (an explicit read transaction) in slices (slices.ts), so a
// long one never holds the HTTP thread for more than a few milliseconds at a time.
// Order: by the sort field, ties by created_at, then by id, all in the sort direction; null values
// (crons' end_time) last in both directions.
import type { Database, RootDatabase, Transaction } from "lmdb";
import type { Page, PageSpec } from "../port.ts";
import type { IndexDb, IndexDup, IndexEntry, IndexKey } from "./index-db.ts";
import { Slicer } from "./slices.ts";

export type SortValue = string | number | boolean | null | undefined;

/** What the planner needs to know about one indexed resource (storage/indexes/<resource>.ts). */
export interface Collection<R> {
  root: RootDatabase;
  index: IndexDb;
  records: Pick<Database<R, string>, "get" | "getRange">;
  /** the key every record is under, with duplicates [created_at, id] */
  all: IndexKey;
  /** [created_at, id] of a record: its duplicate under every per-value key */
  position(r: R): [string, string];
  /** sort fields with an order key, whose duplicates are [value, created_at, id] */
  orders: Readonly<Record<string, IndexKey>>;
  /** sort fields whose every value has its own key (duplicates [created_at, id]): the keys in ascending value order */
  groups: Readonly<Record<string, readonly IndexKey[]>>;
  /** the sort field that is the records' primary key */
  idField: string;
  sortValue(r: R, field: string): SortValue;
}

export interface RecordQuery<R> {
  /** index keys every match is under */
  terms: IndexKey[];
  /** true when being under every term is the whole filter; false: `matches` decides on the record */
  exact: boolean;
  /** the whole filter, on a record */
  matches(r: R): boolean;
  /** nothing can match (e.g. a metadata filter value null) */
  none?: boolean;
  /** the candidates are exactly these ids */
  ids?: readonly string[];
}

type Window = PageSpec<string>;

/** Duplicates read per LMDB range call (then the slice clock is checked). */
const BATCH = 256;
/** Entries visited between two looks at the slice clock. */
const CHECK_EVERY = 16;
/** Most entries a native offset skip passes over in one call. */
const SKIP_STEP = 50_000;

interface Ctx<R> {
  c: Collection<R>;
  txn: Transaction;
  slicer: Slicer;
}

interface Term {
  key: IndexKey;
  n: number;
}

export async function searchRecords<R>(c: Collection<R>, q: RecordQuery<R>, p: Window): Promise<Page<R>> {
  return withSnapshot(c, (x) => search(x, q, { sortBy: p.sortBy, order: p.order, offset: p.offset, limit: p.limit }));
}

/** The keys of the two orders every record with created_at/updated_at is under. */
export const CREATED_ORDER: IndexKey = ["@c"];
export const UPDATED_ORDER: IndexKey = ["@u"];

interface Timestamped {
  created_at: string;
  updated_at: string;
}

/** A record's entries under the two orders, and its duplicate [created_at, id] for its other keys. */
export function orderEntries(r: Timestamped, id: string): { at: IndexDup; entries: IndexEntry[] } {
  const at = [r.created_at, id];
  return {
    at,
    entries: [
      { key: CREATED_ORDER, dup: at },
      { key: UPDATED_ORDER, dup: [r.updated_at, r.created_at, id] },
    ],
  };
}

/** A collection whose records are under the two orders (orderEntries), sortable by any of their fields. */
export function createdOrderCollection<R extends Timestamped>(c: {
  root: RootDatabase;
  index: IndexDb;
  records: Collection<R>["records"];
  id: (r: R) => string;
  idField: string;
  groups?: Collection<R>["groups"];
}): Collection<R> {
  return {
    root: c.root,
    index: c.index,
    records: c.records,
    all: CREATED_ORDER,
    position: (r) => [r.created_at, c.id(r)],
    orders: { updated_at: UPDATED_ORDER },
    groups: c.groups ?? {},
    idField: c.idField,
    sortValue: (r, field) => (r as unknown as Record<string, SortValue>)[field],
  };
}

export async function countRecords<R>(c: Collection<R>, q: RecordQuery<R>): Promise<number> {
  return withSnapshot(c, async (x) => {
    if (q.none) return 0;
    if (q.ids) return (await idMatches(x, q)).length;
    const plan = planTerms(x, q);
    return plan === undefined ? 0 : countMatches(x, q, plan.driver, plan.rest);
  });
}

async function withSnapshot<R, T>(c: Collection<R>, fn: (x: Ctx<R>) => Promise<T>): Promise<T> {
  const txn = c.root.useReadTransaction();
  try {
    return await fn({ c, txn, slicer: new Slicer() });
  } finally {
    txn.done();
  }
}

/** The driver (smallest term, or every record) and the other terms; undefined when a term has no entries. */
function planTerms<R>(x: Ctx<R>, q: RecordQuery<R>): { driver: Term; rest: Term[] } | undefined {
  const terms = q.terms.map((key) => ({ key, n: count(x, key) })).sort((a, b) => a.n - b.n);
  if (terms.length > 0 && terms[0].n === 0) return undefined;
  if (terms.length === 0) return { driver: { key: x.c.all, n: count(x, x.c.all) }, rest: [] };
  return { driver: terms[0], rest: terms.slice(1) };
}

async function search<R>(x: Ctx<R>, q: RecordQuery<R>, p: Window): Promise<Page<R>> {
  if (q.none) return { items: [], total: 0 };
  const cmp = comparator(x.c, p.sortBy, p.order);
  if (q.ids) {
    const hits = (await idMatches(x, q)).sort(cmp);
    return { items: hits.slice(p.offset, p.offset + p.limit), total: hits.length };
  }
  const plan = planTerms(x, q);
  if (plan === undefined) return { items: [], total: 0 };
  const { driver, rest } = plan;
  const reverse = p.order === "desc";
  const want = p.offset + p.limit;
  // one exact term (or none): the count is the key's, and its duplicates are the matches
  const countKnown = q.exact && rest.length === 0;

  if (p.sortBy === "created_at") {
    const items: R[] = [];
    if (countKnown) {
      await walkDups(
        x,
        driver.key,
        reverse,
        (dup) => {
          const r = read(x, dup[1]);
          if (r !== undefined) items.push(r);
          return items.length < p.limit;
        },
        p.offset,
      );
      return { items, total: driver.n };
    }
    let matched = 0;
    await walkDups(x, driver.key, reverse, (dup) => {
      const hit = candidate(x, q, rest.length > 0, dup);
      if (hit === undefined) return;
      if (matched >= p.offset && matched < want) items.push(hit === true ? read(x, dup[1])! : hit);
      matched++;
    });
    return { items, total: matched };
  }

  if (countKnown) {
    // walking an order that has the sort field costs about want / (share of matches) entries
    const all = driver.key === x.c.all ? driver.n : count(x, x.c.all);
    const cost = Math.min(all, (want * all) / Math.max(driver.n, 1));
    if (hasOrder(x.c, p.sortBy) && cost < driver.n) {
      const items = await walkOrder(x, q, p, 2 * driver.n + BATCH);
      if (items !== undefined) return { items: items.slice(p.offset), total: driver.n };
    }
  }
  const { items, total } = await collectSorted(x, q, driver, rest, want, cmp);
  return { items: items.slice(p.offset, want), total };
}

/** The matches among q.ids (each once), unsorted. */
async function idMatches<R>(x: Ctx<R>, q: RecordQuery<R>): Promise<R[]> {
  const hits: R[] = [];
  let i = 0;
  for (const id of new Set(q.ids)) {
    const r = read(x, id);
    if (r !== undefined && q.matches(r)) hits.push(r);
    if (++i % BATCH === 0) await x.slicer.tick();
  }
  return hits;
}

/**
 * Whether the record at `dup` ([created_at, id], found under a key that is one of the terms, or
 * an order) matches: undefined if not; true when being under that key decides it (`others`
 * false: no other term, and the terms are the whole filter); else the record, read to decide.
 */
function candidate<R>(x: Ctx<R>, q: RecordQuery<R>, others: boolean, dup: IndexDup): R | true | undefined {
  if (!others && q.exact) return true;
  const r = read(x, dup[1]);
  return r !== undefined && q.matches(r) ? r : undefined;
}

async function countMatches<R>(x: Ctx<R>, q: RecordQuery<R>, driver: Term, rest: readonly Term[]): Promise<number> {
  if (q.exact && rest.length === 0) return driver.n;
  let matched = 0;
  await walkDups(x, driver.key, false, (dup) => {
    if (candidate(x, q, rest.length > 0, dup) !== undefined) matched++;
  });
  return matched;
}

/** Every match under the driver, sorted; only the first `want` are kept (and read). */
async function collectSorted<R>(
  x: Ctx<R>,
  q: RecordQuery<R>,
  driver: Term,
  rest: readonly Term[],
  want: number,
  cmp: (a: R, b: R) => number,
): Promise<Page<R>> {
  let kept: R[] = [];
  let total = 0;
  await walkDups(x, driver.key, false, (dup) => {
    const hit = candidate(x, q, rest.length > 0, dup);
    if (hit === undefined) return;
    total++;
    const r = hit === true ? read(x, dup[1]) : hit;
    if (r === undefined) return;
    kept.push(r);
    if (kept.length >= 2 * want + BATCH) kept = kept.sort(cmp).slice(0, want);
  });
  return { items: kept.sort(cmp).slice(0, want), total };
}

function hasOrder<R>(c: Collection<R>, field: string): boolean {
  return field in c.orders || field in c.groups || field === c.idField;
}

/**
 * The first offset + limit matches in sort order, by walking the sort field's order and checking
 * every term on each candidate; undefined once more than `budget` candidates were looked at.
 */
async function walkOrder<R>(x: Ctx<R>, q: RecordQuery<R>, p: Window, budget: number): Promise<R[] | undefined> {
  const want = p.offset + p.limit;
  const reverse = p.order === "desc";
  const out: R[] = [];
  let seen = 0;
  let over = false;
  const visitAt = (dup: IndexDup): boolean => {
    if (++seen > budget) {
      over = true;
      return false;
    }
    const hit = candidate(x, q, q.terms.length > 0, dup);
    if (hit !== undefined) {
      const r = hit === true ? read(x, dup[1]) : hit;
      if (r !== undefined) out.push(r);
    }
    return out.length < want;
  };
  const c = x.c;
  const order = c.orders[p.sortBy];
  const groups = c.groups[p.sortBy];
  if (order !== undefined) {
    await walkDups(x, order, reverse, (dup) => visitAt(dup.slice(1)));
  } else if (groups !== undefined) {
    for (const key of reverse ? [...groups].reverse() : groups) {
      if (out.length >= want || over) break;
      await walkDups(x, key, reverse, visitAt);
    }
  } else {
    await walkRecords(x, reverse, (r) => {
      if (++seen > budget) {
        over = true;
        return false;
      }
      if (q.matches(r)) out.push(r);
      return out.length < want;
    });
  }
  return over ? undefined : out;
}

/** Visits the duplicates of `key` in order after skipping `skip`; stops when `visit` returns false. */
async function walkDups<R>(x: Ctx<R>, key: IndexKey, reverse: boolean, visit: (dup: IndexDup) => boolean | void, skip = 0): Promise<void> {
  let after: IndexDup | undefined;
  while (skip > 0) {
    const step = Math.min(skip, SKIP_STEP);
    let at: IndexDup | undefined;
    for (const dup of x.c.index.getValues(key, dupRange(x, reverse, after, step - 1, 1))) at = dup;
    if (at === undefined) return;
    after = at;
    skip -= step;
    await x.slicer.tick();
  }
  for (;;) {
    let n = 0;
    let cut = false;
    for (const dup of x.c.index.getValues(key, dupRange(x, reverse, after, 0, BATCH))) {
      n++;
      after = dup;
      if (visit(dup) === false) return;
      // a visit may read a record (and a values filter parse its state): check the clock often
      if (n % CHECK_EVERY === 0 && x.slicer.due()) {
        cut = true;
        break;
      }
    }
    if (!cut && n < BATCH) return;
    await x.slicer.tick();
  }
}

function dupRange<R>(x: Ctx<R>, reverse: boolean, after: IndexDup | undefined, offset: number, limit: number) {
  return { transaction: x.txn, reverse, limit, ...(after === undefined ? {} : { start: after, exclusiveStart: true }), ...(offset > 0 ? { offset } : {}) };
}

/** Visits records in primary-key order; stops when `visit` returns false. */
async function walkRecords<R>(x: Ctx<R>, reverse: boolean, visit: (r: R) => boolean): Promise<void> {
  let after: string | undefined;
  for (;;) {
    let n = 0;
    const range = { transaction: x.txn, reverse, limit: BATCH, ...(after === undefined ? {} : { start: after, exclusiveStart: true }) };
    let cut = false;
    for (const { key, value } of x.c.records.getRange(range)) {
      n++;
      after = key;
      if (typeof key !== "string") continue; // the DB's shared-structures key
      if (!visit(value)) return;
      if (n % CHECK_EVERY === 0 && x.slicer.due()) {
        cut = true;
        break;
      }
    }
    if (!cut && n < BATCH) return;
    await x.slicer.tick();
  }
}

function count<R>(x: Ctx<R>, key: IndexKey): number {
  return x.c.index.getValuesCount(key, { transaction: x.txn });
}

function read<R>(x: Ctx<R>, id: string): R | undefined {
  return x.c.records.get(id, { transaction: x.txn });
}

/** Sort field, then created_at, then id, all in `order`; null/undefined values last either way. */
export function comparator<R>(c: Collection<R>, field: string, order: "asc" | "desc"): (a: R, b: R) => number {
  const dir = order === "asc" ? 1 : -1;
  return (a, b) => {
    const va = c.sortValue(a, field);
    const vb = c.sortValue(b, field);
    if (va !== vb) {
      if (va === null || va === undefined) return vb === null || vb === undefined ? 0 : 1;
      if (vb === null || vb === undefined) return -1;
      return (va < vb ? -1 : 1) * dir;
    }
    const [ca, ia] = c.position(a);
    const [cb, ib] = c.position(b);
    if (ca !== cb) return (ca < cb ? -1 : 1) * dir;
    return ia === ib ? 0 : (ia < ib ? -1 : 1) * dir;
  };
}
