// LmdbStore: LangGraph store semantics on real LMDB files — upserts, deletes, prefix search with
// filters, namespace listing — visibility across handles and threads, durability, a graph using it,
// and the /store routes of a spawned server driven by the real SDK client.
import { MemorySaver } from "@langchain/langgraph";
import { Client } from "@langchain/langgraph-sdk";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { Worker } from "node:worker_threads";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { openStorage, type Storage } from "../src/storage/env.ts";
import { LmdbStore } from "../src/storage/store.ts";
import { COUNTER_NAMESPACE, graph as storeGraph } from "./fixtures/graphs/store_graph.ts";
import { startTestServer, type TestServer } from "./helpers/server.ts";

let dir: string;
let storage: Storage;
let store: LmdbStore;
const extra: Storage[] = [];

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "troupe-store-"));
  storage = openStorage(dir);
  store = new LmdbStore(storage);
});

afterEach(async () => {
  for (const s of extra.splice(0)) await s.close();
  await storage.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const tick = (ms = 5) => new Promise((r) => setTimeout(r, ms));

describe("get / put / delete", () => {
  it("round-trips an item as a LangGraph Item with Date timestamps", async () => {
    await store.put(["users", "u1"], "prefs", { theme: "dark", n: 1 });
    const item = await store.get(["users", "u1"], "prefs");
    expect(item).not.toBeNull();
    expect(item!.value).toEqual({ theme: "dark", n: 1 });
    expect(item!.key).toBe("prefs");
    expect(item!.namespace).toEqual(["users", "u1"]);
    expect(item!.createdAt).toBeInstanceOf(Date);
    expect(item!.updatedAt.getTime()).toBe(item!.createdAt.getTime());
    expect(await store.get(["users", "u1"], "other")).toBeNull();
    expect(await store.get(["users"], "prefs")).toBeNull();
  });

  it("wire shape has snake_case ISO timestamps", async () => {
    await store.put(["a"], "k", { x: 1 });
    const r = store.getRecord(["a"], "k")!;
    expect(Object.keys(r).sort()).toEqual(["created_at", "key", "namespace", "updated_at", "value"]);
    expect(r.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(store.getRecord(["a"], "missing")).toBeNull();
  });

  it("upsert keeps created_at and refreshes updated_at", async () => {
    await store.put(["a"], "k", { v: 1 });
    const first = store.getRecord(["a"], "k")!;
    await tick();
    await store.put(["a"], "k", { v: 2 });
    const second = store.getRecord(["a"], "k")!;
    expect(second.value).toEqual({ v: 2 });
    expect(second.created_at).toBe(first.created_at);
    expect(second.updated_at > first.updated_at).toBe(true);
  });

  it("delete removes the item; deleting an absent item is a no-op", async () => {
    await store.put(["a"], "k", { v: 1 });
    await store.delete(["a"], "k");
    expect(await store.get(["a"], "k")).toBeNull();
    await store.delete(["a"], "k");
    await store.delete(["nope"], "k");
  });

  it("a batch reads the state before its writes and keeps the last put of an item", async () => {
    await store.put(["a"], "k", { v: 1 });
    const [got, , , again] = await store.batch([
      { namespace: ["a"], key: "k" },
      { namespace: ["a"], key: "k", value: { v: 2 } },
      { namespace: ["a"], key: "k", value: { v: 3 } },
      { namespace: ["a"], key: "k" },
    ]);
    expect(got?.value).toEqual({ v: 1 });
    expect(again?.value).toEqual({ v: 1 });
    expect((await store.get(["a"], "k"))?.value).toEqual({ v: 3 });
  });

  it("refuses writes to an empty namespace or labels with NUL", async () => {
    await expect(store.batch([{ namespace: [], key: "k", value: { v: 1 } }])).rejects.toThrow(/Namespace is required/);
    await expect(store.batch([{ namespace: ["a\u0000b"], key: "k", value: { v: 1 } }])).rejects.toThrow(/NUL/);
    await expect(store.batch([{ namespace: ["a", ""], key: "k", value: { v: 1 } }])).rejects.toThrow(/non-empty/);
  });
});

describe("search", () => {
  beforeEach(async () => {
    await store.batch([
      { namespace: ["docs"], key: "d0", value: { n: 0, tag: "x" } },
      { namespace: ["docs", "a"], key: "d1", value: { n: 1, tag: "x", when: "2024-01-01" } },
      { namespace: ["docs", "a"], key: "d2", value: { n: 2, tag: "y", when: "2025-06-01" } },
      { namespace: ["docs", "a", "deep"], key: "d3", value: { n: 3, tag: "y", nested: { z: [1, 2] } } },
      { namespace: ["docs", "b"], key: "d4", value: { n: 4, tag: "z" } },
      // siblings that share a string prefix with "docs"/"a" but are not under them
      { namespace: ["docsx"], key: "e1", value: { n: 10 } },
      { namespace: ["docs", "ab"], key: "e2", value: { n: 11 } },
      { namespace: ["other"], key: "o1", value: { n: 20 } },
    ]);
  });

  const keys = (items: { key: string }[]) => items.map((i) => i.key);

  it("matches namespace prefixes label by label", async () => {
    expect(keys(await store.search(["docs"], { limit: 100 }))).toEqual(["d0", "d1", "d2", "d3", "e2", "d4"]);
    expect(keys(await store.search(["docs", "a"]))).toEqual(["d1", "d2", "d3"]);
    expect(keys(await store.search(["docs", "a", "deep"]))).toEqual(["d3"]);
    expect(keys(await store.search(["doc"]))).toEqual([]);
    expect(keys(await store.search([], { limit: 100 }))).toHaveLength(8);
  });

  it("returns items with namespaces and no score; query without an index is ignored", async () => {
    const [item] = await store.search(["docs", "a", "deep"], { query: "anything" });
    expect(item.namespace).toEqual(["docs", "a", "deep"]);
    expect(item.createdAt).toBeInstanceOf(Date);
    expect("score" in item).toBe(false);
  });

  it("applies equality and operator filters to value fields", async () => {
    expect(keys(await store.search(["docs"], { filter: { tag: "y" } }))).toEqual(["d2", "d3"]);
    expect(keys(await store.search(["docs"], { filter: { tag: { $eq: "x" } } }))).toEqual(["d0", "d1"]);
    expect(keys(await store.search(["docs"], { filter: { tag: { $ne: "x" }, n: { $lt: 5 } } }))).toEqual(["d2", "d3", "d4"]);
    expect(keys(await store.search(["docs"], { filter: { n: { $gt: 1, $lte: 3 } } }))).toEqual(["d2", "d3"]);
    expect(keys(await store.search(["docs"], { filter: { n: { $gte: 4 } } }))).toEqual(["e2", "d4"]);
    expect(keys(await store.search(["docs"], { filter: { tag: { $in: ["x", "z"] } } }))).toEqual(["d0", "d1", "d4"]);
    expect(keys(await store.search(["docs"], { filter: { when: { $gt: "2025-01-01" } } }))).toEqual(["d2"]);
    expect(keys(await store.search(["docs"], { filter: { nested: { z: [1, 2] } } }))).toEqual(["d3"]);
    expect(keys(await store.search(["docs"], { filter: { missing: "x" } }))).toEqual([]);
    // ordering operators do not compare across types
    expect(keys(await store.search(["docs"], { filter: { tag: { $gt: 0 } } }))).toEqual([]);
  });

  it("pages with limit and offset after filtering", async () => {
    expect(keys(await store.search(["docs"], { limit: 2 }))).toEqual(["d0", "d1"]);
    expect(keys(await store.search(["docs"], { limit: 2, offset: 2 }))).toEqual(["d2", "d3"]);
    expect(keys(await store.search(["docs"], { filter: { tag: "y" }, limit: 1, offset: 1 }))).toEqual(["d3"]);
    expect(keys(await store.search(["docs"], { offset: 50 }))).toEqual([]);
    // default limit is 10
    for (let i = 0; i < 12; i++) await store.put(["many"], `k${String(i).padStart(2, "0")}`, { i });
    expect(await store.search(["many"])).toHaveLength(10);
  });

  it("wire-shaped search returns records", () => {
    const recs = store.searchRecords({ namespacePrefix: ["docs", "b"] });
    expect(recs).toEqual([expect.objectContaining({ namespace: ["docs", "b"], key: "d4", value: { n: 4, tag: "z" }, created_at: expect.any(String) })]);
  });
});

describe("listNamespaces", () => {
  beforeEach(async () => {
    const ns = [["a"], ["a", "b"], ["a", "b", "c"], ["a", "b", "v1"], ["a", "x", "v1"], ["ab", "v1"], ["b"], ["c", "d", "e", "f"]];
    // several items per namespace: listing must still return each namespace once
    await store.batch(ns.flatMap((n) => [1, 2, 3].map((i) => ({ namespace: n, key: `k${i}`, value: { i } }))));
  });

  it("lists each namespace once, in label order", async () => {
    expect(await store.listNamespaces()).toEqual([
      ["a"],
      ["a", "b"],
      ["a", "b", "c"],
      ["a", "b", "v1"],
      ["a", "x", "v1"],
      ["ab", "v1"],
      ["b"],
      ["c", "d", "e", "f"],
    ]);
  });

  it("filters by prefix and suffix, with * wildcards", async () => {
    expect(await store.listNamespaces({ prefix: ["a"] })).toEqual([["a"], ["a", "b"], ["a", "b", "c"], ["a", "b", "v1"], ["a", "x", "v1"]]);
    expect(await store.listNamespaces({ prefix: ["a", "b"] })).toEqual([
      ["a", "b"],
      ["a", "b", "c"],
      ["a", "b", "v1"],
    ]);
    expect(await store.listNamespaces({ suffix: ["v1"] })).toEqual([
      ["a", "b", "v1"],
      ["a", "x", "v1"],
      ["ab", "v1"],
    ]);
    expect(await store.listNamespaces({ prefix: ["a"], suffix: ["v1"] })).toEqual([
      ["a", "b", "v1"],
      ["a", "x", "v1"],
    ]);
    expect(await store.listNamespaces({ prefix: ["a", "*", "v1"] })).toEqual([
      ["a", "b", "v1"],
      ["a", "x", "v1"],
    ]);
    expect(await store.listNamespaces({ prefix: ["zzz"] })).toEqual([]);
  });

  it("truncates to max_depth and de-duplicates", async () => {
    expect(await store.listNamespaces({ maxDepth: 1 })).toEqual([["a"], ["ab"], ["b"], ["c"]]);
    expect(await store.listNamespaces({ maxDepth: 2 })).toEqual([["a"], ["a", "b"], ["a", "x"], ["ab", "v1"], ["b"], ["c", "d"]]);
    expect(await store.listNamespaces({ prefix: ["a"], maxDepth: 2 })).toEqual([["a"], ["a", "b"], ["a", "x"]]);
    // a namespace that fails the condition must not hide matching descendants
    expect(await store.listNamespaces({ suffix: ["v1"], maxDepth: 2 })).toEqual([
      ["a", "b"],
      ["a", "x"],
      ["ab", "v1"],
    ]);
  });

  it("pages with limit and offset over distinct namespaces", async () => {
    expect(await store.listNamespaces({ limit: 2 })).toEqual([["a"], ["a", "b"]]);
    expect(await store.listNamespaces({ limit: 2, offset: 2 })).toEqual([
      ["a", "b", "c"],
      ["a", "b", "v1"],
    ]);
    expect(await store.listNamespaces({ maxDepth: 1, limit: 2, offset: 1 })).toEqual([["ab"], ["b"]]);
  });
});

describe("sharing and durability", () => {
  it("two Storage handles on one directory see each other's writes", async () => {
    const other = openStorage(dir);
    extra.push(other);
    const store2 = new LmdbStore(other);
    await store.put(["shared"], "k", { from: 1 });
    expect((await store2.get(["shared"], "k"))?.value).toEqual({ from: 1 });
    await store2.put(["shared"], "k", { from: 2 });
    expect((await store.get(["shared"], "k"))?.value).toEqual({ from: 2 });
    await store2.delete(["shared"], "k");
    expect(await store.get(["shared"], "k")).toBeNull();
    // read, then the other handle commits, then read again at once: never a stale snapshot
    for (let i = 0; i < 20; i++) {
      const [writer, reader] = i % 2 ? [store, store2] : [store2, store];
      expect(reader.getRecord(["shared"], "n")?.value ?? null).toEqual(i === 0 ? null : { i: i - 1 });
      await writer.put(["shared"], "n", { i });
      expect((await reader.get(["shared"], "n"))?.value).toEqual({ i });
      expect(reader.searchRecords({ namespacePrefix: ["shared"] }).map((r) => r.value)).toEqual([{ i }]);
    }
  });

  it("a write from another thread is visible once it resolves", async () => {
    await store.put(["t"], "before", { v: 0 });
    const storeUrl = new URL("../src/storage/store.ts", import.meta.url).href;
    const envUrl = new URL("../src/storage/env.ts", import.meta.url).href;
    const tsxApi = import.meta.resolve("tsx/esm/api");
    const code = `
      const { workerData, parentPort } = require("node:worker_threads");
      (async () => {
        (await import(${JSON.stringify(tsxApi)})).register();
        const { openStorage } = await import(${JSON.stringify(envUrl)});
        const { LmdbStore } = await import(${JSON.stringify(storeUrl)});
        const storage = openStorage(workerData.dir);
        const store = new LmdbStore(storage);
        const seen = (await store.get(["t"], "before"))?.value ?? null;
        await store.put(["t"], "from-worker", { n: 42 });
        await storage.close();
        parentPort.postMessage({ seen });
      })().catch((e) => parentPort.postMessage({ error: String(e && e.stack || e) }));
    `;
    const worker = new Worker(code, { eval: true, workerData: { dir } });
    const msg = await new Promise<{ seen?: unknown; error?: string }>((resolve, reject) => {
      worker.once("message", resolve);
      worker.once("error", reject);
    });
    await worker.terminate();
    expect(msg.error).toBeUndefined();
    expect(msg.seen).toEqual({ v: 0 });
    expect((await store.get(["t"], "from-worker"))?.value).toEqual({ n: 42 });
  });

  it("items survive closing and reopening the environment", async () => {
    await store.put(["persist", "me"], "k", { kept: true });
    const before = store.getRecord(["persist", "me"], "k");
    await storage.close();
    storage = openStorage(dir);
    store = new LmdbStore(storage);
    expect(store.getRecord(["persist", "me"], "k")).toEqual(before);
    expect(await store.listNamespaces()).toEqual([["persist", "me"]]);
  });
});

describe("a LangGraph graph using the store", () => {
  it("increments a counter kept in the store across invocations", async () => {
    // attached the way the actor workers' graph registry does it
    const g = storeGraph;
    g.store = store;
    g.checkpointer = new MemorySaver();
    const config = { configurable: { thread_id: "thread-1" } };
    expect((await g.invoke({ count: 0 }, config)).count).toBe(1);
    expect((await g.invoke({ count: 0 }, config)).count).toBe(2);
    expect((await g.invoke({ count: 0 }, { configurable: { thread_id: "thread-2" } })).count).toBe(1);
    const item = await store.get(COUNTER_NAMESPACE, "thread-1");
    expect(item?.value).toEqual({ count: 2 });
    expect(store.getRecord(COUNTER_NAMESPACE, "thread-2")?.value).toEqual({ count: 1 });
  });
});

describe("HTTP /store routes (spawned server, real SDK client)", () => {
  let server: TestServer;
  let client: Client;

  beforeAll(async () => {
    server = await startTestServer({ workers: 1 });
    client = new Client({ apiUrl: server.url, apiKey: null });
  });
  afterAll(async () => {
    await server?.stop();
    server?.cleanup();
  });

  async function call(method: string, path: string, body?: unknown): Promise<{ status: number; body: unknown }> {
    const res = await fetch(server.url + path, {
      method,
      headers: body === undefined ? {} : { "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  }

  it("puts, gets, searches, lists and deletes through the SDK", async () => {
    await client.store.putItem(["http", "u1"], "a", { n: 1, tag: "x" });
    await client.store.putItem(["http", "u1"], "b", { n: 2, tag: "y" });
    await client.store.putItem(["http", "u2"], "c", { n: 3, tag: "y" });
    const a = await client.store.getItem(["http", "u1"], "a");
    expect(a).toMatchObject({ namespace: ["http", "u1"], key: "a", value: { n: 1, tag: "x" } });
    expect(a!.createdAt).toMatch(/Z$/);
    expect(await client.store.getItem(["http", "u1"], "missing")).toBeNull();

    const found = await client.store.searchItems(["http"], { filter: { tag: "y" } });
    expect(found.items.map((i) => i.key)).toEqual(["b", "c"]);
    const paged = await client.store.searchItems(["http"], { filter: { n: { $gte: 2 } }, limit: 1, offset: 1, query: "ignored" });
    expect(paged.items.map((i) => i.key)).toEqual(["c"]);
    expect("score" in paged.items[0]).toBe(false);

    expect(await client.store.listNamespaces({ prefix: ["http"] })).toEqual({
      namespaces: [
        ["http", "u1"],
        ["http", "u2"],
      ],
    });
    expect(await client.store.listNamespaces({ prefix: ["http"], maxDepth: 1 })).toEqual({ namespaces: [["http"]] });
    expect(await client.store.listNamespaces({ suffix: ["u2"] })).toEqual({ namespaces: [["http", "u2"]] });

    await client.store.deleteItem(["http", "u1"], "a");
    expect(await client.store.getItem(["http", "u1"], "a")).toBeNull();
  });

  it("upserts keep created_at; index and ttl are accepted", async () => {
    expect((await call("PUT", "/store/items", { namespace: ["up"], key: "k", value: { v: 1 }, index: false, ttl: 5 })).status).toBe(204);
    const first = (await call("GET", "/store/items?namespace=up&key=k")).body as { created_at: string; updated_at: string };
    await tick(10);
    expect((await call("PUT", "/store/items", { namespace: ["up"], key: "k", value: { v: 2 }, index: ["v"] })).status).toBe(204);
    const second = (await call("GET", "/store/items?namespace=up&key=k&refresh_ttl=true")).body as { value: unknown; created_at: string; updated_at: string };
    expect(second.value).toEqual({ v: 2 });
    expect(second.created_at).toBe(first.created_at);
    expect(second.updated_at > first.updated_at).toBe(true);
  });

  it("answers 200 null for an absent item and 204 for deleting one", async () => {
    expect(await call("GET", "/store/items?namespace=no.such&key=k")).toEqual({ status: 200, body: null });
    expect((await call("DELETE", "/store/items", { namespace: ["no", "such"], key: "k" })).status).toBe(204);
    expect((await call("DELETE", "/store/items", { key: "k" })).status).toBe(204);
  });

  it("validates namespaces, values and required fields with 422", async () => {
    const empty = await call("PUT", "/store/items", { namespace: [], key: "k", value: {} });
    expect(empty).toEqual({ status: 422, body: { detail: [{ loc: ["body", "namespace"], msg: "Namespace is required", type: "value_error" }] } });
    const dotted = await call("PUT", "/store/items", { namespace: ["a.b"], key: "k", value: {} });
    expect(dotted.status).toBe(422);
    expect(JSON.stringify(dotted.body)).toContain("Namespace labels cannot be empty or contain periods. Received: a.b");
    expect((await call("PUT", "/store/items", { namespace: ["a", ""], key: "k", value: {} })).status).toBe(422);
    expect((await call("PUT", "/store/items", { namespace: ["a\u0000b"], key: "k", value: {} })).status).toBe(422);
    const notObject = await call("PUT", "/store/items", { namespace: ["a"], key: "k", value: [1] });
    expect(notObject.status).toBe(422);
    expect(JSON.stringify(notObject.body)).toContain('"loc":["body","value"]');
    expect((await call("GET", "/store/items?namespace=a")).status).toBe(422);
    expect((await call("GET", "/store/items?namespace=a..b&key=k")).status).toBe(422);
    expect((await call("POST", "/store/items/search", {})).status).toBe(422);
    expect((await call("POST", "/store/items/search", { namespace_prefix: ["x.y"] })).status).toBe(422);
    expect((await call("POST", "/store/namespaces", { suffix: [""] })).status).toBe(422);
    expect((await call("POST", "/store/namespaces", { max_depth: 0 })).status).toBe(422);
    expect((await call("POST", "/store/namespaces")).status).toBe(200);
  });

  it("shares the store with graphs running on the server", async () => {
    const thread = await client.threads.create();
    // seeded over HTTP, incremented by the graph in an actor worker, read back over HTTP
    await client.store.putItem(COUNTER_NAMESPACE, thread.thread_id, { count: 41 });
    const out = (await client.runs.wait(thread.thread_id, "store_graph", { input: { count: 0 } })) as { count: number };
    expect(out.count).toBe(42);
    expect((await client.store.getItem(COUNTER_NAMESPACE, thread.thread_id))?.value).toEqual({ count: 42 });
  });
});
