// TTLs end to end: threads (`ttl` on create/update, the config's `checkpointer.ttl` with strategy
// delete / keep_latest) and store items (`ttl` on put, `refresh_ttl` on reads, `store.ttl`), swept
// by servers whose sweep interval is shortened to 0.3 s. TTLs are fractional minutes here
// (0.005 min = 0.3 s).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { Client } from "@langchain/langgraph-sdk";
import { REPO, startTestServer, type TestServer } from "./helpers/server.ts";
import { rawRequest } from "./helpers/suite.ts";
import { waitUntil } from "./helpers/wait.ts";

const dir = mkdtempSync(join(tmpdir(), "troupe-ttl-"));
const servers: TestServer[] = [];
afterAll(async () => {
  for (const s of servers) {
    await s.stop();
    s.cleanup();
  }
  rmSync(dir, { recursive: true, force: true });
});

async function serverWith(ttl: Record<string, unknown>, storeTtl?: Record<string, unknown>): Promise<{ server: TestServer; client: Client }> {
  const config = join(dir, `service-${servers.length}.json`);
  writeFileSync(
    config,
    JSON.stringify({
      graphs: {
        echo: join(REPO, "examples/echo.ts:graph"),
        slow: join(REPO, "examples/slow.ts:graph"),
        store_graph: join(REPO, "test/fixtures/graphs/store_graph.ts:graph"),
      },
      checkpointer: { ttl: { sweep_interval_minutes: 0.005, ...ttl } },
      ...(storeTtl ? { store: { ttl: storeTtl } } : {}),
    }),
  );
  const server = await startTestServer({ config });
  servers.push(server);
  return { server, client: new Client({ apiUrl: server.url, apiKey: null }) };
}

const human = (content: string) => ({ messages: [{ role: "human", content }] });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const gone = async (client: Client, threadId: string, withinMs: number): Promise<boolean> => {
  for (const deadline = Date.now() + withinMs; Date.now() < deadline; await sleep(100)) {
    if (
      await client.threads.get(threadId).then(
        () => false,
        () => true,
      )
    )
      return true;
  }
  return false;
};

describe("thread TTL", () => {
  it("deletes a thread its ttl after its last update, not while a run keeps it busy; ttl null removes it", async () => {
    const { server, client } = await serverWith({});
    const short = await client.threads.create({ ttl: 0.005 });
    const object = await client.threads.create({ ttl: { ttl: 0.005, strategy: "delete" } });
    const none = await client.threads.create();
    const removed = await client.threads.create({ ttl: 0.005 });
    await client.threads.update(removed.thread_id, { ttl: null as unknown as number });
    const busy = await client.threads.create({ ttl: 0.005 });
    const run = await client.runs.create(busy.thread_id, "slow", { input: human("hold"), config: { configurable: { sleep_ms: 1_500 } } });

    expect(await gone(client, short.thread_id, 5_000)).toBe(true);
    expect(await gone(client, object.thread_id, 2_000)).toBe(true);
    // busy while its run sleeps: kept until the run ends, then deleted
    expect((await client.threads.get(busy.thread_id)).status).toBe("busy");
    await client.runs.join(busy.thread_id, run.run_id);
    expect(await gone(client, busy.thread_id, 5_000)).toBe(true);
    await sleep(500);
    expect((await client.threads.get(none.thread_id)).thread_id).toBe(none.thread_id);
    expect((await client.threads.get(removed.thread_id)).thread_id).toBe(removed.thread_id);

    const bad = await rawRequest(server.url, "/threads", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ ttl: { ttl: -1 } }),
    });
    expect(bad.status).toBe(422);
  });

  it("applies the config's default_ttl: strategy keep_latest prunes expired threads to their latest checkpoint", async () => {
    const { client } = await serverWith({ default_ttl: 0.005, strategy: "keep_latest" });
    const t = await client.threads.create();
    await client.runs.wait(t.thread_id, "echo", { input: human("one") });
    await client.runs.wait(t.thread_id, "echo", { input: human("two") });
    const latest = await client.threads.getState(t.thread_id);
    const history = await waitUntil(
      async () => {
        const h = await client.threads.getHistory(t.thread_id, { limit: 100 });
        return h.length <= 1 ? h : undefined;
      },
      { what: "the older checkpoints to be pruned" },
    );
    expect(history).toHaveLength(1);
    expect(history[0].checkpoint.checkpoint_id).toBe(latest.checkpoint.checkpoint_id);
    expect((await client.threads.get(t.thread_id)).values).toEqual(latest.values);
  });

  it("applies the config's default_ttl with strategy delete to threads without their own ttl", async () => {
    const { client } = await serverWith({ default_ttl: 0.005 });
    const t = await client.threads.create();
    await client.runs.wait(t.thread_id, "echo", { input: human("bye") });
    expect(await gone(client, t.thread_id, 5_000)).toBe(true);
  });
});

