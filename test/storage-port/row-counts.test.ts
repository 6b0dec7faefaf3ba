// The row counts the Postgres adapter keeps for unfiltered totals (schema-counts.ts): exact after
// every kind of write the port makes (creates, upserts, conditional inserts that insert nothing,
// deletes, bulk and concurrent writes, TRUNCATE, a migration onto existing rows), and read without
// touching the counted table, so an unfiltered count or search total costs the same at any size.
import { describe, expect, it } from "vitest";
import { filterSql as threadFilter, THREAD_SEARCH } from "../../src/storage/postgres/threads.ts";
import { Params } from "../../src/storage/postgres/filter-sql.ts";
import { migrate } from "../../src/storage/postgres/migrations.ts";
import { openPostgres } from "../../src/storage/postgres/pool.ts";
import { MIGRATIONS } from "../../src/storage/postgres/schema.ts";
import { COUNTED_TABLES } from "../../src/storage/postgres/schema-counts.ts";
import { countStatement, searchStatement } from "../../src/storage/postgres/search-sql.ts";
import type { AssistantRecord, CronRecord, RunRecord, ThreadRecord } from "../../src/storage/records.ts";
import { usePostgresStorage } from "../helpers/postgres.ts";
import { runRecord, threadRecord } from "../helpers/records.ts";

const T0 = "2026-01-01T00:00:00.000Z";
const thread = (id: string): ThreadRecord => ({ thread_id: id, created_at: T0, updated_at: T0, metadata: {}, status: "idle", config: {} });
const assistant = (id: string): AssistantRecord => ({
  assistant_id: id,
  version: 1,
  config: {},
  context: {},
  created_at: T0,
  updated_at: T0,
  graph_id: "g",
  metadata: {},
  name: id,
  description: null,
});
const cron = (id: string): CronRecord => ({
  cron_id: id,
  assistant_id: "a-0",
  thread_id: null,
  on_run_completed: null,
  end_time: null,
  schedule: "* * * * *",
  timezone: null,
  created_at: T0,
  updated_at: T0,
  payload: {},
  user_id: null,
  next_run_date: T0,
  metadata: {},
  enabled: true,
});

const fx = usePostgresStorage({ schema: "counts", maxConnections: 8 });

