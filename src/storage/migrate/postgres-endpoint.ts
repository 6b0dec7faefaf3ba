// A PostgreSQL database as a source or target of `troupe migrate`. The schema is created and
// migrated at open (migrations.ts). Reads page through each table in primary-key order (keyset
// pages, one statement per page and family); writes keep the records as stored (timestamps,
// versions, TTL expiry, embeddings), a thread's records in one transaction. Crons and checkpoints
// go through the storage port's adapter; the progress record is a row of troupe_migrate_progress.
import type pg from "pg";
import { openPostgresStorage, type PostgresStorage } from "../postgres/adapter.ts";
import { jsonbText, jsonText } from "../postgres/json-columns.ts";
import { bytesParam } from "../postgres/threads.ts";
import { transaction } from "../postgres/transaction.ts";
import type {
  AssistantRecord,
  AssistantVersionRecord,
  CronRecord,
  RunRecord,
  StoreItemRecord,
  ThreadRecord,
  WebhookDeliveryRecord,
  WebhookOutcomeRecord,
} from "../records.ts";
import type { AssistantCopy, CheckpointSaver, Copied, Cursor, Family, MigrationEndpoint, MigrationProgress, StoreItemCopy, ThreadCopy } from "./endpoint.ts";

/** rows per page of a read */
const PAGE = 200;
const TABLES: Record<Family, string> = { assistants: "assistants", crons: "crons", store: "store_items", threads: "threads" };

export async function openPostgresEndpoint(uri: string, schema?: string): Promise<MigrationEndpoint> {
  // a copy's commits are its progress: each one flushed before the next batch (resumable after any crash)
  const storage = await openPostgresStorage({ uri, schema, maxConnections: 4, syncCommits: true });
  return new PostgresEndpoint(storage, labelOf(uri, storage.db.schema), (await storage.checkpoints.open()).saver());
}

/** the URI without its password, and the schema */
function labelOf(uri: string, schema: string): string {
  try {
    const url = new URL(uri);
    url.password = "";
    return `${url.toString()}#${schema}`;
  } catch {
    return `postgres#${schema}`;
  }
}

const after = (cursor: Cursor | undefined): string => (typeof cursor === "string" ? cursor : "");

class PostgresEndpoint implements MigrationEndpoint {
  readonly saver: CheckpointSaver;
  private readonly pool: pg.Pool;

  constructor(
    private readonly storage: PostgresStorage,
    readonly label: string,
    saver: CheckpointSaver,
  ) {
    this.pool = storage.db.pool;
    this.saver = saver;
  }

