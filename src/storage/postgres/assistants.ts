// AssistantsPort on Postgres (tables assistants, assistant_versions). Written by whoever calls
// (HTTP threads of one or several servers): create/ensureDefaults are conditional inserts, patch and
// setLatest read-modify-write the row under FOR UPDATE. Runs take their assistant from a cache
// (forRun, assistant-cache.ts), checked by the run's create statement.
import type pg from "pg";
import type { AssistantCheck, AssistantFilter, AssistantSort, AssistantsPort, AssistantWrite, Page, PageSpec, RunAssistant } from "../port.ts";
import { assistantVersionOf, patchedAssistant, type AssistantRecord, type AssistantVersionRecord, type JsonObject } from "../records.ts";
import { authFilterSql, metadataFilterSql, Params } from "./filter-sql.ts";
import { jsonbText, jsonText } from "./json-columns.ts";
import { countRows, searchPage, type SearchSql } from "./search-sql.ts";
import { isInt4, storableText } from "./text-keys.ts";
import { transaction } from "./transaction.ts";
import { RunAssistantCache } from "./assistant-cache.ts";

export const ASSISTANT_SEARCH: SearchSql<AssistantSort> = {
  table: "assistants",
  idColumn: "assistant_id",
  sortColumns: { assistant_id: "assistant_id", graph_id: "graph_id", created_at: "created_at", updated_at: "updated_at", name: "name" },
  select: "record",
};

/** the row's columns as parameters $1..$8 (assistant_id, graph_id, name, name_lower, version, created_at, updated_at, metadata, record) */
const rowValues = (a: AssistantRecord): unknown[] => [
  a.assistant_id,
  a.graph_id,
  a.name,
  a.name.toLowerCase(),
  a.version,
  a.created_at,
  a.updated_at,
  jsonbText(a.metadata),
  jsonText(a),
];

const INSERT = `
WITH a AS (
  INSERT INTO assistants (assistant_id, graph_id, name, name_lower, version, created_at, updated_at, metadata, record)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9::json)
  ON CONFLICT (assistant_id) DO NOTHING
  RETURNING assistant_id
)
INSERT INTO assistant_versions (assistant_id, version, metadata, record)
SELECT assistant_id, $5, $10::jsonb, $11::json FROM a`;

const UPDATE = `UPDATE assistants SET graph_id = $2, name = $3, name_lower = $4, version = $5, created_at = $6, updated_at = $7,
  metadata = $8::jsonb, record = $9::json WHERE assistant_id = $1`;

export function filterSql(f: AssistantFilter, p: Params): string {
  const parts: string[] = [];
  // text with a NUL was never stored: such a filter matches nothing
  if (f.graph_id) parts.push(storableText(f.graph_id) ? `graph_id = ${p.add(f.graph_id)}` : "FALSE");
  const name = f.name?.toLowerCase();
  if (name) parts.push(storableText(name) ? `strpos(name_lower, ${p.add(name)}) > 0` : "FALSE");
  if (f.metadata) parts.push(metadataFilterSql("metadata", f.metadata, p));
  if (f.auth) parts.push(authFilterSql("metadata", f.auth, p));
  return parts.length === 0 ? "TRUE" : parts.join(" AND ");
}

/**
 * The part of a run create statement that checks its cached assistant (AssistantCheck at $first,
 * $first+1): the row is still the version the cache read (its xmin: every insert or update of the
 * row writes a new one; a deleted row matches nothing). A read, not a lock: the create's snapshot
 * follows every assistant write answered before the run's request was sent.
 */
export const assistantCheckSql = (first: number): { part: [name: string, sql: string]; holds: string } => ({
  part: ["troupe_assistant", `SELECT 1 FROM assistants WHERE assistant_id = $${first} AND xmin = $${first + 1}::xid`],
  holds: "EXISTS (SELECT 1 FROM troupe_assistant)",
});

export const assistantCheckValues = (check: AssistantCheck): [string, string] => [check.assistantId, check.stamp];

export class PostgresAssistants implements AssistantsPort {
  /** (the HTTP thread's: the only one that creates runs from it) */
  private readonly runCache = new RunAssistantCache();

  /**
   * Told of each write of an assistant through this object, once it returned (cluster mode:
   * published on the bus, so other nodes' caches drop the entry: shareAssistantWrites).
   */
  onWritten: ((assistantId: string) => void) | undefined;

  constructor(private readonly pool: pg.Pool) {}

  /** Another node wrote the assistant (undefined: maybe any, its notices missed): its cached entry goes. */
  forgetForRun(assistantId?: string): void {
    if (assistantId === undefined) this.runCache.clear();
    else this.runCache.forget(assistantId);
  }

  async forRun(assistantId: string, fresh: boolean): Promise<RunAssistant | undefined> {
    if (!fresh) {
      const cached = this.runCache.get(assistantId);
      if (cached !== undefined) return { record: cached.record, check: { assistantId, stamp: cached.stamp } };
    }
    if (!storableText(assistantId)) return undefined;
    const token = this.runCache.readStarts();
    const r = await this.pool.query<{ record: AssistantRecord; stamp: string }>({
      name: "troupe_assistant_get_stamped",
      text: "SELECT record, xmin::text AS stamp FROM assistants WHERE assistant_id = $1",
      values: [assistantId],
    });
    const found = r.rows[0];
    this.runCache.keep(assistantId, found, token);
    // read now: as current as `get` (a check would only refuse writes concurrent with the request)
    return found === undefined ? undefined : { record: found.record };
  }

