// ThreadsPort on Postgres (tables threads, thread_ttls). Records are written only by the thread's
// actor, through the storage's per-thread write chain (write-chains.ts), so a thread's writes
// commit in the order its actor issued them.
import type pg from "pg";
import { fencedStatements, fenceManySql, fenceManyValues, type Fence, type Guard } from "../../cluster/fence.ts";
import { laterSql } from "../../cluster/time.ts";
import type { LeaseTake, Page, PageSpec, TakenLease, ThreadFilter, ThreadSort, ThreadsPort } from "../port.ts";
import type { ThreadRecord, WebhookDeliveryRecord } from "../records.ts";
import { authFilterSql, metadataFilterSql, Params, valueFilterSql } from "./filter-sql.ts";
import { jsonbText, jsonText } from "./json-columns.ts";
import { countByTerm, searchByTerm, soleTerm } from "./thread-terms.ts";
import { countRows, searchPage, type SearchSql } from "./search-sql.ts";
import { deliveryValues, enqueueSql } from "./webhooks.ts";
import { arrayColumns, byteaArray } from "./binary-arrays.ts";
import { mergeable, oncePerThread, type MergeKind, type ThreadWriteChains } from "./write-chains.ts";

export const THREAD_SEARCH: SearchSql<ThreadSort> = {
  table: "threads",
  idColumn: "thread_id",
  sortColumns: { thread_id: "thread_id", status: "status", created_at: "created_at", updated_at: "updated_at" },
  select: "record",
};

/** The row's columns $1..$6: thread_id, status, created_at, updated_at, metadata, record. */
export const threadRowValues = (t: ThreadRecord): unknown[] => [t.thread_id, t.status, t.created_at, t.updated_at, jsonbText(t.metadata), jsonText(t)];

/**
 * An upsert of a thread row from threadRowValues at $first.., and of its values from $first+6
 * when `values` (left as they are otherwise). `when`: written only if it holds (a lease fence).
 */
export function upsertThreadSql(first: number, values = false, when?: string): string {
  const $ = (i: number) => `$${first + i}`;
  const row = `${$(0)}, ${$(1)}, ${$(2)}, ${$(3)}, ${$(4)}::jsonb, ${$(5)}::json${values ? `, ${$(6)}` : ""}`;
  return `INSERT INTO threads (thread_id, status, created_at, updated_at, metadata, record${values ? ", values_json" : ""})
  ${when === undefined ? `VALUES (${row})` : `SELECT ${row} WHERE ${when}`}
  ON CONFLICT (thread_id) DO UPDATE SET status = EXCLUDED.status, created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at,
    metadata = EXCLUDED.metadata, record = EXCLUDED.record${values ? ", values_json = EXCLUDED.values_json" : ""}`;
}

/** Bytes for a bytea parameter (node-postgres sends Buffers in binary). */
export const bytesParam = (bytes: Uint8Array | string): Buffer =>
  typeof bytes === "string" ? Buffer.from(bytes, "utf8") : Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);

const THREAD_VALUES = "CASE WHEN values_json IS NULL THEN '{}'::jsonb ELSE troupe_values_jsonb(values_json) END";

export function filterSql(f: ThreadFilter, p: Params): string {
  const parts: string[] = [];
  if (f.ids?.length) parts.push(`thread_id = ANY(${p.add(f.ids)}::text[])`);
  if (f.status) parts.push(`status = ${p.add(f.status)}`);
  if (f.metadata) parts.push(metadataFilterSql("metadata", f.metadata, p));
  if (f.auth) parts.push(authFilterSql("metadata", f.auth, p));
  if (f.values) parts.push(valueFilterSql(THREAD_VALUES, f.values, p));
  return parts.length === 0 ? "TRUE" : parts.join(" AND ");
}

// The thread actor's writes, each written once in its plain and fenced form (fencedStatements:
// on a cluster node they commit only while the node holds the thread's lease, docs/CLUSTER.md).

/** A thread created unless it exists ($1..$6 its row, $7 its values); answers `created` (0: it existed). */
const CREATE_THREAD = fencedStatements(
  "troupe_thread_create",
  (g) => [
    [
      "c",
      `INSERT INTO threads (thread_id, status, created_at, updated_at, metadata, record, values_json)
  ${g.row("$1, $2, $3, $4, $5::jsonb, $6::json, $7")} ON CONFLICT (thread_id) DO NOTHING RETURNING 1`,
    ],
  ],
  "(SELECT count(*)::int FROM c) AS created",
);

