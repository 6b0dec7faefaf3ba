// CronsPort on Postgres (table crons). Written by the API and the scheduler of every server:
// `update` applies its change to the committed row under FOR UPDATE, so a tick that persists
// next_run_date never undoes a concurrent PATCH or DELETE.
import type pg from "pg";
import type { CronFilter, CronSort, CronsPort, Page, PageSpec } from "../port.ts";
import type { CronRecord } from "../records.ts";
import { authFilterSql, metadataFilterSql, Params } from "./filter-sql.ts";
import { jsonbText, jsonText } from "./json-columns.ts";
import { countRows, searchPage, type SearchSql } from "./search-sql.ts";
import { transaction } from "./transaction.ts";
import { storableText } from "./text-keys.ts";

export const CRON_SEARCH: SearchSql<CronSort> = {
  table: "crons",
  idColumn: "cron_id",
  sortColumns: {
    cron_id: "cron_id",
    assistant_id: "assistant_id",
    thread_id: "thread_id",
    next_run_date: "next_run_date",
    end_time: "end_time",
    created_at: "created_at",
    updated_at: "updated_at",
  },
  select: "record",
  nullable: ["thread_id", "next_run_date", "end_time"],
};

const rowValues = (c: CronRecord): unknown[] => [
  c.cron_id,
  c.assistant_id,
  c.thread_id,
  c.enabled,
  c.next_run_date,
  c.end_time,
  c.created_at,
  c.updated_at,
  jsonbText(c.metadata),
  jsonText(c),
];

const PUT = `INSERT INTO crons (cron_id, assistant_id, thread_id, enabled, next_run_date, end_time, created_at, updated_at, metadata, record)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, $10::json)
ON CONFLICT (cron_id) DO UPDATE SET assistant_id = EXCLUDED.assistant_id, thread_id = EXCLUDED.thread_id, enabled = EXCLUDED.enabled,
  next_run_date = EXCLUDED.next_run_date, end_time = EXCLUDED.end_time, created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at,
  metadata = EXCLUDED.metadata, record = EXCLUDED.record`;

export function filterSql(f: CronFilter, p: Params): string {
  const parts: string[] = [];
  // text with a NUL was never stored: such a filter matches nothing
  if (f.assistant_id != null) parts.push(storableText(f.assistant_id) ? `assistant_id = ${p.add(f.assistant_id)}` : "FALSE");
  if (f.thread_id != null) parts.push(storableText(f.thread_id) ? `thread_id = ${p.add(f.thread_id)}` : "FALSE");
  if (f.enabled != null) parts.push(`enabled = ${p.add(f.enabled)}`);
  if (f.metadata != null) parts.push(metadataFilterSql("metadata", f.metadata, p));
  if (f.auth) parts.push(authFilterSql("metadata", f.auth, p));
  return parts.length === 0 ? "TRUE" : parts.join(" AND ");
}

export class PostgresCrons implements CronsPort {
  constructor(private readonly pool: pg.Pool) {}

  async get(cronId: string): Promise<CronRecord | undefined> {
    const r = await this.pool.query<{ record: CronRecord }>("SELECT record FROM crons WHERE cron_id = $1", [cronId]);
    return r.rows[0]?.record;
  }

  search(q: CronFilter & PageSpec<CronSort>): Promise<Page<CronRecord>> {
    const p = new Params();
    return searchPage(this.pool, CRON_SEARCH, filterSql(q, p), p, q, (row) => row.record as CronRecord);
  }

  count(f: CronFilter): Promise<number> {
    const p = new Params();
    return countRows(this.pool, "crons", filterSql(f, p), p.values);
  }

  async all(): Promise<CronRecord[]> {
    const r = await this.pool.query<{ record: CronRecord }>("SELECT record FROM crons ORDER BY cron_id");
    return r.rows.map((row) => row.record);
  }

  async put(record: CronRecord): Promise<void> {
    await this.pool.query(PUT, rowValues(record));
  }

  async update(cronId: string, change: (current: CronRecord) => CronRecord | undefined): Promise<CronRecord | undefined> {
    return transaction(this.pool, async (c) => {
      const r = await c.query<{ record: CronRecord }>("SELECT record FROM crons WHERE cron_id = $1 FOR UPDATE", [cronId]);
      const current = r.rows[0]?.record;
      if (current === undefined) return undefined;
      const next = change(current);
      if (next === undefined) return current;
      await c.query(PUT, rowValues(next));
      return next;
    });
  }

  async remove(cronId: string): Promise<boolean> {
    const r = await this.pool.query("DELETE FROM crons WHERE cron_id = $1", [cronId]);
    return r.rowCount === 1;
  }
}
