// The Postgres adapter's searches and counts give the LMDB adapter's answers — the same records in
// the same order, the same totals — on random data and random filters (metadata, values, auth,
// status, ids, graph, name, enabled, store operators; every sort field, both directions, offsets),
// including values that careless encodings confuse: NUL and U+E000 characters (jsonb cannot hold
// NUL), 1 / 1.0 / "1", -0, long values, nested objects and lists, keys that look like list indexes.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStorage, type Storage } from "../../src/storage/env.ts";
import { countAssistants, putAssistant, searchAssistants } from "../../src/storage/indexes/assistants.ts";
import { countCrons, putCron, searchCrons } from "../../src/storage/indexes/crons.ts";
import { putStoreItem } from "../../src/storage/indexes/store-items.ts";
import { countThreads, putThread, searchThreads } from "../../src/storage/indexes/threads.ts";
import type { AssistantFilter, AssistantSort, CronFilter, CronSort, ThreadFilter, ThreadSort } from "../../src/storage/port.ts";
import { openPostgresStorage, type PostgresStorage } from "../../src/storage/postgres/adapter.ts";
import type { AssistantRecord, CronRecord, Json, JsonObject, ThreadRecord } from "../../src/storage/records.ts";
import { LmdbStore } from "../../src/storage/store.ts";
import { usePostgresDatabase } from "../helpers/postgres.ts";
import { KEYS, randomAuthFilter, randomCron, rng, STATUSES, TIMES, uuidOf, VALUES, type Rng } from "../helpers/random-records.ts";

const database = usePostgresDatabase();
let dir: string;
let lmdb: Storage;
let pg: PostgresStorage;

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "troupe-pgprop-"));
  lmdb = openStorage(dir);
  pg = await openPostgresStorage({ uri: database.uri, schema: "troupe", maxConnections: 4 });
});

