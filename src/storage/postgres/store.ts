// StorePort on Postgres (table store_items): LangGraph's BaseStore batch semantics as the LMDB
// store has them (storage/store.ts): reads see the state before the batch's writes, several puts of
// one item keep the last, the writes of a batch commit together (one statement), results in key
// order (namespace labels, then key), expired items hidden from reads until swept, `query` ranked
// by cosine similarity when the store has an index (every match scored, as on LMDB).
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
import type pg from "pg";
import { TroupeError } from "../../errors.ts";
import type { StoreTtlOptions } from "../../bridge/messages.ts";
import type { ItemStore, StoreOptions } from "../port.ts";
import type { JsonObject, StoreItemRecord } from "../records.ts";
import { nowIso } from "../records.ts";
import { cosine, StoreIndex } from "../store-index.ts";
import { Params, storeFilterSql } from "./filter-sql.ts";
import { jsonbText, jsonText } from "./json-columns.ts";
import { storableText } from "./text-keys.ts";

interface ItemRow {
  namespace: string[];
  key: string;
  value: JsonObject;
  created_at: string;
  updated_at: string;
}

type Scored = StoreItemRecord & { score?: number };

/** The last code point: a label followed by it sorts after every label it starts (a key range's end). */
const LAST = "\u{10FFFF}";
const COLUMNS = "namespace, key, value, created_at, updated_at";

const toRecord = (r: ItemRow): StoreItemRecord => ({ namespace: r.namespace, key: r.key, value: r.value, created_at: r.created_at, updated_at: r.updated_at });

export function toItem(r: StoreItemRecord): Item {
  return { value: r.value, key: r.key, namespace: r.namespace, createdAt: new Date(r.created_at), updatedAt: new Date(r.updated_at) };
}

/** Namespaces that start with `prefix`: an index range (the exact test is the slice). */
function prefixSql(prefix: readonly string[], p: Params): string {
  if (prefix.length === 0) return "TRUE";
  if (!prefix.every(storableText)) return "FALSE"; // no stored namespace holds a NUL
  const lo = p.add([...prefix]);
  const hi = p.add([...prefix.slice(0, -1), prefix[prefix.length - 1] + LAST]);
  return `namespace >= ${lo}::text[] AND namespace < ${hi}::text[] AND namespace[1:${prefix.length}] = ${lo}::text[]`;
}

const notExpired = (p: Params, now: number): string => `(expires_at IS NULL OR expires_at > ${p.add(now)})`;

function searchWhere(op: SearchOperation, p: Params, now: number): string[] {
  const where = [prefixSql(op.namespacePrefix, p), notExpired(p, now)];
  if (op.filter) where.push(storeFilterSql("fields", op.filter, p));
  return where;
}

/** A page of the items matching a search without `query`, in key order. */
export function searchItemsStatement(op: SearchOperation, now: number): { text: string; values: unknown[] } {
  const p = new Params();
  const where = searchWhere(op, p, now);
  return {
    text: `SELECT ${COLUMNS} FROM store_items WHERE ${where.join(" AND ")} ORDER BY namespace, key LIMIT ${p.add(sqlCount(op.limit ?? 10))} OFFSET ${p.add(sqlCount(op.offset ?? 0))}`,
    values: p.values,
  };
}

const WRITE = `
WITH del AS (
  DELETE FROM store_items s USING unnest($1::text[], $2::text[]) d(ns, key)
  WHERE s.namespace = ARRAY(SELECT json_array_elements_text(d.ns::json)) COLLATE "C" AND s.key = d.key
)
INSERT INTO store_items (namespace, key, value, fields, created_at, updated_at, ttl_minutes, expires_at, vectors)
SELECT ARRAY(SELECT json_array_elements_text(u.ns::json)), u.key, u.value::json, u.fields::jsonb, $8, $8, $9, $10, u.vectors::json
FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::text[]) u(ns, key, value, fields, vectors)
ON CONFLICT (namespace, key) DO UPDATE SET value = EXCLUDED.value, fields = EXCLUDED.fields, updated_at = EXCLUDED.updated_at,
  ttl_minutes = EXCLUDED.ttl_minutes, expires_at = EXCLUDED.expires_at,
  vectors = CASE WHEN $11::boolean THEN EXCLUDED.vectors ELSE store_items.vectors END`;

/**
 * A count (limit, offset, depth) as a Postgres int: whole, not negative, at most 2^31 − 1. The API
 * takes any JSON number there (1e308 included), which "as many as there are" means past that.
 */
function sqlCount(n: number): number {
  return Number.isFinite(n) ? Math.min(Math.max(Math.trunc(n), 0), 2_147_483_647) : n > 0 ? 2_147_483_647 : 0;
}

export class PostgresStore extends BaseStore implements ItemStore {
  private readonly ttl: StoreTtlOptions;
  private readonly index: StoreIndex | undefined;