/**
 * CREATE_THREAD (no values), and the thread's lease inserted for node $7 (stamp $8, TTL ms $9) with the row it
 * created (createTaking): a new epoch, or none when a lease row stands. Answers the epoch and
 * expiry, and whether the thread has no root checkpoint (the take's read, leases.ts LEASE_THREAD).
 */
const CREATE_THREAD_TAKING = fencedStatements(
  "troupe_thread_create_taking",
  (g) => [
    [
      "c",
      `INSERT INTO threads (thread_id, status, created_at, updated_at, metadata, record, values_json)
  ${g.row("$1, $2, $3, $4, $5::jsonb, $6::json, NULL")} ON CONFLICT (thread_id) DO NOTHING RETURNING thread_id`,
    ],
    [
      "l",
      `INSERT INTO thread_leases (thread_id, node_id, epoch, expires_at)
  SELECT thread_id, $7::text, nextval('thread_lease_epochs'), ${laterSql("$8", "$9")} FROM c
  ON CONFLICT (thread_id) DO NOTHING RETURNING epoch, expires_at`,
    ],
  ],
  `(SELECT count(*)::int FROM c) AS created, (SELECT epoch FROM l) AS epoch, (SELECT expires_at FROM l) AS expires_at,
  NOT EXISTS (SELECT 1 FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = '') AS no_checkpoints`,
);

/** A thread create, for a statement creating several (threadCreateMany): its row and, taking, its lease. */
interface ThreadCreateItem {
  threadId: string;
  /** the single statement's values: threadRowValues first */
  row: unknown[];
  /** plain create: its values (null: none) */
  values?: Buffer | null;
  take?: LeaseTake;
  fence: Fence | undefined;
}

/**
 * The thread creates of a batch (a group's: several threads') as one statement: CREATE_THREAD or,
 * `taking`, CREATE_THREAD_TAKING for each, each gated by its own fence, answering as that
 * statement does. One per thread; exclusive (MergeKind): the thread's row is what the other kinds
 * write too. One statement instead of one per thread: the row-count trigger runs once.
 */
function threadCreateMany(taking: boolean): MergeKind<ThreadCreateItem> {
  const [last, lastType] = taking
    ? [
        ["node_id", "stamp", "ttl_ms"],
        ["text", "timestamptz", "float8"],
      ]
    : [["values_json"], ["bytea"]];
  const columns = ["thread_id", "status", "created_at", "updated_at", "metadata", "record", ...last, "epoch"];
  const types = ["text", "text", "text", "text", "text", "text", ...lastType, "bigint"];
  const f = fenceManySql(columns.length + 2, "§troupe_fence");
  const ctes = `
§items AS MATERIALIZED (
  SELECT u.*, u.ord::int AS n FROM unnest(${types.map((t, i) => `$${i + 1}::${t}[]`).join(", ")}) WITH ORDINALITY u(${columns.join(", ")}, ord)
), ${f.cte}, §held AS MATERIALIZED (
  SELECT array_agg(${f.holdsFor("i.thread_id", "i.epoch")} ORDER BY i.n) AS h FROM §items i
), §c AS (
  INSERT INTO threads (thread_id, status, created_at, updated_at, metadata, record, values_json)
  SELECT i.thread_id, i.status, i.created_at, i.updated_at, i.metadata::jsonb, i.record::json, ${taking ? "NULL" : "i.values_json"}
  FROM §items i WHERE (SELECT h FROM §held)[i.n]
  ON CONFLICT (thread_id) DO NOTHING RETURNING thread_id
)${
    taking
      ? `, §l AS (
  INSERT INTO thread_leases (thread_id, node_id, epoch, expires_at)
  SELECT c.thread_id, i.node_id, nextval('thread_lease_epochs'), ${laterSql("i.stamp", "i.ttl_ms")} FROM §c c JOIN §items i ON i.thread_id = c.thread_id
  ON CONFLICT (thread_id) DO NOTHING RETURNING thread_id, epoch, expires_at
)`
      : ""
  }, §answer AS (
  SELECT i.n AS ord, (SELECT h FROM §held)[i.n] AS held, (SELECT count(*)::int FROM §c c WHERE c.thread_id = i.thread_id) AS created${
    taking
      ? `, l.epoch, l.expires_at,
    NOT EXISTS (SELECT 1 FROM checkpoints WHERE thread_id = i.thread_id AND checkpoint_ns = '') AS no_checkpoints
  FROM §items i LEFT JOIN §l l ON l.thread_id = i.thread_id`
      : `
  FROM §items i`
  }
)`;
  return {
    accepts: oncePerThread(),
    name: taking ? "troupe_thread_create_taking_many" : "troupe_thread_create_many",
    ctes,
    answers: [
      ["created", "int"],
      ...(taking
        ? ([
            ["epoch", "bigint"],
            ["expires_at", "timestamptz"],
            ["no_checkpoints", "boolean"],
          ] as const)
        : []),
    ],
    exclusive: true,
    values(items): unknown[] {
      return [
        ...arrayColumns(
          items.map((i) => i.row),
          ["plain", "plain", "plain", "plain", "text", "text"],
        ),
        ...(taking
          ? [items.map((i) => i.take!.nodeId), items.map((i) => i.take!.stamp), items.map((i) => i.take!.ttlMs)]
          : [byteaArray(items.map((i) => i.values ?? null))]),
        items.map((i) => i.fence?.epoch ?? null),
        ...fenceManyValues(items.map((i) => i.fence)),
      ];
    },
  };
}
const CREATE_THREAD_MANY = threadCreateMany(false);
const CREATE_THREAD_TAKING_MANY = threadCreateMany(true);