afterAll(async () => {
  await pg?.close();
  await lmdb?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Values beyond the planner test's: characters jsonb cannot hold or that its spelling escapes, numbers, nesting. */
const HARD: Json[] = [
  "nul\u0000in",
  "nul\u0000",
  "\uE000",
  "\uE000\u0001",
  "é",
  "É",
  "日本",
  1e21,
  1.0000000000000002,
  -1,
  2 ** 53,
  { a: { b: [1, { c: null }] } },
  { "0": "x" },
  ["x"],
  [["a"]],
  { "k\u0000": 1 },
  [null],
  "null",
  "true",
];
const ALL_VALUES = [...VALUES, ...HARD];
const ALL_KEYS = [...KEYS, "k\u0000nul", "\uE000", "0"];

function metadataOf(r: Rng): JsonObject {
  const m: JsonObject = {};
  for (const k of ALL_KEYS) if (r.chance(0.35)) m[k] = k === "user" ? r.pick(["ann", "bob", "cy"]) : r.pick(ALL_VALUES);
  return m;
}

/** mostly keys and values the records have, sometimes nested subsets, lists, impossible values */
function metadataFilterOf(r: Rng): JsonObject {
  const f: JsonObject = {};
  for (let n = r.int(3); n > 0; n--) {
    const k = r.pick(ALL_KEYS);
    const v = k === "user" && r.chance(0.7) ? r.pick(["ann", "bob", "cy", "dan"]) : r.pick(ALL_VALUES);
    f[k] = r.chance(0.1) ? { a: r.pick<Json>([{}, { b: [1, { c: null }] }, { b: [1] }]) } : r.chance(0.05) ? { "0": "x" } : v;
  }
  return f;
}

function authFilterOf(r: Rng): Record<string, unknown> {
  if (r.chance(0.7)) return randomAuthFilter(r);
  const k = r.pick(ALL_KEYS);
  return r.pick([{ [k]: r.pick(ALL_VALUES) }, { tags: { $contains: [{ k: 1, j: 2 }] } }, { [k]: { $contains: r.pick(ALL_VALUES) } }]);
}

/** queries compared, and how many of them matched something (a comparison of empty pages proves little) */
const seen = { queries: 0, matched: 0 };

function expectSamePage<R>(what: string, got: { items: R[]; total: number }, want: { items: R[]; total: number }, id: (r: R) => string): void {
  expect(got.items.map(id), what).toEqual(want.items.map(id));
  expect(got.total, what).toBe(want.total);
  seen.queries++;
  if (want.items.length > 0) seen.matched++;
}

afterAll(() => {
  // the random filters must mostly find something, or the comparison says little
  expect(seen.matched / seen.queries).toBeGreaterThan(0.4);
});

describe("threads", () => {
  const all: ThreadRecord[] = [];

  beforeAll(async () => {
    const r = rng(101);
    for (let i = 0; i < 400; i++) {
      const t: ThreadRecord = {
        thread_id: uuidOf(i),
        created_at: r.pick(TIMES),
        updated_at: r.pick(TIMES),
        metadata: metadataOf(r),
        status: r.pick(STATUSES),
        config: {},
      };
      const values = r.chance(0.4)
        ? JSON.stringify(r.pick<Json>([{ n: 1 }, { n: 2, messages: ["hi"] }, { messages: [] }, { n: "nul\u0000" }, [1, 2], { n: { deep: [1] } }]))
        : undefined;
      all.push(t);
      await lmdb.root.transaction(() => {
        putThread(lmdb, t, undefined);
        if (values !== undefined) lmdb.threadValues.put(t.thread_id, values);
      });
      await pg.threads.save(t, values);
    }
  });

  it("search and count as LMDB does", async () => {
    const r = rng(102);
    for (let i = 0; i < 400; i++) {
      const f: ThreadFilter = {};
      if (r.chance(0.3)) f.status = r.pick(STATUSES);
      if (r.chance(0.7)) f.metadata = metadataFilterOf(r);
      if (r.chance(0.15))
        f.values = r.pick<JsonObject>([{ n: 1 }, { messages: ["hi"] }, { n: 2, messages: [] }, { n: "nul\u0000" }, { n: {} }, { "0": 1 }, {}]);
      if (r.chance(0.2)) f.auth = authFilterOf(r);
      if (r.chance(0.1))
        f.ids = all
          .filter(() => r.chance(0.1))
          .map((t) => t.thread_id)
          .concat(uuidOf(999_999));
      const q = {
        ...f,
        sortBy: r.pick<ThreadSort>(["created_at", "updated_at", "status", "thread_id"]),
        order: r.pick(["asc", "desc"] as const),
        offset: r.pick([0, 0, 1, 7, 500]),
        limit: r.pick([1, 5, 50]),
      };
      const what = `#${i} ${JSON.stringify(q)}`;
      expectSamePage(what, await pg.threads.search(q), await searchThreads(lmdb, q), (t) => t.thread_id);
      expect(await pg.threads.count(f), what).toBe(await countThreads(lmdb, f));
    }
  });

  it("keep each record exactly as written (key order, NUL characters)", async () => {
    for (const t of all.slice(0, 50)) expect(JSON.stringify(await pg.threads.get(t.thread_id))).toBe(JSON.stringify(lmdb.threads.get(t.thread_id)));
  });
});

describe("assistants and crons", () => {
  const assistants: AssistantRecord[] = [];
  const crons: CronRecord[] = [];

  beforeAll(async () => {
    const r = rng(201);
    for (let i = 0; i < 300; i++) {
      const a: AssistantRecord = {
        assistant_id: uuidOf(i),
        version: 1,
        config: {},
        context: {},
        created_at: r.pick(TIMES),
        updated_at: r.pick(TIMES),
        graph_id: r.pick(["echo", "agent", "slow", "é"]),
        metadata: metadataOf(r),
        name: r.pick(["Echo", "echo bot", "Agent", "x", "Éclair", "éclair", "日本 bot", ""]),
        description: null,
      };
      assistants.push(a);
      await lmdb.root.transaction(() => putAssistant(lmdb, a, undefined));
      expect(await pg.assistants.create(a)).toEqual(a);
      const c = randomCron(r, i, metadataOf(r));
      crons.push(c);
      await lmdb.root.transaction(() => putCron(lmdb, c, undefined));
      await pg.crons.put(c);
    }
  });

  it("assistants: search and count as LMDB does", async () => {
    const r = rng(202);
    for (let i = 0; i < 300; i++) {
      const f: AssistantFilter = {
        ...(r.chance(0.4) ? { graph_id: r.pick(["echo", "agent", "nope", "é"]) } : {}),
        ...(r.chance(0.6) ? { metadata: metadataFilterOf(r) } : {}),
        ...(r.chance(0.3) ? { name: r.pick(["ECHO", "bot", "a", "É", "éCL", "日"]) } : {}),
        ...(r.chance(0.2) ? { auth: authFilterOf(r) } : {}),
      };
      const q = {
        ...f,
        sortBy: r.pick<AssistantSort>(["assistant_id", "graph_id", "created_at", "updated_at", "name"]),
        order: r.pick(["asc", "desc"] as const),
        offset: r.pick([0, 2, 30, 400]),
        limit: r.pick([1, 10, 100]),
      };
      const what = `#${i} ${JSON.stringify(q)}`;
      expectSamePage(what, await pg.assistants.search(q), await searchAssistants(lmdb, q), (a) => a.assistant_id);
      expect(await pg.assistants.count(f), what).toBe(await countAssistants(lmdb, f));
    }
  });

  it("crons: search and count as LMDB does", async () => {
    const r = rng(203);
    for (let i = 0; i < 300; i++) {
      const f: CronFilter = {
        ...(r.chance(0.4) ? { assistant_id: r.pick([uuidOf(1), uuidOf(2), uuidOf(9)]) } : {}),
        ...(r.chance(0.3) ? { thread_id: r.pick([uuidOf(50), uuidOf(52)]) } : {}),
        ...(r.chance(0.3) ? { enabled: r.chance(0.5) } : {}),
        ...(r.chance(0.5) ? { metadata: metadataFilterOf(r) } : {}),
        ...(r.chance(0.2) ? { auth: authFilterOf(r) } : {}),
      };
      const q = {
        ...f,
        sortBy: r.pick<CronSort>(["cron_id", "assistant_id", "thread_id", "next_run_date", "end_time", "created_at", "updated_at"]),
        order: r.pick(["asc", "desc"] as const),
        offset: r.pick([0, 2, 30]),
        limit: r.pick([1, 10, 100]),
      };
      const what = `#${i} ${JSON.stringify(q)}`;
      expectSamePage(what, await pg.crons.search(q), await searchCrons(lmdb, q), (c) => c.cron_id);
      expect(await pg.crons.count(f), what).toBe(await countCrons(lmdb, f));
    }
  });
});

describe("store items", () => {
  it("search as LMDB does: prefix, operators, key order", async () => {
    const r = rng(301);
    const namespaces = [["a"], ["a", "b"], ["a", "b", "c"], ["ab"], ["b"], ["a", "c"], ["a\uE000"], ["é", "x"], ["a", ""]].filter((ns) =>
      ns.every((l) => l !== ""),
    );
    const items = new Map<string, { namespace: string[]; key: string; value: JsonObject }>();
    for (let i = 0; i < 400; i++) {
      const ns = r.pick(namespaces);
      const key = r.pick([`k${r.int(60)}`, "é", "K", "k\uE000"]);
      const value: JsonObject = {};
      for (const f of ["kind", "n", "tags", "obj", "text", "0"])
        if (r.chance(0.6)) value[f] = f === "kind" ? r.pick(["note", "fact", "todo"]) : r.pick(ALL_VALUES);
      items.set(JSON.stringify([ns, key]), { namespace: ns, key, value });
    }
    const at = TIMES[0];
    await lmdb.root.transaction(() => {
      for (const it of items.values()) putStoreItem(lmdb, { ...it, created_at: at, updated_at: at }, lmdb.store.get([it.namespace.join("\u0000"), it.key]));
    });
    const pgStore = await pg.store.open({});
    await pgStore.write([...items.values()].map((it) => ({ namespace: it.namespace, key: it.key, value: it.value })));
    const store = new LmdbStore(lmdb);
    for (let i = 0; i < 300; i++) {
      const prefix = r.pick([[], ["a"], ["a", "b"], ["ab"], ["c"], ["é"], ["a\uE000"]]);
      const filter: Record<string, unknown> = {};
      for (let j = r.int(3); j > 0; j--) {
        const f = r.pick(["kind", "n", "tags", "obj", "text", "missing", "0"]);
        const v = f === "kind" ? r.pick(["note", "fact"]) : r.pick(ALL_VALUES);
        filter[f] = r.pick([
          v,
          { $eq: v },
          { $ne: v },
          { $in: [v, "note"] },
          { $nin: [v] },
          { $eq: v, $ne: "fact" },
          { $gt: r.pick([0, 1, "a", "note"]) },
          { $lte: r.pick([1.5, "fact", "é"]) },
          { $in: [] },
        ]);
      }
      const q = { prefix, filter, offset: r.pick([0, 3]), limit: r.pick([1, 5, 100]) };
      const what = `#${i} ${JSON.stringify(q)}`;
      const want = await store.findRecords({ namespacePrefix: prefix, filter, offset: q.offset, limit: q.limit });
      const got = await pgStore.searchItems({ namespacePrefix: prefix, filter, offset: q.offset, limit: q.limit });
      seen.queries++;
      if (want.length > 0) seen.matched++;
      expect(
        got.map((it) => [it.namespace, it.key]),
        what,
      ).toEqual(want.map((it) => [it.namespace, it.key]));
      expect(
        got.map((it) => JSON.stringify(it.value)),
        what,
      ).toEqual(want.map((it) => JSON.stringify(it.value)));
    }
  });
});
