// Secondary indexes and the query planner (src/storage/indexes/): property tests comparing every
// indexed search and count with a plain scan of the records on random data and random filters
// (indexes change cost, never results), plus the index build for data dirs written without them.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { open } from "lmdb";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { dataFilePath, openStorage, type Storage } from "../../src/storage/env.ts";
import type { AssistantRecord, JsonObject, StoreItemRecord, ThreadRecord } from "../../src/storage/records.ts";
import { countThreads, putThread, removeThread, searchThreads, threadEntries, type ThreadFilter, type ThreadSort } from "../../src/storage/indexes/threads.ts";
import {
  countAssistants,
  putAssistant,
  removeAssistant,
  searchAssistants,
  type AssistantFilter,
  type AssistantSort,
} from "../../src/storage/indexes/assistants.ts";
import { countCrons, putCron, removeCron, searchCrons, type CronFilter, type CronSort } from "../../src/storage/indexes/crons.ts";
import { putStoreItem, removeStoreItem } from "../../src/storage/indexes/store-items.ts";
import { ensureIndexes } from "../../src/storage/indexes/build.ts";
import { matchesFilter } from "../../src/domain/lifecycle.ts";
import { matchesAuthFilter } from "../../src/auth/filter.ts";
import { deepEqual } from "../../src/util/deep-equal.ts";
import {
  randomAuthFilter,
  randomCron,
  randomMetadata,
  randomMetadataFilter,
  referenceSort,
  rng,
  STATUSES,
  TIMES,
  uuidOf,
  VALUES,
  type Rng,
} from "../helpers/random-records.ts";

let dir: string;
let storage: Storage;

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "troupe-idx-"));
  storage = openStorage(dir);
});