const SAVE_THREAD = fencedStatements("troupe_thread_save", (g) => [["t", upsertThreadSql(1, false, g.when)]]);
const SAVE_THREAD_VALUES = fencedStatements("troupe_thread_save_values", (g) => [["t", upsertThreadSql(1, true, g.when)]]);

/** A thread deleted with its runs, TTL and webhook outcomes ($1); `webhook`: and a stateless run's delivery enqueued ($2 run, $3-$5). */
const deleteThreadParts = (g: Guard, webhook: boolean): [string, string][] => [
  ...(webhook ? [["w", enqueueSql("$1", "$2", ["$3", "$4", "$5"], g.when)] as [string, string]] : []),
  ["r", `DELETE FROM runs WHERE thread_id = $1${g.and}`],
  ["ttl", `DELETE FROM thread_ttls WHERE thread_id = $1${g.and}`],
  ["o", `DELETE FROM webhook_outcomes WHERE thread_id = $1${g.and}`],
  ["t", `DELETE FROM threads WHERE thread_id = $1${g.and}`],
];
const DELETE_THREAD = fencedStatements("troupe_thread_delete", (g) => deleteThreadParts(g, false));
const DELETE_THREAD_WEBHOOK = fencedStatements("troupe_thread_delete_webhook", (g) => deleteThreadParts(g, true));

export class PostgresThreads implements ThreadsPort {
  constructor(
    private readonly pool: pg.Pool,
    private readonly chains: ThreadWriteChains,
  ) {}

  async get(threadId: string): Promise<ThreadRecord | undefined> {
    const r = await this.pool.query<{ record: ThreadRecord }>({
      name: "troupe_thread_get",
      text: "SELECT record FROM threads WHERE thread_id = $1",
      values: [threadId],
    });
    return r.rows[0]?.record;
  }

  async valuesJson(threadId: string): Promise<string | undefined> {
    const r = await this.pool.query<{ v: Buffer | null }>({
      name: "troupe_thread_values",
      text: "SELECT values_json AS v FROM threads WHERE thread_id = $1",
      values: [threadId],
    });
    const v = r.rows[0]?.v;
    return v === null || v === undefined ? undefined : v.toString("utf8");
  }

  search(q: ThreadFilter & PageSpec<ThreadSort>): Promise<Page<ThreadRecord>> {
    const term = q.sortBy === "created_at" ? soleTerm(q) : undefined;
    if (term !== undefined) return searchByTerm(this.pool, term, q);
    const p = new Params();
    return searchPage(this.pool, THREAD_SEARCH, filterSql(q, p), p, q, (row) => row.record as ThreadRecord);
  }