  constructor(
    private readonly pool: pg.Pool,
    opts: StoreOptions = {},
  ) {
    super();
    this.ttl = opts.ttl ?? { defaultTtlMinutes: null, refreshOnRead: false };
    this.index = opts.index ? new StoreIndex(opts.index) : undefined;
  }

  async batch<Op extends Operation[]>(operations: Op): Promise<OperationResults<Op>> {
    const results: unknown[] = new Array(operations.length);
    const puts = new Map<string, PutOperation>();
    const reads: Promise<void>[] = [];
    operations.forEach((op, i) => {
      if ("value" in op) {
        puts.set(JSON.stringify([op.namespace, op.key]), op);
        results[i] = undefined;
      } else if ("namespacePrefix" in op) {
        reads.push(
          this.searchItems(op).then((found) => {
            if (this.ttl.refreshOnRead) this.refresh(found);
            results[i] = found.map((r): SearchItem => ({ ...toItem(r), ...(r.score !== undefined ? { score: r.score } : {}) }));
          }),
        );
      } else if ("key" in op) {
        const get = op as GetOperation;
        reads.push(
          this.item(get.namespace, get.key).then((r) => {
            if (r && this.ttl.refreshOnRead) this.refresh([r]);
            results[i] = r ? toItem(r) : null;
          }),
        );
      } else {
        reads.push(this.namespacesOf(op).then((ns) => void (results[i] = ns)));
      }
    });
    await Promise.all(reads); // before the batch's writes, as the LMDB store's synchronous reads
    if (puts.size > 0) await this.write([...puts.values()]);
    return results as OperationResults<Op>;
  }

  /** The item unless absent or expired. */
  async item(namespace: readonly string[], key: string): Promise<StoreItemRecord | null> {
    if (!storableKey(namespace, key)) return null;
    const r = await this.pool.query<ItemRow>({
      name: "troupe_store_get",
      text: `SELECT ${COLUMNS} FROM store_items WHERE namespace = $1::text[] AND key = $2 AND (expires_at IS NULL OR expires_at > $3)`,
      values: [[...namespace], key, Date.now()],
    });
    return r.rows[0] === undefined ? null : toRecord(r.rows[0]);
  }

  /** Upserts (value set) and deletes (value null) in one statement; `ttlMinutes` as LmdbStore.write. */
  async write(ops: readonly PutOperation[], ttlMinutes?: number | null): Promise<void> {
    for (const op of ops) if (op.value !== null) checkNamespace(op.namespace);
    const now = nowIso();
    const minutes = ttlMinutes === undefined ? this.ttl.defaultTtlMinutes : ttlMinutes;
    const expiresAt = minutes === null ? null : Date.parse(now) + minutes * 60_000;
    const vectors = await (this.index?.embedPuts(ops) ?? new Map<PutOperation, number[][]>());
    const dels = ops.filter((op) => op.value === null && storableKey(op.namespace, op.key)); // others were never stored
    const ups = ops.filter((op) => op.value !== null);
    await this.pool.query(WRITE, [
      dels.map((op) => JSON.stringify(op.namespace)),
      dels.map((op) => op.key),
      ups.map((op) => JSON.stringify(op.namespace)),
      ups.map((op) => op.key),
      ups.map((op) => jsonText(op.value)),
      ups.map((op) => jsonbText(op.value)),
      ups.map((op) => (vectors.has(op) ? JSON.stringify(vectors.get(op)) : null)),
      now,
      minutes,
      expiresAt,
      this.index !== undefined,
    ]);
  }

  /** Matching items in key order, or ranked by similarity with `query` when the store has an index (every match scored). */
  async searchItems(op: SearchOperation): Promise<Scored[]> {
    if (!op.query || !this.index) return this.scanItems(op);
    const offset = op.offset ?? 0;
    const limit = op.limit ?? 10;
    const p = new Params();
    const where = searchWhere(op, p, Date.now());
    const [q, r] = await Promise.all([
      this.index.embedQuery(op.query),
      this.pool.query<ItemRow & { vectors: number[][] | null }>(
        `SELECT ${COLUMNS}, vectors FROM store_items WHERE ${where.join(" AND ")} ORDER BY namespace, key`,
        p.values,
      ),
    ]);
    return scoredBy(
      q,
      r.rows.map((row) => ({ record: toRecord(row), vectors: row.vectors })),
    ).slice(offset, offset + limit);
  }

  /** Matching items in key order, never ranked. */
  async scanItems(op: SearchOperation): Promise<StoreItemRecord[]> {
    return (await this.pool.query<ItemRow>(searchItemsStatement(op, Date.now()))).rows.map(toRecord);
  }