afterEach(async () => {
  await storage.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Every entry of the threads' index, as sorted JSON lines (a one-part key reads back as its part). */
function indexEntries(): string[] {
  const out: string[] = [];
  for (const key of storage.threadIndex.getKeys({})) {
    for (const dup of storage.threadIndex.getValues(key)) out.push(JSON.stringify([Array.isArray(key) ? key : [key], dup]));
  }
  return out.sort();
}

describe("threads", () => {
  /** Writes random threads, then changes and deletes some (every write with its true predecessor). */
  async function seedThreads(r: Rng, n: number): Promise<Map<string, ThreadRecord>> {
    const live = new Map<string, ThreadRecord>();
    await storage.root.transaction(() => {
      for (let i = 0; i < n; i++) {
        const t: ThreadRecord = {
          thread_id: uuidOf(r.int(n * 4)),
          created_at: r.pick(TIMES),
          updated_at: r.pick(TIMES),
          metadata: randomMetadata(r),
          status: r.pick(STATUSES),
          config: {},
        };
        const prev = storage.threads.get(t.thread_id);
        putThread(storage, prev ? { ...t, created_at: prev.created_at } : t, prev);
        if (r.chance(0.3)) storage.threadValues.put(t.thread_id, JSON.stringify({ messages: r.pick([["hi"], ["hi", "there"], []]), n: r.int(3) }));
      }
    });
    await storage.root.transaction(() => {
      for (const { value: t } of storage.threads.getRange({})) {
        if (r.chance(0.15)) removeThread(storage, t);
        else if (r.chance(0.3))
          putThread(
            storage,
            {
              ...t,
              status: r.pick(STATUSES),
              updated_at: r.pick(TIMES),
              metadata: r.chance(0.5) ? randomMetadata(r) : { ...t.metadata, user: r.pick(["ann", "bob"]) },
            },
            t,
          );
      }
    });
    storage.root.resetReadTxn();
    for (const { value } of storage.threads.getRange({})) live.set(value.thread_id, value);
    return live;
  }

  function referenceThreads(all: Map<string, ThreadRecord>, f: ThreadFilter): ThreadRecord[] {
    const candidates = f.ids?.length ? [...new Set(f.ids)].map((id) => all.get(id)).filter((t): t is ThreadRecord => t !== undefined) : [...all.values()];
    return candidates.filter((t) => {
      if (f.status && t.status !== f.status) return false;
      if (f.metadata && !matchesFilter(f.metadata, t.metadata)) return false;
      if (!matchesAuthFilter(f.auth, t.metadata)) return false;
      if (f.values) {
        const text = storage.threadValues.get(t.thread_id);
        if (!matchesFilter(f.values, text === undefined ? {} : JSON.parse(text))) return false;
      }
      return true;
    });
  }

  function randomThreadFilter(r: Rng, all: Map<string, ThreadRecord>): ThreadFilter {
    const f: ThreadFilter = {};
    if (r.chance(0.4)) f.status = r.pick(STATUSES);
    if (r.chance(0.7)) f.metadata = randomMetadataFilter(r);
    if (r.chance(0.15)) f.values = r.pick<JsonObject>([{ n: 1 }, { messages: ["hi"] }, { n: 2, messages: [] }]);
    if (r.chance(0.2)) f.auth = randomAuthFilter(r);
    if (r.chance(0.1)) f.ids = [...all.keys()].filter(() => r.chance(0.2)).concat(uuidOf(999_999));
    return f;
  }

  it("searches and counts exactly as a scan would, on random data and filters", async () => {
    for (const seed of [1, 2, 3, 4]) {
      const r = rng(seed);
      const all = await seedThreads(r, 300);
      for (let i = 0; i < 150; i++) {
        const f = randomThreadFilter(r, all);
        const sortBy = r.pick<ThreadSort>(["created_at", "updated_at", "status", "thread_id"]);
        const order = r.pick(["asc", "desc"] as const);
        const offset = r.pick([0, 0, 1, 5, 20]);
        const limit = r.pick([1, 3, 10, 50]);
        const expected = referenceSort(
          referenceThreads(all, f),
          (t) => t[sortBy],
          (t) => [t.created_at, t.thread_id],
          order,
        );
        const page = await searchThreads(storage, { ...f, sortBy, order, offset, limit });
        const what = `seed ${seed} #${i}: ${JSON.stringify({ f, sortBy, order, offset, limit })}`;
        expect(
          page.items.map((t) => t.thread_id),
          what,
        ).toEqual(expected.slice(offset, offset + limit).map((t) => t.thread_id));
        expect(page.total, what).toBe(expected.length);
        expect(await countThreads(storage, f), what).toBe(expected.length);
      }
    }
  });

  it("keeps exactly the entries of the stored records through creates, changes and deletes", async () => {
    await seedThreads(rng(7), 200);
    const expected: string[] = [];
    for (const { value } of storage.threads.getRange({})) for (const e of threadEntries(value)) expected.push(JSON.stringify([e.key, e.dup]));
    expect(indexEntries()).toEqual(expected.sort());
  });

  it("pages deep offsets and a large key by walking the index", async () => {
    await storage.root.transaction(() => {
      for (let i = 0; i < 3000; i++) {
        const t: ThreadRecord = {
          thread_id: uuidOf(i),
          created_at: new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString(),
          updated_at: new Date(Date.UTC(2026, 0, 1) + (i % 100) * 1000).toISOString(),
          metadata: { user: `u${i % 3}` },
          status: i % 10 === 0 ? "error" : "idle",
          config: {},
        };
        putThread(storage, t, undefined);
      }
    });
    const page = await searchThreads(storage, { metadata: { user: "u1" }, sortBy: "created_at", order: "desc", offset: 700, limit: 5 });
    // u1 threads are i = 1, 4, 7, ... (1000 of them); newest first, the 701st is i = 2998 - 3 * 700
    expect(page.items.map((t) => t.thread_id)).toEqual([0, 1, 2, 3, 4].map((k) => uuidOf(2998 - 3 * (700 + k))));
    expect(page.total).toBe(1000);
    const newest = await searchThreads(storage, { sortBy: "updated_at", order: "desc", offset: 0, limit: 3 });
    expect(newest.items.map((t) => t.thread_id)).toEqual([2999, 2899, 2799].map(uuidOf));
    expect(await countThreads(storage, { status: "error", metadata: { user: "u0" } })).toBe(100);
  });
});

describe("long names and ids", () => {
  it("answer filters longer than an LMDB key like any other, and no short name stands for a long one", async () => {
    const long = "é".repeat(1_500); // 3,000 bytes of UTF-8: more than a key holds
    // what a long name's digest spells (index-value.ts): a short metadata key written as that text
    // must not be taken for the long key
    const { createHash } = await import("node:crypto");
    const digestOfLong =
      "#" +
      createHash("sha256")
        .update("k" + long)
        .digest("base64");
    const at = TIMES[0];
    await storage.root.transaction(() => {
      putThread(storage, { thread_id: uuidOf(1), created_at: at, updated_at: at, metadata: { [long]: long }, status: "idle", config: {} }, undefined);
      putThread(storage, { thread_id: uuidOf(2), created_at: at, updated_at: at, metadata: { [digestOfLong]: long }, status: "idle", config: {} }, undefined);
      putAssistant(
        storage,
        {
          assistant_id: uuidOf(3),
          version: 1,
          config: {},
          context: {},
          created_at: at,
          updated_at: at,
          graph_id: long,
          metadata: {},
          name: "a",
          description: null,
        },
        undefined,
      );
    });
    const found = await searchThreads(storage, { metadata: { [long]: long }, sortBy: "created_at", order: "desc", offset: 0, limit: 10 });
    expect(found.items.map((t) => t.thread_id)).toEqual([uuidOf(1)]);
    expect(await countThreads(storage, { metadata: { [digestOfLong]: long } })).toBe(1);
    expect(await countAssistants(storage, { graph_id: long })).toBe(1);
    expect(await countAssistants(storage, { graph_id: long + "x" })).toBe(0);
    expect((await searchCrons(storage, { assistant_id: long, thread_id: long, sortBy: "created_at", order: "desc", offset: 0, limit: 10 })).total).toBe(0);
  });
});

describe("assistants and crons", () => {
  it("search and count exactly as a scan would", async () => {
    const r = rng(11);
    await storage.root.transaction(() => {
      for (let i = 0; i < 200; i++) {
        const a: AssistantRecord = {
          assistant_id: uuidOf(i),
          version: 1,
          config: {},
          context: {},
          created_at: r.pick(TIMES),
          updated_at: r.pick(TIMES),
          graph_id: r.pick(["echo", "agent", "slow"]),
          metadata: randomMetadata(r),
          name: r.pick(["Echo", "echo bot", "Agent", "x"]),
          description: null,
        };
        putAssistant(storage, a, undefined);
        const c = randomCron(r, i, randomMetadata(r));
        putCron(storage, c, undefined);
      }
    });
    await storage.root.transaction(() => {
      for (const { value } of storage.assistants.getRange({}))
        if (r.chance(0.2)) removeAssistant(storage, value);
        else if (r.chance(0.3)) putAssistant(storage, { ...value, graph_id: "agent", metadata: randomMetadata(r), updated_at: r.pick(TIMES) }, value);
      for (const { value } of storage.crons.getRange({}))
        if (r.chance(0.2)) removeCron(storage, value);
        else if (r.chance(0.3)) putCron(storage, { ...value, enabled: !value.enabled, metadata: randomMetadata(r), updated_at: r.pick(TIMES) }, value);
    });
    storage.root.resetReadTxn();
    const assistants = [...storage.assistants.getRange({})].map((e) => e.value);
    const crons = [...storage.crons.getRange({})].map((e) => e.value);
    for (let i = 0; i < 200; i++) {
      const order = r.pick(["asc", "desc"] as const);
      const offset = r.pick([0, 2, 30]);
      const limit = r.pick([1, 10, 100]);
      const af: AssistantFilter = {
        ...(r.chance(0.5) ? { graph_id: r.pick(["echo", "agent", "nope"]) } : {}),
        ...(r.chance(0.6) ? { metadata: randomMetadataFilter(r) } : {}),
        ...(r.chance(0.3) ? { name: r.pick(["ECHO", "bot", "a"]) } : {}),
        ...(r.chance(0.2) ? { auth: randomAuthFilter(r) } : {}),
      };
      const aSort = r.pick<AssistantSort>(["assistant_id", "graph_id", "created_at", "updated_at", "name"]);
      const aExpected = referenceSort(
        assistants.filter(
          (a) =>
            (!af.graph_id || a.graph_id === af.graph_id) &&
            (!af.name || a.name.toLowerCase().includes(af.name.toLowerCase())) &&
            (!af.metadata || matchesFilter(af.metadata, a.metadata)) &&
            matchesAuthFilter(af.auth, a.metadata),
        ),
        (a) => a[aSort],
        (a) => [a.created_at, a.assistant_id],
        order,
      );
      const what = `#${i} ${JSON.stringify({ af, aSort, order, offset, limit })}`;
      const aPage = await searchAssistants(storage, { ...af, sortBy: aSort, order, offset, limit });
      expect(
        aPage.items.map((a) => a.assistant_id),
        what,
      ).toEqual(aExpected.slice(offset, offset + limit).map((a) => a.assistant_id));
      expect(aPage.total, what).toBe(aExpected.length);
      expect(await countAssistants(storage, af), what).toBe(aExpected.length);

      const cf: CronFilter = {
        ...(r.chance(0.4) ? { assistant_id: r.pick([uuidOf(1), uuidOf(2), uuidOf(9)]) } : {}),
        ...(r.chance(0.3) ? { thread_id: r.pick([uuidOf(50), uuidOf(52)]) } : {}),
        ...(r.chance(0.3) ? { enabled: r.chance(0.5) } : {}),
        ...(r.chance(0.5) ? { metadata: randomMetadataFilter(r) } : {}),
      };
      const cSort = r.pick<CronSort>(["cron_id", "assistant_id", "thread_id", "next_run_date", "end_time", "created_at", "updated_at"]);
      const cExpected = referenceSort(
        crons.filter(
          (c) =>
            (cf.assistant_id == null || c.assistant_id === cf.assistant_id) &&
            (cf.thread_id == null || c.thread_id === cf.thread_id) &&
            (cf.enabled == null || c.enabled === cf.enabled) &&
            (cf.metadata == null || matchesFilter(cf.metadata, c.metadata)),
        ),
        (c) => c[cSort],
        (c) => [c.created_at, c.cron_id],
        order,
      );
      const cWhat = `#${i} ${JSON.stringify({ cf, cSort, order, offset, limit })}`;
      const cPage = await searchCrons(storage, { ...cf, sortBy: cSort, order, offset, limit });
      expect(
        cPage.items.map((c) => c.cron_id),
        cWhat,
      ).toEqual(cExpected.slice(offset, offset + limit).map((c) => c.cron_id));
      expect(cPage.total, cWhat).toBe(cExpected.length);
      expect(await countCrons(storage, cf), cWhat).toBe(cExpected.length);
    }
  });
});

describe("store items", () => {
  it("search exactly as a scan of the namespace prefix would", async () => {
    const { LmdbStore, matchesFilter: storeMatches } = await import("../../src/storage/store.ts");
    const r = rng(21);
    const namespaces = [["a"], ["a", "b"], ["a", "b", "c"], ["ab"], ["b"], ["a", "c"]];
    await storage.root.transaction(() => {
      for (let i = 0; i < 400; i++) {
        const ns = r.pick(namespaces);
        const key = `k${r.int(60)}`;
        const value: JsonObject = {};
        for (const f of ["kind", "n", "tags", "obj", "text"]) if (r.chance(0.6)) value[f] = f === "kind" ? r.pick(["note", "fact", "todo"]) : r.pick(VALUES);
        const k: [string, string] = [ns.join("\u0000"), key];
        const prev = storage.store.get(k);
        if (prev && r.chance(0.2)) removeStoreItem(storage, prev);
        else putStoreItem(storage, { namespace: ns, key, value, created_at: TIMES[0], updated_at: TIMES[0] } satisfies StoreItemRecord, prev);
      }
    });
    storage.root.resetReadTxn();
    const all = [...storage.store.getRange({})].map((e) => e.value);
    const store = new LmdbStore(storage);
    for (let i = 0; i < 300; i++) {
      const prefix = r.pick([[], ["a"], ["a", "b"], ["ab"], ["c"]]);
      const filter: Record<string, unknown> = {};
      for (let j = r.int(3); j > 0; j--) {
        const f = r.pick(["kind", "n", "tags", "obj", "text", "missing"]);
        const v = f === "kind" ? r.pick(["note", "fact"]) : r.pick(VALUES);
        filter[f] = r.pick([v, { $eq: v }, { $ne: v }, { $in: [v, "note"] }, { $eq: v, $ne: "fact" }]);
      }
      const offset = r.pick([0, 3]);
      const limit = r.pick([1, 5, 100]);
      const expected = all.filter((it) => prefix.every((p, k) => it.namespace[k] === p) && storeMatches(it.value, filter));
      const got = await store.findRecords({ namespacePrefix: prefix, filter, offset, limit });
      const what = JSON.stringify({ prefix, filter, offset, limit });
      expect(
        got.map((it) => [it.namespace, it.key]),
        what,
      ).toEqual(expected.slice(offset, offset + limit).map((it) => [it.namespace, it.key]));
      expect(store.searchRecords({ namespacePrefix: prefix, filter, offset, limit }), what).toEqual(got);
    }
  });
});

describe("index build", () => {
  const thread = (i: number): ThreadRecord => ({
    thread_id: uuidOf(i),
    created_at: TIMES[i % TIMES.length],
    updated_at: TIMES[(i * 5) % TIMES.length],
    metadata: { user: `u${i % 4}`, tags: ["x"] },
    status: STATUSES[i % 4],
    config: {},
  });

  /** Records written as an older Troupe did: the records only, no index entries. */
  async function writeLegacy(n: number): Promise<void> {
    await storage.close();
    const raw = open({ path: dataFilePath(dir), maxDbs: 32, compression: false });
    const threads = raw.openDB<ThreadRecord, string>({ name: "threads", encoding: "msgpack", sharedStructuresKey: Symbol.for("structures") });
    await raw.transaction(() => {
      for (let i = 0; i < n; i++) threads.put(uuidOf(i), thread(i));
    });
    await raw.close();
    storage = openStorage(dir);
  }

  const indexed = indexEntries;
  const expectedEntries = (n: number) =>
    Array.from({ length: n }, (_, i) => threadEntries(thread(i)))
      .flat()
      .map((e) => JSON.stringify([e.key, e.dup]))
      .sort();

  it("indexes an old data dir on start with progress lines, once", async () => {
    await writeLegacy(6_000);
    const lines: string[] = [];
    ensureIndexes(storage, (l) => lines.push(l));
    expect(indexed()).toEqual(expectedEntries(6_000));
    expect(lines[0]).toBe("indexing threads: 6000 records");
    expect(lines.at(-1)).toMatch(/^indexed 6000 threads in [\d.]+ s$/);
    expect(await countThreads(storage, { metadata: { user: "u1" }, status: "busy" })).toBe(1500);
    const again: string[] = [];
    ensureIndexes(storage, (l) => again.push(l));
    expect(again).toEqual([]);
  });

  it("resumes a build cut short (kill -9 between chunks) and ends with the same index", async () => {
    await writeLegacy(6_000);
    // a build that committed its first chunk, then died: its state says how far it got
    const firstChunk = [...storage.threads.getRange({ limit: 5_000 })];
    await storage.root.transaction(() => {
      for (const { value } of firstChunk) for (const e of threadEntries(value)) storage.threadIndex.put(e.key, e.dup);
      storage.indexMeta.put("threads", { version: 1, built: false, after: firstChunk.at(-1)!.key });
    });
    const lines: string[] = [];
    ensureIndexes(storage, (l) => lines.push(l));
    expect(lines[0]).toBe("indexing threads: 6000 records (resuming after 5000)");
    expect(indexed()).toEqual(expectedEntries(6_000));
    expect(storage.indexMeta.get("threads")).toEqual({ version: 1, built: true });
  });

  it("rebuilds an index that lost track of its records (written by a program that does not keep it)", async () => {
    ensureIndexes(storage, () => undefined);
    await writeLegacy(50); // the index says built, but holds none of these
    const lines: string[] = [];
    ensureIndexes(storage, (l) => lines.push(l));
    expect(lines[0]).toBe("threads index lists 0 of 50 records: rebuilding it");
    expect(indexed()).toEqual(expectedEntries(50));
    expect(deepEqual((await searchThreads(storage, { sortBy: "created_at", order: "asc", offset: 0, limit: 100 })).total, 50)).toBe(true);
  });
});
