// The Postgres adapter's searches are answered by its indexes (schema-records.ts), not by reading
// whole tables: on 100,000 rows per table (ANALYZEd), the plan of each indexed search (the
// statements the adapter sends, with real parameters) names the index and has no sequential scan.
// Not a timing test: the plans are what the statements will cost at any size.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ASSISTANT_SEARCH, filterSql as assistantFilter } from "../../src/storage/postgres/assistants.ts";
import { CRON_SEARCH, filterSql as cronFilter } from "../../src/storage/postgres/crons.ts";
import { Params } from "../../src/storage/postgres/filter-sql.ts";
import { migrate } from "../../src/storage/postgres/migrations.ts";
import { openPostgres, type PostgresDb } from "../../src/storage/postgres/pool.ts";
import { ACTIVE, walkStatement } from "../../src/storage/postgres/runs.ts";
import { searchStatement, type SearchSql } from "../../src/storage/postgres/search-sql.ts";
import { searchItemsStatement } from "../../src/storage/postgres/store.ts";
import { SWEEP_EXPIRED } from "../../src/storage/postgres/store-sweep.ts";
import { termCountStatement, termSearchStatement } from "../../src/storage/postgres/thread-terms.ts";
import { filterSql as threadFilter, THREAD_SEARCH } from "../../src/storage/postgres/threads.ts";
import type { PageSpec } from "../../src/storage/port.ts";
import { usePostgresDatabase } from "../helpers/postgres.ts";

const ROWS = 100_000;
const database = usePostgresDatabase();
let db: PostgresDb;

