// The thread metadata terms of the Postgres adapter (schema-terms.ts, thread-terms.ts): a search or
// count by one metadata value finds exactly the threads the filter matches — after creates,
// metadata changes, status-only saves, deletes, TRUNCATE and a migration onto existing rows — with
// the value spellings jsonb equality implies (1 and 1.0 one value, "1" another; long keys and
// values hashed), in created_at order both ways, with offsets and totals.
import { describe, expect, it } from "vitest";
import { migrate } from "../../src/storage/postgres/migrations.ts";
import { openPostgres } from "../../src/storage/postgres/pool.ts";
import { MIGRATIONS } from "../../src/storage/postgres/schema.ts";
import type { ThreadFilter } from "../../src/storage/port.ts";
import type { JsonObject } from "../../src/util/json.ts";
import type { ThreadRecord } from "../../src/storage/records.ts";
import { usePostgresStorage } from "../helpers/postgres.ts";

const LONG_KEY = "k".repeat(300);
const LONG_VALUE = "v".repeat(300);
const at = (i: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString();
const thread = (id: string, i: number, metadata: JsonObject): ThreadRecord => ({
  thread_id: id,
  created_at: at(i),
  updated_at: at(i),
  metadata,
  status: "idle",
  config: {},
});

const fx = usePostgresStorage({ schema: "terms" });

/** ids of every match, newest first, a page of 2 at a time (offsets), and the totals the pages gave */
async function idsOf(metadata: JsonObject, order: "asc" | "desc" = "desc"): Promise<{ ids: string[]; totals: number[]; count: number }> {
  const ids: string[] = [];
  const totals: number[] = [];
  for (let offset = 0; ; offset += 2) {
    const page = await fx.storage.threads.search({ metadata, sortBy: "created_at", order, offset, limit: 2 });
    totals.push(page.total);
    ids.push(...page.items.map((t) => t.thread_id));
    if (page.items.length < 2) break;
  }
  return { ids, totals, count: await fx.storage.threads.count({ metadata } satisfies ThreadFilter) };
}

async function expectMatches(metadata: JsonObject, newestFirst: string[]): Promise<void> {
  const desc = await idsOf(metadata, "desc");
  expect(desc.ids, JSON.stringify(metadata)).toEqual(newestFirst);
  expect(new Set(desc.totals), JSON.stringify(metadata)).toEqual(new Set([newestFirst.length]));
  expect(desc.count).toBe(newestFirst.length);
  expect((await idsOf(metadata, "asc")).ids).toEqual([...newestFirst].reverse());
}

describe("thread metadata terms", () => {
  it("find what the filter matches after creates, changes, status-only saves and deletes", async () => {
    const made: ThreadRecord[] = [
      thread("a", 1, { user: "u1", n: 1, flag: true, nested: { n: 1 }, list: [1] }),
      thread("b", 2, { user: "u1", n: 1.5, [LONG_KEY]: LONG_VALUE }),
      thread("c", 3, { user: "u2", n: "1", flag: false, nothing: null }),
      thread("d", 4, { user: "u1", n: 10, [LONG_KEY]: `${LONG_VALUE}x` }),
      thread("e", 5, { user: "u1" }),
    ];
    for (const t of made) expect(await fx.storage.threads.create(t)).not.toBe("exists");
    // 1.0 is 1 (jsonb equality), "1" is not; long keys and values are told apart
    const one = JSON.parse('{"n": 1.0}') as JsonObject;
    await expectMatches(one, ["a"]);
    await expectMatches({ n: 1 }, ["a"]);
    await expectMatches({ n: "1" }, ["c"]);
    await expectMatches({ user: "u1" }, ["e", "d", "b", "a"]);
    await expectMatches({ flag: true }, ["a"]);
    await expectMatches({ flag: false }, ["c"]);
    await expectMatches({ [LONG_KEY]: LONG_VALUE }, ["b"]);
    await expectMatches({ [LONG_KEY]: `${LONG_VALUE}x` }, ["d"]);
    await expectMatches({ user: "nobody" }, []);
    // not terms (objects, lists, null): the other search path answers them the same way
    await expectMatches({ nested: { n: 1 } }, ["a"]);
    await expectMatches({ list: [1] }, ["a"]);

    // a metadata change moves the thread between terms; a status-only save keeps them
    const b = made[1];
    const changed: ThreadRecord = { ...b, metadata: { user: "u2", n: 1.5 }, updated_at: at(20) };
    await fx.storage.threads.save(changed);
    await expectMatches({ user: "u1" }, ["e", "d", "a"]);
    await expectMatches({ user: "u2" }, ["c", "b"]);
    await expectMatches({ [LONG_KEY]: LONG_VALUE }, []);
    const busy: ThreadRecord = { ...changed, status: "busy", updated_at: at(21) };
    await fx.storage.threads.save(busy);
    await expectMatches({ user: "u2" }, ["c", "b"]);

    await fx.storage.threads.delete("d");
    await expectMatches({ user: "u1" }, ["e", "a"]);
    await expectMatches({ n: 10 }, []);
    const left = await fx.storage.db.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM thread_terms WHERE term_thread_id = 'd'");
    expect(left.rows[0].n).toBe(0);

    await fx.storage.db.pool.query("TRUNCATE threads");
    expect((await fx.storage.db.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM thread_terms")).rows[0].n).toBe(0);
    await expectMatches({ user: "u1" }, []);
  });

  it("a migration onto existing threads makes their terms", async () => {
    const db = openPostgres({ uri: fx.uri, schema: "before_terms", maxConnections: 2 });
    try {
      const terms = MIGRATIONS.find((m) => m.name === "thread metadata terms")!.version;
      await migrate(
        db,
        MIGRATIONS.filter((m) => m.version < terms),
      );
      await db.pool.query(`INSERT INTO threads (thread_id, status, created_at, updated_at, metadata, record)
        SELECT 't' || lpad(i::text, 3, '0'), 'idle', '${at(0)}', '${at(0)}', jsonb_build_object('user', 'u' || (i % 3), 'deep', jsonb_build_object('x', i)), '{}'
        FROM generate_series(1, 30) i`);
      await migrate(db);
      const r = await db.pool.query<{ id: string }>(
        "SELECT term_thread_id AS id FROM thread_terms WHERE term_key = troupe_term_spelling('user') AND term_value = troupe_term_value('\"u1\"') ORDER BY 1",
      );
      expect(r.rows.map((row) => row.id)).toEqual(Array.from({ length: 10 }, (_, k) => `t${String(3 * k + 1).padStart(3, "0")}`));
      // objects are not terms
      expect((await db.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM thread_terms WHERE term_key = 'deep'")).rows[0].n).toBe(0);
    } finally {
      await db.close();
    }
  });

  it("a metadata change or a delete looks the thread's old terms up by key: no scan of every term", async () => {
    // one connection: the statements share the session whose generic plans the trigger keeps
    const db = openPostgres({ uri: fx.uri, schema: "terms_by_key", maxConnections: 1 });
    const q = <R extends object>(sql: string, values: unknown[] = []) => db.pool.query<R>(sql, values);
    const seqScans = async (): Promise<number> => {
      await q("SELECT pg_stat_force_next_flush()");
      const r = await q<{ n: string }>("SELECT seq_scan::text AS n FROM pg_stat_user_tables WHERE schemaname = 'terms_by_key' AND relname = 'thread_terms'");
      return Number(r.rows[0].n);
    };
    try {
      await migrate(db);
      await q(`INSERT INTO threads (thread_id, status, created_at, updated_at, metadata, record)
        SELECT 't' || lpad(i::text, 5, '0'), 'idle', '${at(0)}', '${at(0)}', jsonb_build_object('user', 'u' || (i % 100), 'n', i), '{}'
        FROM generate_series(1, 5000) i`);
      await q("INSERT INTO threads (thread_id, status, created_at, updated_at, metadata, record) VALUES ('fresh', 'idle', $1, $1, '{}', '{}')", [at(1)]);
      await q("ANALYZE threads");
      await q("ANALYZE thread_terms");
      // as the actor shards' sessions plan (pool.ts genericPlans): a plan made once, kept
      await q("SET plan_cache_mode = force_generic_plan");
      const before = await seqScans();
      for (let i = 1; i <= 8; i++)
        await q("UPDATE threads SET metadata = jsonb_build_object('user', 'changed', 'n', -$1::int) WHERE thread_id = $2", [
          i,
          `t${String(i).padStart(5, "0")}`,
        ]);
      await q("UPDATE threads SET metadata = '{\"graph_id\": \"echo\"}' WHERE thread_id = 'fresh'"); // a fresh thread's first run
      for (let i = 9; i <= 12; i++) await q("DELETE FROM threads WHERE thread_id = $1", [`t${String(i).padStart(5, "0")}`]);
      expect(await seqScans()).toBe(before);

      const ids = async (key: string, value: string) =>
        (
          await q<{ id: string }>(
            "SELECT term_thread_id AS id FROM thread_terms WHERE term_key = troupe_term_spelling($1) AND term_value = troupe_term_value($2::jsonb) ORDER BY 1",
            [key, value],
          )
        ).rows.map((r) => r.id);
      expect(await ids("user", '"changed"')).toEqual(Array.from({ length: 8 }, (_, k) => `t${String(k + 1).padStart(5, "0")}`));
      expect(await ids("user", '"u1"')).toEqual(
        Array.from({ length: 50 }, (_, k) => `t${String(100 * k + 1).padStart(5, "0")}`).filter((id) => id !== "t00001"),
      );
      expect(await ids("n", "9")).toEqual([]); // deleted
      expect(await ids("n", "-3")).toEqual(["t00003"]);
      expect(await ids("graph_id", '"echo"')).toEqual(["fresh"]);
    } finally {
      await db.close();
    }
  });
});