  async get(assistantId: string): Promise<AssistantRecord | undefined> {
    if (!storableText(assistantId)) return undefined;
    const r = await this.pool.query<{ record: AssistantRecord }>({
      name: "troupe_assistant_get",
      text: "SELECT record FROM assistants WHERE assistant_id = $1",
      values: [assistantId],
    });
    return r.rows[0]?.record;
  }

  async create(record: AssistantRecord): Promise<AssistantRecord | "exists"> {
    const v = assistantVersionOf(record);
    const r = await this.writing(record.assistant_id, () => this.pool.query(INSERT, [...rowValues(record), jsonbText(v.metadata), jsonText(v)]));
    return r.rowCount === 1 ? record : "exists";
  }

  async patch(assistantId: string, change: Partial<AssistantWrite>, now: string): Promise<AssistantRecord | undefined> {
    if (!storableText(assistantId)) return undefined;
    return this.writing(assistantId, () =>
      transaction(this.pool, async (c) => {
        const a = await lockedRecord(c, assistantId);
        if (a === undefined) return undefined;
        const max = await c.query<{ v: number | null }>("SELECT max(version) AS v FROM assistant_versions WHERE assistant_id = $1", [assistantId]);
        const next = patchedAssistant(a, change, (max.rows[0].v ?? 0) + 1, now);
        const v = assistantVersionOf(next);
        await c.query(`WITH u AS (${UPDATE}) INSERT INTO assistant_versions (assistant_id, version, metadata, record) VALUES ($1, $5, $10::jsonb, $11::json)`, [
          ...rowValues(next),
          jsonbText(v.metadata),
          jsonText(v),
        ]);
        return next;
      }),
    );
  }

  async setLatest(assistantId: string, version: number, now: string): Promise<AssistantRecord | "no-version" | undefined> {
    if (!storableText(assistantId)) return undefined;
    return this.writing(assistantId, () =>
      transaction(this.pool, async (c) => {
        const a = await lockedRecord(c, assistantId);
        if (a === undefined) return undefined;
        if (!isInt4(version)) return "no-version" as const;
        const found = await c.query<{ record: AssistantVersionRecord }>("SELECT record FROM assistant_versions WHERE assistant_id = $1 AND version = $2", [
          assistantId,
          version,
        ]);
        const v = found.rows[0]?.record;
        if (v === undefined) return "no-version" as const;
        const next: AssistantRecord = { ...a, config: v.config, metadata: v.metadata, name: v.name, version: v.version, updated_at: now };
        await c.query(UPDATE, rowValues(next));
        return next;
      }),
    );
  }

  async delete(assistantId: string): Promise<boolean> {
    if (!storableText(assistantId)) return false;
    const r = await this.writing(assistantId, () =>
      this.pool.query("WITH v AS (DELETE FROM assistant_versions WHERE assistant_id = $1) DELETE FROM assistants WHERE assistant_id = $1", [assistantId]),
    );
    return r.rowCount === 1;
  }

  /** A write of the assistant by this thread: its cached entry goes before and after (a read in flight meanwhile is not kept). */
  private async writing<T>(assistantId: string, write: () => Promise<T>): Promise<T> {
    this.runCache.forget(assistantId);
    try {
      return await write();
    } finally {
      this.runCache.forget(assistantId);
      this.onWritten?.(assistantId);
    }
  }

  async versions(assistantId: string, q: { metadata?: JsonObject; offset: number; limit: number }): Promise<AssistantVersionRecord[]> {
    if (!storableText(assistantId)) return [];
    const p = new Params();
    const where = [`assistant_id = ${p.add(assistantId)}`];
    if (q.metadata) where.push(metadataFilterSql("metadata", q.metadata, p));
    const r = await this.pool.query<{ record: AssistantVersionRecord }>(
      `SELECT record FROM assistant_versions WHERE ${where.join(" AND ")} ORDER BY version DESC LIMIT ${p.add(q.limit)} OFFSET ${p.add(q.offset)}`,
      p.values,
    );
    return r.rows.map((row) => row.record);
  }

  search(q: AssistantFilter & PageSpec<AssistantSort>): Promise<Page<AssistantRecord>> {
    const p = new Params();
    return searchPage(this.pool, ASSISTANT_SEARCH, filterSql(q, p), p, q, (row) => row.record as AssistantRecord);
  }

  count(f: AssistantFilter): Promise<number> {
    const p = new Params();
    return countRows(this.pool, "assistants", filterSql(f, p), p.values);
  }

  async ensureDefaults(defaults: readonly AssistantRecord[]): Promise<void> {
    for (const a of defaults) await this.create(a);
  }
}

async function lockedRecord(c: pg.PoolClient, assistantId: string): Promise<AssistantRecord | undefined> {
  const r = await c.query<{ record: AssistantRecord }>("SELECT record FROM assistants WHERE assistant_id = $1 FOR UPDATE", [assistantId]);
  return r.rows[0]?.record;
}