/** ISO timestamps a second apart, as the records have them */
const iso = (expr: string): string => `to_char(timestamp '2026-01-01' + (${expr}) * interval '1 second', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

beforeAll(async () => {
  db = openPostgres({ uri: database.uri, schema: "troupe", maxConnections: 2 });
  await migrate(db);
  const q = (sql: string) => db.pool.query(sql);
  await q(`INSERT INTO threads (thread_id, status, created_at, updated_at, metadata, record, values_json)
    SELECT 't' || lpad(i::text, 7, '0'), (ARRAY['idle','busy','error','interrupted'])[1 + (i % 100 = 0)::int * 3 + (i % 100 = 1)::int],
      ${iso("i")}, ${iso("(i * 7919) % " + ROWS)}, jsonb_build_object('user', 'u' || (i % 1000), 'n', i % 10),
      json_build_object('thread_id', 't' || i), convert_to('{"n":' || (i % 10) || '}', 'UTF8')
    FROM generate_series(1, ${ROWS}) i`);
  await q(`INSERT INTO assistants (assistant_id, graph_id, name, name_lower, version, created_at, updated_at, metadata, record)
    SELECT 'a' || lpad(i::text, 7, '0'), 'g' || (i % 500), 'name ' || i, 'name ' || i, 1, ${iso("i")}, ${iso("i")},
      jsonb_build_object('team', 't' || (i % 1000)), '{}'::json
    FROM generate_series(1, ${ROWS}) i`);
  await q(`INSERT INTO crons (cron_id, assistant_id, thread_id, enabled, next_run_date, end_time, created_at, updated_at, metadata, record)
    SELECT 'c' || lpad(i::text, 7, '0'), 'a' || (i % 1000), CASE WHEN i % 3 = 0 THEN 't' || i END, i % 50 = 0, ${iso("i % 86400")}, NULL,
      ${iso("i")}, ${iso("i")}, jsonb_build_object('k', i % 1000), '{}'::json
    FROM generate_series(1, ${ROWS}) i`);
  // 10,000 threads with 10 runs each, 1 in 200 still pending or running
  await q(`INSERT INTO runs (run_id, thread_id, assistant_id, status, record, kwargs)
    SELECT 'r' || lpad(i::text, 7, '0'), 't' || lpad((i / 10)::text, 7, '0'), 'a' || (i % 300),
      CASE WHEN i % 200 = 0 THEN 'pending' WHEN i % 200 = 1 THEN 'running' ELSE 'success' END, '{}'::json, '{}'::json
    FROM generate_series(1, ${ROWS}) i`);
  await q(`INSERT INTO store_items (namespace, key, value, fields, created_at, updated_at, ttl_minutes, expires_at)
    SELECT ARRAY['users', 'u' || (i % 1000), 'notes'], 'k' || i, '{}'::json, jsonb_build_object('kind', 'k' || (i % 500)),
      ${iso("i")}, ${iso("i")}, CASE WHEN i % 100 = 0 THEN 1 END, CASE WHEN i % 100 = 0 THEN 1e12 + i END
    FROM generate_series(1, ${ROWS}) i`);
  // as autovacuum leaves insert-only tables: vacuumed (visibility map set: index-only scans read no
  // heap; GIN pending lists merged into the index) and analyzed. Not vacuumed, the metadata GIN
  // index's pending list made it look dearer than a sequential scan whenever ANALYZE's sample gave
  // the filter a high estimate (~500 rows instead of ~5: the threads search's total, 1 run in 6).
  await q("VACUUM ANALYZE");
}, 240_000);

afterAll(async () => {
  await db?.close();
});

interface PlanNode {
  "Node Type": string;
  "Index Name"?: string;
  "Relation Name"?: string;
  "Parent Relationship"?: string;
  Plans?: PlanNode[];
}

/** the plan's nodes, depth first */
function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

async function planOf(statement: { text: string; values: unknown[] }): Promise<PlanNode> {
  const r = await db.pool.query<{ "QUERY PLAN": [{ Plan: PlanNode }] }>(`EXPLAIN (FORMAT JSON) ${statement.text}`, statement.values);
  return r.rows[0]["QUERY PLAN"][0].Plan;
}

/** no sequential scan anywhere, and `index` is used */
async function expectIndexed(statement: { text: string; values: unknown[] }, index: string | RegExp): Promise<void> {
  const plan = await planOf(statement);
  const all = nodes(plan);
  const summary = all
    .map((n) => `${n["Node Type"]}${n["Index Name"] ? ` on ${n["Index Name"]}` : n["Relation Name"] ? ` of ${n["Relation Name"]}` : ""}`)
    .join(" / ");
  expect(
    all.filter((n) => n["Node Type"] === "Seq Scan"),
    summary,
  ).toEqual([]);
  expect(
    all.some((n) => n["Index Name"] !== undefined && (typeof index === "string" ? n["Index Name"] === index : index.test(n["Index Name"]))),
    summary,
  ).toBe(true);
}

/**
 * The page of an unfiltered search walks an index; its total (an exact count of every row, as the
 * LMDB adapter gives) may read the table: only the page part is checked.
 */
async function expectPageIndexed(statement: { text: string; values: unknown[] }, index: string): Promise<void> {
  const plan = await planOf(statement);
  const page = nodes({ ...plan, Plans: (plan.Plans ?? []).filter((n) => n["Parent Relationship"] !== "InitPlan") });
  const summary = page.map((n) => `${n["Node Type"]}${n["Index Name"] ? ` on ${n["Index Name"]}` : ""}`).join(" / ");
  expect(
    page.filter((n) => n["Node Type"] === "Seq Scan" || n["Node Type"] === "Sort"),
    summary,
  ).toEqual([]);
  expect(
    page.some((n) => n["Index Name"] === index),
    summary,
  ).toBe(true);
}

function search<S extends string, F>(t: SearchSql<S>, filter: (f: F, p: Params) => string, f: F, page: Partial<PageSpec<S>> & { sortBy: S }) {
  const p = new Params();
  return searchStatement(t, filter(f, p), p, { order: "desc", offset: 0, limit: 10, ...page });
}

describe("query plans on 100,000 rows", () => {
  it("threads: every sort walks its index; status, metadata and ids filters use theirs", async () => {
    for (const order of ["asc", "desc"] as const) {
      await expectPageIndexed(search(THREAD_SEARCH, threadFilter, {}, { sortBy: "created_at", order }), "threads_created");
      await expectPageIndexed(search(THREAD_SEARCH, threadFilter, {}, { sortBy: "updated_at", order }), "threads_updated");
      await expectPageIndexed(search(THREAD_SEARCH, threadFilter, {}, { sortBy: "thread_id", order }), "threads_pkey");
      await expectPageIndexed(search(THREAD_SEARCH, threadFilter, {}, { sortBy: "status", order }), "threads_status");
    }
    await expectIndexed(search(THREAD_SEARCH, threadFilter, { status: "interrupted" }, { sortBy: "created_at" }), "threads_status");
    await expectIndexed(search(THREAD_SEARCH, threadFilter, { metadata: { user: "u7" } }, { sortBy: "created_at" }), "threads_metadata");
    await expectIndexed(
      search(THREAD_SEARCH, threadFilter, { metadata: { user: "u7", n: 7 }, status: "idle" }, { sortBy: "updated_at" }),
      /threads_(metadata|status)/,
    );
    await expectIndexed(search(THREAD_SEARCH, threadFilter, { ids: ["t0000005", "t0000777"] }, { sortBy: "created_at" }), "threads_pkey");
  });

  it("threads by one metadata value (thread-terms.ts): the page walks the term's range in order, the total counts it index-only", async () => {
    for (const term of [
      { key: "user", value: "u7" },
      { key: "n", value: 7 },
    ]) {
      for (const order of ["asc", "desc"] as const) {
        const statement = termSearchStatement(term, { sortBy: "created_at", order, offset: 0, limit: 10 });
        await expectPageIndexed(statement, "thread_terms_pkey");
        const all = nodes(await planOf(statement));
        // not the GIN bitmap of every match (each match's heap page read) that the `@>` filter invites
        expect(all.filter((n) => n["Node Type"] === "Bitmap Heap Scan" && n["Relation Name"] === "threads")).toEqual([]);
        expect(all.some((n) => n["Node Type"] === "Index Only Scan" && n["Index Name"] === "thread_terms_pkey")).toBe(true);
      }
      await expectIndexed(termCountStatement(term), "thread_terms_pkey");
    }
  });

  it("assistants: graph_id and metadata filters, created/updated sorts", async () => {
    await expectIndexed(search(ASSISTANT_SEARCH, assistantFilter, { graph_id: "g17" }, { sortBy: "created_at" }), "assistants_graph");
    await expectIndexed(search(ASSISTANT_SEARCH, assistantFilter, { metadata: { team: "t5" } }, { sortBy: "updated_at" }), "assistants_metadata");
    for (const order of ["asc", "desc"] as const) {
      await expectPageIndexed(search(ASSISTANT_SEARCH, assistantFilter, {}, { sortBy: "created_at", order }), "assistants_created");
      await expectPageIndexed(search(ASSISTANT_SEARCH, assistantFilter, {}, { sortBy: "updated_at", order }), "assistants_updated");
      await expectPageIndexed(search(ASSISTANT_SEARCH, assistantFilter, {}, { sortBy: "name", order }), "assistants_name");
      await expectPageIndexed(search(ASSISTANT_SEARCH, assistantFilter, {}, { sortBy: "graph_id", order }), "assistants_graph");
    }
  });

  it("crons: assistant, thread, enabled and metadata filters; next_run_date sort", async () => {
    await expectIndexed(search(CRON_SEARCH, cronFilter, { assistant_id: "a5" }, { sortBy: "created_at" }), "crons_assistant");
    await expectIndexed(search(CRON_SEARCH, cronFilter, { thread_id: "t300" }, { sortBy: "created_at" }), "crons_thread");
    await expectIndexed(search(CRON_SEARCH, cronFilter, { metadata: { k: 5 } }, { sortBy: "created_at" }), "crons_metadata");
    await expectPageIndexed(search(CRON_SEARCH, cronFilter, {}, { sortBy: "next_run_date", order: "asc" }), "crons_next_run");
    await expectPageIndexed(search(CRON_SEARCH, cronFilter, {}, { sortBy: "next_run_date", order: "desc" }), "crons_next_run_desc");
    await expectPageIndexed(search(CRON_SEARCH, cronFilter, {}, { sortBy: "updated_at", order: "desc" }), "crons_updated");
    await expectIndexed(search(CRON_SEARCH, cronFilter, { enabled: true }, { sortBy: "created_at" }), "crons_enabled");
  });

  it("runs: the active runs (recovery) read the partial index; a thread's runs its own", async () => {
    await expectIndexed(walkStatement(ACTIVE, [], ["", ""]), "runs_active");
    await expectIndexed(walkStatement(`${ACTIVE} AND thread_id = $1`, ["t0000042"], ["", ""]), "runs_active");
    await expectIndexed(walkStatement("assistant_id = $1", ["a7"], ["", ""]), "runs_assistant");
    await expectIndexed(
      { text: "SELECT record, kwargs FROM runs WHERE thread_id = $1 ORDER BY run_id LIMIT $2 OFFSET $3", values: ["t0000042", 10, 0] },
      /runs_(thread|active)/,
    );
  });

  it("store: a namespace prefix is a key range; field filters use the GIN index; the sweep reads the expiry index", async () => {
    await expectIndexed(searchItemsStatement({ namespacePrefix: ["users", "u7"], limit: 10, offset: 0 }, Date.now()), "store_items_pkey");
    // (a page in key order may also walk the primary key and stop at the tenth match: Postgres picks by its estimates)
    await expectIndexed(searchItemsStatement({ namespacePrefix: [], filter: { kind: "k9" }, limit: 10, offset: 0 }, Date.now()), /store_items_(fields|pkey)/);
    await expectIndexed(searchItemsStatement({ namespacePrefix: [], filter: { kind: "k9" }, limit: 1000, offset: 0 }, Date.now()), "store_items_fields");
    await expectIndexed({ text: SWEEP_EXPIRED, values: [1e12 + 500, 100] }, "store_items_expiry");
  });
});