describe("store item TTL", () => {
  it("hides and then removes items past their ttl, keeps items read with refresh_ttl alive, ttl null never expires", async () => {
    const { server, client } = await serverWith({}, { default_ttl: 0.005, refresh_on_read: false, sweep_interval_minutes: 0.005 });
    const ns = ["ttl", "items"];
    await client.store.putItem(ns, "short", { v: 1 }, { ttl: 0.005 });
    await client.store.putItem(ns, "default", { v: 2 }); // the config's default_ttl
    await client.store.putItem(ns, "forever", { v: 3 }, { ttl: null });
    // 3 s, refreshed by reads (ten times its 0.3 s siblings': a loaded machine's slow reads must not expire it)
    await client.store.putItem(ns, "kept", { v: 4 }, { ttl: 0.05 });
    expect((await client.store.getItem(ns, "short"))?.value).toEqual({ v: 1 });
    // refreshed for longer than its own ttl: alive only because the reads refresh it
    const until = Date.now() + 3_600;
    while (Date.now() < until) {
      await sleep(300);
      expect((await client.store.getItem(ns, "kept", { refreshTtl: true }))?.value).toEqual({ v: 4 });
    }
    expect(await client.store.getItem(ns, "short")).toBeNull();
    expect(await client.store.getItem(ns, "default")).toBeNull();
    const { items } = await client.store.searchItems(ns, { limit: 10 });
    expect(items.map((i) => i.key).sort()).toEqual(["forever", "kept"]);
    // no more refreshes: "kept" expires too, and the sweep removes what expired
    await waitUntil(async () => (await client.store.getItem(ns, "kept")) === null, { what: "the unrefreshed item to expire" });
    expect((await client.store.getItem(ns, "forever"))?.value).toEqual({ v: 3 });
    expect((await client.store.listNamespaces({ prefix: ["ttl"] })).namespaces).toEqual([ns]); // only "forever" is left under it
    await client.store.deleteItem(ns, "forever");
    // the namespace listing forgets "ttl.items" once the sweep has removed the expired items too
    await waitUntil(async () => (await client.store.listNamespaces({ prefix: ["ttl"] })).namespaces.length === 0, {
      what: "the sweep to remove the expired items",
    });

    // a graph's writes (in an actor worker) get the default TTL too
    const t = await client.threads.create();
    expect(await client.runs.wait(t.thread_id, "store_graph", { input: {} })).toEqual({ count: 1 }); // it wrote the item
    // and the item expires (read back at once, it may already be gone on a loaded machine: 0.6 s)
    await waitUntil(async () => (await client.store.getItem(["counters"], t.thread_id)) === null, { what: "the graph's item to expire" });
    expect(await client.runs.wait(t.thread_id, "store_graph", { input: {} })).toEqual({ count: 1 }); // the graph no longer sees it either

    const bad = await rawRequest(server.url, "/store/items", {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ namespace: ns, key: "x", value: {}, ttl: -1 }),
    });
    expect(bad.status).toBe(422);
  });
});