/** what the port answers without a filter, next to the table's real row count */
async function totals(table: (typeof COUNTED_TABLES)[number]) {
  const port = { threads: fx.storage.threads, assistants: fx.storage.assistants, crons: fx.storage.crons }[table];
  const real = await fx.storage.db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`);
  const page = await port.search({ offset: 0, limit: 1, sortBy: "created_at", order: "desc" } as never);
  return { count: await port.count({}), total: page.total, real: real.rows[0].n };
}

const expectExact = async (table: (typeof COUNTED_TABLES)[number], n: number) => expect(await totals(table)).toEqual({ count: n, total: n, real: n });

describe("row counts stay exact", () => {
  it("threads: creates (also concurrent, and one that finds the id taken), upserts, deletes", async () => {
    await expectExact("threads", 0);
    // concurrent creates on the pool's connections (each connection adds to its own slot)
    await Promise.all(Array.from({ length: 200 }, (_, i) => fx.storage.threads.create(thread(`t-${i}`))));
    await expectExact("threads", 200);
    expect(await fx.storage.threads.create(thread("t-0"))).toBe("exists");
    // saves upsert: an existing thread is updated (not counted), a new one inserted
    await fx.storage.threads.save({ ...thread("t-1"), status: "busy" });
    await fx.storage.threads.save(thread("t-new"), "{}");
    await expectExact("threads", 201);
    // a run's create writes its thread's record too
    const run: RunRecord = {
      run_id: "r-1",
      thread_id: "t-run",
      assistant_id: "a",
      metadata: {},
      status: "pending",
      kwargs: { input: null, config: {}, stream_mode: ["values"], temporary: false, subgraphs: false, resumable: false },
      multitask_strategy: "reject",
      created_at: T0,
      updated_at: T0,
      graph_id: "g",
      attempt: 0,
    };
    await fx.storage.runs.create({ run, thread: thread("t-run"), prev: undefined }).committed;
    await expectExact("threads", 202);
    await Promise.all(Array.from({ length: 50 }, (_, i) => fx.storage.threads.delete(`t-${i}`)));
    await fx.storage.threads.delete("no-such-thread");
    await expectExact("threads", 152);
  });

  it("assistants: create, create of a taken id, ensureDefaults, patch, delete", async () => {
    for (let i = 0; i < 10; i++) expect(await fx.storage.assistants.create(assistant(`a-${i}`))).not.toBe("exists");
    expect(await fx.storage.assistants.create(assistant("a-0"))).toBe("exists");
    await fx.storage.assistants.ensureDefaults([assistant("a-1"), assistant("a-default")]);
    await expectExact("assistants", 11);
    await fx.storage.assistants.delete("a-3");
    await expectExact("assistants", 10);
  });

  it("crons: put (an upsert), update, remove", async () => {
    for (let i = 0; i < 5; i++) await fx.storage.crons.put(cron(`c-${i}`));
    await fx.storage.crons.put({ ...cron("c-0"), enabled: false });
    await fx.storage.crons.update("c-1", (c) => ({ ...c, enabled: false }));
    await expectExact("crons", 5);
    await fx.storage.crons.remove("c-4");
    await expectExact("crons", 4);
  });

  it("bulk statements and TRUNCATE", async () => {
    await fx.storage.db.pool.query(`INSERT INTO threads (thread_id, status, created_at, updated_at, metadata, record)
      SELECT 'bulk-' || i, 'idle', '${T0}', '${T0}', '{}', '{}' FROM generate_series(1, 1000) i`);
    await expectExact("threads", 1152);
    await fx.storage.db.pool.query("DELETE FROM threads WHERE thread_id LIKE 'bulk-%' AND thread_id < 'bulk-5'");
    await expectExact("threads", 1152 - 445); // bulk-1..4, 10..49, 100..499 and 1000 sort before bulk-5: 4 + 40 + 400 + 1
    await fx.storage.db.pool.query("TRUNCATE threads");
    await expectExact("threads", 0);
    await fx.storage.threads.create(thread("after-truncate"));
    await expectExact("threads", 1);
  });

  it("a rolled-back write counts nothing", async () => {
    const c = await fx.storage.db.pool.connect();
    try {
      await c.query("BEGIN");
      await c.query(
        `INSERT INTO threads (thread_id, status, created_at, updated_at, metadata, record) VALUES ('rolled', 'idle', '${T0}', '${T0}', '{}', '{}')`,
      );
      await c.query("ROLLBACK");
    } finally {
      c.release();
    }
    await expectExact("threads", 1);
  });
});

describe("a run's create on a thread its actor knows", () => {
  it("fires no INSERT trigger on threads (PostgreSQL plans the counting trigger again on every call), and fails when the row is gone", async () => {
    const c = fx.storage.db.pool;
    // a probe next to the counting trigger: how many INSERT statements on threads fired triggers
    await c.query(`CREATE TABLE insert_firings (n int NOT NULL);
      INSERT INTO insert_firings VALUES (0);
      CREATE FUNCTION probe_insert() RETURNS trigger LANGUAGE plpgsql AS $fn$ BEGIN UPDATE insert_firings SET n = n + 1; RETURN NULL; END $fn$;
      CREATE TRIGGER threads_probe AFTER INSERT ON threads FOR EACH STATEMENT EXECUTE FUNCTION probe_insert();`);
    const firings = async () => (await c.query<{ n: number }>("SELECT n FROM insert_firings")).rows[0].n;
    try {
      const known = threadRecord("t-known");
      await fx.storage.threads.create(known);
      expect(await firings()).toBe(1);
      const busy = { ...known, status: "busy" as const, updated_at: "2026-01-01T00:00:01.000Z" };
      await fx.storage.runs.create({ run: runRecord("t-known", "r-known"), thread: busy, prev: known }).committed;
      expect(await firings()).toBe(1); // the thread row was updated, not upserted
      expect(await fx.storage.threads.get("t-known")).toEqual(busy);
      expect(await fx.storage.runs.get("t-known", "r-known")).toMatchObject({ run_id: "r-known", status: "pending" });
      // a thread without a row (none known): the create makes it
      await fx.storage.runs.create({ run: runRecord("t-made", "r-made"), thread: threadRecord("t-made"), prev: undefined }).committed;
      expect(await firings()).toBe(2);
      expect(await fx.storage.threads.get("t-made")).toBeDefined();
      // the row deleted behind the actor's back: nothing is written and the create fails as on a missing thread
      await c.query("DELETE FROM threads WHERE thread_id = 't-known'");
      await expect(fx.storage.runs.create({ run: runRecord("t-known", "r-late"), thread: busy, prev: busy }).committed).rejects.toMatchObject({
        code: "NOT_FOUND",
      });
      expect(await fx.storage.threads.get("t-known")).toBeUndefined();
      expect(await fx.storage.runs.get("t-known", "r-late")).toBeUndefined();
    } finally {
      await c.query("DROP TRIGGER threads_probe ON threads; DROP FUNCTION probe_insert(); DROP TABLE insert_firings;");
    }
  });
});

describe("migration onto existing rows", () => {
  it("counts the rows already there once", async () => {
    const db = openPostgres({ uri: fx.uri, schema: "before_counts", maxConnections: 2 });
    try {
      const rowCounts = MIGRATIONS.find((m) => m.name === "row counts")!.version;
      const before = MIGRATIONS.filter((m) => m.version < rowCounts);
      await migrate(db, before);
      await db.pool.query(`INSERT INTO threads (thread_id, status, created_at, updated_at, metadata, record)
        SELECT 't' || i, 'idle', '${T0}', '${T0}', '{}', '{}' FROM generate_series(1, 37) i`);
      await migrate(db);
      const r = await db.pool.query(countStatement("threads", "TRUE", []));
      expect(r.rows[0].n).toBe(37);
      await db.pool.query(
        `INSERT INTO threads (thread_id, status, created_at, updated_at, metadata, record) VALUES ('t38', 'idle', '${T0}', '${T0}', '{}', '{}')`,
      );
      expect((await db.pool.query(countStatement("threads", "TRUE", []))).rows[0].n).toBe(38);
    } finally {
      await db.close();
    }
  });
});

describe("an unfiltered total reads no row of the counted table", () => {
  interface PlanNode {
    "Node Type": string;
    "Relation Name"?: string;
    Plans?: PlanNode[];
  }
  const relations = (n: PlanNode): string[] => [...(n["Relation Name"] ? [n["Relation Name"]] : []), ...(n.Plans ?? []).flatMap(relations)];
  const planOf = async (s: { text: string; values: unknown[] }) =>
    (await fx.storage.db.pool.query<{ "QUERY PLAN": [{ Plan: PlanNode }] }>(`EXPLAIN (FORMAT JSON) ${s.text}`, s.values)).rows[0]["QUERY PLAN"][0].Plan;

  it("count() and a search's total: only the counters (a filtered count still counts its matches)", async () => {
    for (const table of COUNTED_TABLES) expect(relations(await planOf(countStatement(table, "TRUE", [])))).toEqual(["troupe_row_counts"]);
    const p = new Params();
    const search = searchStatement(THREAD_SEARCH, threadFilter({}, p), p, { offset: 0, limit: 10, sortBy: "created_at", order: "desc" });
    // the page walks threads (up to offset + limit rows); the total reads the counters
    expect(relations(await planOf(search)).sort()).toEqual(["threads", "troupe_row_counts"]);
    const f = new Params();
    expect(relations(await planOf(countStatement("threads", threadFilter({ status: "busy" }, f), f.values)))).toEqual(["threads"]);
  });
});