  count(f: ThreadFilter): Promise<number> {
    const term = soleTerm(f);
    if (term !== undefined) return countByTerm(this.pool, term);
    const p = new Params();
    return countRows(this.pool, "threads", filterSql(f, p), p.values);
  }

  async ttl(threadId: string): Promise<number | undefined> {
    const r = await this.pool.query<{ minutes: number }>("SELECT minutes FROM thread_ttls WHERE thread_id = $1", [threadId]);
    return r.rows[0]?.minutes;
  }

  async setTtl(threadId: string, minutes: number | null): Promise<void> {
    if (minutes === null) await this.pool.query("DELETE FROM thread_ttls WHERE thread_id = $1", [threadId]);
    else
      await this.pool.query("INSERT INTO thread_ttls (thread_id, minutes) VALUES ($1, $2) ON CONFLICT (thread_id) DO UPDATE SET minutes = EXCLUDED.minutes", [
        threadId,
        minutes,
      ]);
  }

  async sweepCandidates(q: { all: boolean; after?: string; limit: number }): Promise<string[]> {
    const table = q.all ? "threads" : "thread_ttls";
    const r = await this.pool.query<{ thread_id: string }>(`SELECT thread_id FROM ${table} WHERE thread_id > $1 ORDER BY thread_id LIMIT $2`, [
      q.after ?? "",
      q.limit,
    ]);
    return r.rows.map((row) => row.thread_id);
  }

  // (several creates in a batch, a group's at load: one statement, CREATE_THREAD_MANY / CREATE_THREAD_TAKING_MANY)

  create(record: ThreadRecord, valuesJson?: string): Promise<ThreadRecord | "exists"> {
    // the statement's values; the merged item reads the row's ($1-$6) from the same array
    const bytes = valuesJson === undefined ? null : bytesParam(valuesJson);
    const row = threadRowValues(record);
    row.push(bytes);
    const fence = this.chains.fenceOf(record.thread_id);
    return this.chains.issueWrite(
      record.thread_id,
      CREATE_THREAD,
      row,
      (answer): ThreadRecord | "exists" => (answer?.created === 1 ? record : "exists"),
      mergeable(CREATE_THREAD_MANY, () => ({ threadId: record.thread_id, row, values: bytes, fence })),
    );
  }

  createTaking(record: ThreadRecord, take: LeaseTake): Promise<TakenLease | undefined | "exists"> {
    // the statement's values; the merged item reads the row's ($1-$6) from the same array
    const row = threadRowValues(record);
    row.push(take.nodeId, take.stamp, take.ttlMs);
    const fence = this.chains.fenceOf(record.thread_id);
    return this.chains.issueWrite(
      record.thread_id,
      CREATE_THREAD_TAKING,
      row,
      (answer): TakenLease | undefined | "exists" => {
        const r = answer as { created: number; epoch: string | null; expires_at: Date | null; no_checkpoints: boolean } | undefined;
        if (r?.created !== 1) return "exists";
        // int8 comes back as text; epochs stay far below 2^53 (one per acquisition)
        return r.epoch === null || r.expires_at === null ? undefined : { epoch: Number(r.epoch), expiresAt: r.expires_at, noCheckpoints: r.no_checkpoints };
      },
      mergeable(CREATE_THREAD_TAKING_MANY, () => ({ threadId: record.thread_id, row, take, fence })),
    );
  }

  save(record: ThreadRecord, valuesJson?: string): Promise<void> {
    return valuesJson === undefined
      ? this.chains.issueWrite(record.thread_id, SAVE_THREAD, threadRowValues(record))
      : this.chains.issueWrite(record.thread_id, SAVE_THREAD_VALUES, [...threadRowValues(record), bytesParam(valuesJson)]);
  }

  /** `webhook`: a stateless run's delivery, enqueued in the same statement */
  delete(threadId: string, webhook?: { runId: string; delivery: WebhookDeliveryRecord }): Promise<void> {
    return webhook === undefined
      ? this.chains.issueWrite(threadId, DELETE_THREAD, [threadId])
      : this.chains.issueWrite(threadId, DELETE_THREAD_WEBHOOK, [threadId, webhook.runId, ...deliveryValues(webhook.delivery)]);
  }
}