  /** `records` by similarity to `query`, best first, with scores (unchanged without an index). */
  async rank(records: readonly StoreItemRecord[], query: string): Promise<Scored[]> {
    if (!this.index || records.length === 0) return [...records];
    const [q, r] = await Promise.all([
      this.index.embedQuery(query),
      this.pool.query<{ namespace: string[]; key: string; vectors: number[][] | null }>(
        `SELECT s.namespace, s.key, s.vectors FROM store_items s JOIN unnest($1::text[], $2::text[]) k(ns, key)
           ON s.namespace = ARRAY(SELECT json_array_elements_text(k.ns::json)) COLLATE "C" AND s.key = k.key`,
        [records.map((x) => JSON.stringify(x.namespace)), records.map((x) => x.key)],
      ),
    ]);
    const vectors = new Map(r.rows.map((row) => [JSON.stringify([row.namespace, row.key]), row.vectors]));
    return scoredBy(
      q,
      records.map((record) => ({ record, vectors: vectors.get(JSON.stringify([record.namespace, record.key])) ?? null })),
    );
  }

  /** Pushes the expiry of these items (those with a TTL) out by their TTL again; not awaited by readers. */
  refresh(records: readonly StoreItemRecord[]): void {
    if (records.length === 0) return;
    void this.pool
      .query(
        `UPDATE store_items s SET expires_at = $3 + s.ttl_minutes * 60000
       FROM unnest($1::text[], $2::text[]) k(ns, key)
       WHERE s.namespace = ARRAY(SELECT json_array_elements_text(k.ns::json)) COLLATE "C" AND s.key = k.key AND s.ttl_minutes IS NOT NULL`,
        [records.map((r) => JSON.stringify(r.namespace)), records.map((r) => r.key), Date.now()],
      )
      .catch(() => undefined);
  }

  /**
   * Distinct namespaces matching every condition ("*" matches any label), truncated to maxDepth,
   * in key order (as the LMDB store lists them: expired items still count until swept).
   */
  async namespacesOf(op: ListNamespacesOperation): Promise<string[][]> {
    const limit = op.limit ?? 100;
    const offset = op.offset ?? 0;
    if (limit <= 0) return [];
    const p = new Params();
    const where: string[] = [];
    const conditions = op.matchConditions ?? [];
    const fixed = conditions
      .filter((c) => c.matchType === "prefix")
      .map((c) => literalHead(c.path))
      .reduce<string[]>((a, b) => (b.length > a.length ? b : a), []);
    where.push(prefixSql(fixed, p));
    for (const c of conditions) where.push(conditionSql(c, p));
    const shown = op.maxDepth === undefined ? "namespace" : `namespace[1:${p.add(sqlCount(op.maxDepth))}::int]`;
    const r = await this.pool.query<{ ns: string[] }>(
      `SELECT DISTINCT ${shown} AS ns FROM store_items WHERE ${where.join(" AND ")} ORDER BY ns LIMIT ${p.add(sqlCount(limit))} OFFSET ${p.add(sqlCount(offset))}`,
      p.values,
    );
    return r.rows.map((row) => row.ns);
  }
}

/** Scores of the records by their best vector's cosine similarity to `q`, best first; unindexed records last, without a score. */
function scoredBy(q: number[], rows: readonly { record: StoreItemRecord; vectors: number[][] | null }[]): Scored[] {
  const scored = rows.map(({ record, vectors }): Scored =>
    vectors && vectors.length ? { ...record, score: Math.max(...vectors.map((v) => cosine(q, v))) } : { ...record },
  );
  return scored.sort((a, b) => (b.score ?? -Infinity) - (a.score ?? -Infinity));
}

function literalHead(path: readonly string[]): string[] {
  const i = path.indexOf("*");
  return i < 0 ? [...path] : path.slice(0, i);
}

/** A match condition on the namespace column: each label of the path ("*": any) at its place from the start or the end. */
function conditionSql(c: MatchCondition, p: Params): string {
  const n = c.path.length;
  const parts = [`cardinality(namespace) >= ${p.add(n)}::int`];
  c.path.forEach((label, i) => {
    if (label === "*") return;
    const at = c.matchType === "prefix" ? `${i + 1}` : `cardinality(namespace) - ${n - i - 1}`;
    parts.push(`namespace[${at}] = ${p.add(label)}`);
  });
  return `(${parts.join(" AND ")})`;
}

/** Labels are non-empty strings without NUL; writes need at least one (as the LMDB store). */
function checkNamespace(namespace: readonly string[]): void {
  if (namespace.length === 0) throw new TroupeError("VALIDATION", "Namespace is required");
  for (const label of namespace) {
    if (typeof label !== "string" || label === "" || label.includes("\u0000")) {
      throw new TroupeError("VALIDATION", `Namespace labels must be non-empty strings without NUL characters. Received: ${JSON.stringify(namespace)}`);
    }
  }
}

/** whether an item with this key can be stored (text without NUL): lookups and deletes of others find nothing */
const storableKey = (namespace: readonly string[], key: string): boolean => storableText(key) && namespace.every(storableText);