  async count(family: Family): Promise<number> {
    const r = await this.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${TABLES[family]}`);
    return r.rows[0].n;
  }

  async *assistants(cursor?: Cursor): AsyncIterable<Copied<AssistantCopy>> {
    for (let last = after(cursor); ;) {
      const page = await this.pool.query<{ assistant_id: string; record: AssistantRecord }>(
        "SELECT assistant_id, record FROM assistants WHERE assistant_id > $1 ORDER BY assistant_id LIMIT $2",
        [last, PAGE],
      );
      if (page.rows.length === 0) return;
      const versions = await this.pool.query<{ assistant_id: string; record: AssistantVersionRecord }>(
        "SELECT assistant_id, record FROM assistant_versions WHERE assistant_id = ANY($1::text[]) ORDER BY assistant_id, version",
        [page.rows.map((r) => r.assistant_id)],
      );
      const byId = groupBy(versions.rows, (v) => v.assistant_id);
      for (const row of page.rows) {
        yield { item: { record: row.record, versions: (byId.get(row.assistant_id) ?? []).map((v) => v.record) }, cursor: row.assistant_id };
      }
      last = page.rows[page.rows.length - 1].assistant_id;
    }
  }

  async *crons(cursor?: Cursor): AsyncIterable<Copied<CronRecord>> {
    for (let last = after(cursor); ;) {
      const page = await this.pool.query<{ cron_id: string; record: CronRecord }>(
        "SELECT cron_id, record FROM crons WHERE cron_id > $1 ORDER BY cron_id LIMIT $2",
        [last, PAGE],
      );
      if (page.rows.length === 0) return;
      for (const row of page.rows) yield { item: row.record, cursor: row.cron_id };
      last = page.rows[page.rows.length - 1].cron_id;
    }
  }

  async *storeItems(cursor?: Cursor): AsyncIterable<Copied<StoreItemCopy>> {
    // cursor: [namespace as JSON, key]
    let last: [string[], string] | undefined = Array.isArray(cursor) ? [JSON.parse(cursor[0]) as string[], cursor[1]] : undefined;
    for (;;) {
      const page = await this.pool.query<StoreItemRecord & { ttl_minutes: number | null; expires_at: number | null; vectors: number[][] | null }>(
        `SELECT namespace, key, value, created_at, updated_at, ttl_minutes, expires_at, vectors FROM store_items
         ${last ? "WHERE (namespace, key) > ($2::text[], $3)" : ""} ORDER BY namespace, key LIMIT $1`,
        last ? [PAGE, last[0], last[1]] : [PAGE],
      );
      if (page.rows.length === 0) return;
      for (const r of page.rows) {
        const record: StoreItemRecord = { namespace: r.namespace, key: r.key, value: r.value, created_at: r.created_at, updated_at: r.updated_at };
        yield {
          item: {
            record,
            ...(r.ttl_minutes !== null && r.expires_at !== null ? { ttl: { minutes: r.ttl_minutes, expiresAt: r.expires_at } } : {}),
            ...(r.vectors !== null ? { vectors: r.vectors } : {}),
          },
          cursor: [JSON.stringify(r.namespace), r.key],
        };
      }
      const end = page.rows[page.rows.length - 1];
      last = [end.namespace, end.key];
    }
  }

  async *threads(cursor?: Cursor): AsyncIterable<Copied<ThreadCopy>> {
    for (let last = after(cursor); ;) {
      const page = await this.pool.query<{ thread_id: string; record: ThreadRecord; values_json: Buffer | null; minutes: number | null }>(
        `SELECT t.thread_id, t.record, t.values_json, l.minutes FROM threads t LEFT JOIN thread_ttls l USING (thread_id)
         WHERE t.thread_id > $1 ORDER BY t.thread_id LIMIT $2`,
        [last, PAGE],
      );
      if (page.rows.length === 0) return;
      const ids = [page.rows.map((r) => r.thread_id)];
      const [runs, outbox, outcomes] = await Promise.all([
        this.pool.query<{ thread_id: string; record: RunRecord; kwargs: RunRecord["kwargs"] }>(
          "SELECT thread_id, record, kwargs FROM runs WHERE thread_id = ANY($1::text[]) ORDER BY thread_id, run_id",
          ids,
        ),
        this.pool.query<{ thread_id: string; run_id: string; record: WebhookDeliveryRecord; values_json: Buffer | null }>(
          "SELECT thread_id, run_id, record, values_json FROM webhook_outbox WHERE thread_id = ANY($1::text[]) ORDER BY thread_id, run_id",
          ids,
        ),
        this.pool.query<{ thread_id: string; run_id: string; record: WebhookOutcomeRecord }>(
          "SELECT thread_id, run_id, record FROM webhook_outcomes WHERE thread_id = ANY($1::text[]) ORDER BY thread_id, run_id",
          ids,
        ),
      ]);
      const runsOf = groupBy(runs.rows, (r) => r.thread_id);
      const outboxOf = groupBy(outbox.rows, (r) => r.thread_id);
      const outcomesOf = groupBy(outcomes.rows, (r) => r.thread_id);
      for (const row of page.rows) {
        const id = row.thread_id;
        yield {
          item: {
            record: row.record,
            ...(row.values_json !== null ? { valuesJson: row.values_json.toString("utf8") } : {}),
            ...(row.minutes !== null ? { ttl: row.minutes } : {}),
            runs: (runsOf.get(id) ?? []).map((r) => ({ ...r.record, kwargs: r.kwargs })),
            deliveries: (outboxOf.get(id) ?? []).map((d) => [
              d.run_id,
              d.values_json === null ? d.record : { ...d.record, values: new Uint8Array(d.values_json) },
            ]),
            outcomes: (outcomesOf.get(id) ?? []).map((o) => [o.run_id, o.record]),
          },
          cursor: id,
        };
      }
      last = page.rows[page.rows.length - 1].thread_id;
    }
  }

  async putAssistant(a: AssistantCopy): Promise<void> {
    const r = a.record;
    await transaction(this.pool, async (c) => {
      await c.query("DELETE FROM assistant_versions WHERE assistant_id = $1", [r.assistant_id]);
      await c.query(
        `INSERT INTO assistants (assistant_id, graph_id, name, name_lower, version, created_at, updated_at, metadata, record)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9::json)
         ON CONFLICT (assistant_id) DO UPDATE SET graph_id = EXCLUDED.graph_id, name = EXCLUDED.name, name_lower = EXCLUDED.name_lower,
           version = EXCLUDED.version, created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at, metadata = EXCLUDED.metadata,
           record = EXCLUDED.record`,
        [r.assistant_id, r.graph_id, r.name, r.name.toLowerCase(), r.version, r.created_at, r.updated_at, jsonbText(r.metadata), jsonText(r)],
      );
      await c.query(
        `INSERT INTO assistant_versions (assistant_id, version, metadata, record)
         SELECT $1, v, m::jsonb, rec::json FROM unnest($2::int[], $3::text[], $4::text[]) u(v, m, rec)`,
        [r.assistant_id, a.versions.map((v) => v.version), a.versions.map((v) => jsonbText(v.metadata)), a.versions.map((v) => jsonText(v))],
      );
    });
  }

  putCron(c: CronRecord): Promise<void> {
    return this.storage.crons.put(c);
  }

  async putStoreItems(items: readonly StoreItemCopy[]): Promise<void> {
    await this.pool.query(
      `INSERT INTO store_items (namespace, key, value, fields, created_at, updated_at, ttl_minutes, expires_at, vectors)
       SELECT ARRAY(SELECT json_array_elements_text(u.ns::json)), u.key, u.value::json, u.fields::jsonb, u.created, u.updated, u.minutes, u.expires,
         u.vectors::json
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::float8[], $8::float8[], $9::text[])
         u(ns, key, value, fields, created, updated, minutes, expires, vectors)
       ON CONFLICT (namespace, key) DO UPDATE SET value = EXCLUDED.value, fields = EXCLUDED.fields, created_at = EXCLUDED.created_at,
         updated_at = EXCLUDED.updated_at, ttl_minutes = EXCLUDED.ttl_minutes, expires_at = EXCLUDED.expires_at, vectors = EXCLUDED.vectors`,
      [
        items.map((i) => JSON.stringify(i.record.namespace)),
        items.map((i) => i.record.key),
        // the value's exact text, and its jsonb spelling for filters (json-columns.ts)
        items.map((i) => jsonText(i.record.value)),
        items.map((i) => jsonbText(i.record.value)),
        items.map((i) => i.record.created_at),
        items.map((i) => i.record.updated_at),
        items.map((i) => i.ttl?.minutes ?? null),
        items.map((i) => i.ttl?.expiresAt ?? null),
        items.map((i) => (i.vectors ? JSON.stringify(i.vectors) : null)),
      ],
    );
  }

  async putThreads(threads: readonly ThreadCopy[]): Promise<void> {
    if (threads.length === 0) return;
    const ids = threads.map((t) => t.record.thread_id);
    const runs = threads.flatMap((t) => t.runs.map((r) => ({ threadId: t.record.thread_id, r })));
    const deliveries = threads.flatMap((t) => t.deliveries.map(([runId, d]) => ({ threadId: t.record.thread_id, runId, d })));
    const outcomes = threads.flatMap((t) => t.outcomes.map(([runId, o]) => ({ threadId: t.record.thread_id, runId, o })));
    const ttls = threads.filter((t) => t.ttl !== undefined);
    // one transaction per batch, each table's rows in one statement: a batch costs the same few
    // round trips and one commit however many threads it holds
    await transaction(this.pool, async (c) => {
      await c.query(
        `INSERT INTO threads (thread_id, status, created_at, updated_at, metadata, record, values_json)
         SELECT u.id, u.status, u.created, u.updated, u.metadata::jsonb, u.record::json, u.vals
         FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bytea[]) u(id, status, created, updated, metadata, record, vals)
         ON CONFLICT (thread_id) DO UPDATE SET status = EXCLUDED.status, created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at,
           metadata = EXCLUDED.metadata, record = EXCLUDED.record, values_json = EXCLUDED.values_json`,
        [
          ids,
          threads.map((t) => t.record.status),
          threads.map((t) => t.record.created_at),
          threads.map((t) => t.record.updated_at),
          threads.map((t) => jsonbText(t.record.metadata)),
          threads.map((t) => jsonText(t.record)),
          threads.map((t) => (t.valuesJson === undefined ? null : bytesParam(t.valuesJson))),
        ],
      );
      await c.query("DELETE FROM thread_ttls WHERE thread_id = ANY($1::text[])", [ids]);
      if (ttls.length > 0)
        await c.query("INSERT INTO thread_ttls (thread_id, minutes) SELECT * FROM unnest($1::text[], $2::float8[])", [
          ttls.map((t) => t.record.thread_id),
          ttls.map((t) => t.ttl),
        ]);
      await c.query("DELETE FROM runs WHERE thread_id = ANY($1::text[])", [ids]);
      if (runs.length > 0)
        await c.query(
          `INSERT INTO runs (run_id, thread_id, assistant_id, status, record, kwargs)
           SELECT u.run_id, u.thread_id, u.assistant_id, u.status, u.record::json, u.kwargs::json
           FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[]) u(run_id, thread_id, assistant_id, status, record, kwargs)`,
          [
            runs.map(({ r }) => r.run_id),
            runs.map(({ threadId }) => threadId),
            runs.map(({ r }) => r.assistant_id),
            runs.map(({ r }) => r.status),
            runs.map(({ r }) => jsonText({ ...r, kwargs: null })),
            runs.map(({ r }) => jsonText(r.kwargs)),
          ],
        );
      await c.query("DELETE FROM webhook_outbox WHERE thread_id = ANY($1::text[])", [ids]);
      await c.query("DELETE FROM webhook_outcomes WHERE thread_id = ANY($1::text[])", [ids]);
      if (deliveries.length > 0)
        await c.query(
          `INSERT INTO webhook_outbox (thread_id, run_id, next_attempt_at, record, values_json)
           SELECT u.thread_id, u.run_id, u.next_attempt_at, u.record::json, u.vals
           FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bytea[]) u(thread_id, run_id, next_attempt_at, record, vals)`,
          [
            deliveries.map(({ threadId }) => threadId),
            deliveries.map(({ runId }) => runId),
            deliveries.map(({ d }) => d.next_attempt_at),
            deliveries.map(({ d }) => {
              const { values: _values, ...record } = d;
              return jsonText(record);
            }),
            deliveries.map(({ d }) => (d.values === undefined ? null : bytesParam(d.values))),
          ],
        );
      if (outcomes.length > 0)
        await c.query(
          "INSERT INTO webhook_outcomes (thread_id, run_id, record) SELECT u.thread_id, u.run_id, u.record::json FROM unnest($1::text[], $2::text[], $3::text[]) u(thread_id, run_id, record)",
          [outcomes.map(({ threadId }) => threadId), outcomes.map(({ runId }) => runId), outcomes.map(({ o }) => jsonText(o))],
        );
    });
  }

  async threadsWithCheckpoints(threadIds: readonly string[]): Promise<Set<string>> {
    const r = await this.pool.query<{ thread_id: string }>(
      `SELECT t.id AS thread_id FROM unnest($1::text[]) t(id)
       WHERE EXISTS (SELECT 1 FROM checkpoints WHERE thread_id = t.id) OR EXISTS (SELECT 1 FROM checkpoint_writes WHERE thread_id = t.id)
         OR EXISTS (SELECT 1 FROM checkpoint_blobs WHERE thread_id = t.id) OR EXISTS (SELECT 1 FROM checkpoint_chunks WHERE thread_id = t.id)`,
      [threadIds],
    );
    return new Set(r.rows.map((row) => row.thread_id));
  }

  async readProgress(source: string): Promise<MigrationProgress | undefined> {
    const r = await this.pool.query<{ progress: MigrationProgress }>("SELECT progress FROM troupe_migrate_progress WHERE source = $1", [source]);
    return r.rows[0]?.progress;
  }

  async writeProgress(p: MigrationProgress): Promise<void> {
    await this.pool.query(
      "INSERT INTO troupe_migrate_progress (source, progress) VALUES ($1, $2::json) ON CONFLICT (source) DO UPDATE SET progress = EXCLUDED.progress",
      [p.source, JSON.stringify(p)],
    );
  }

  close(): Promise<void> {
    return this.storage.close();
  }
}

function groupBy<T>(rows: readonly T[], key: (row: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const row of rows) {
    const list = out.get(key(row));
    if (list) list.push(row);
    else out.set(key(row), [row]);
  }
  return out;
}
