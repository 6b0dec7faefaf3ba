// A real server process on PostgreSQL (`--database-uri`, a fresh database of this file) driven by
// the real SDK client: assistants, threads, runs (wait, stream, background + join, enqueue order),
// state and history, the store, crons, a webhook delivered by the webhook worker; then kill -9
// during a slow run and a restart on the same database: the run ends in a final status and the
// thread is not left busy. `troupe dev` first, `troupe serve` after the restart. The data dir holds
// no LMDB file: every thread (HTTP, shards, webhook worker) stored into the database.
import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { Client } from "@langchain/langgraph-sdk";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { usePostgresDatabase } from "./helpers/postgres.ts";
import { startTestServer, type TestServer } from "./helpers/server.ts";
import { waitUntil } from "./helpers/wait.ts";

const db = usePostgresDatabase();
let server: TestServer;
let client: Client;
const servers: TestServer[] = [];

const human = (content: string) => ({ messages: [{ role: "human", content }] });
type Messages = { messages: { content: string; type: string }[] };

beforeAll(async () => {
  // dev: webhooks may reach loopback; an idle lease lingers 5 s (not 2): the lease test's runs within it on a busy machine
  server = await startTestServer({ command: "dev", databaseUri: db.uri, env: { TROUPE_CLUSTER_LEASE_LINGER_MS: "5000" } });
  servers.push(server);
  client = new Client({ apiUrl: server.url, apiKey: null });
}, 60_000);

afterAll(async () => {
  for (const s of servers) await s.stop();
  server?.cleanup();
});

async function rowCount(table: string, where = "TRUE"): Promise<number> {
  const c = new pg.Client({ connectionString: db.uri });
  await c.connect();
  try {
    const r = await c.query<{ n: string }>(`SELECT count(*) AS n FROM ${table} WHERE ${where}`);
    return Number(r.rows[0].n);
  } finally {
    await c.end();
  }
}

describe("troupe dev/serve --database-uri (PostgreSQL)", () => {
  it("keeps its data in the database, not in the data dir", async () => {
    const assistants = await client.assistants.search({ graphId: "echo" });
    expect(assistants.length).toBe(1);
    expect(await rowCount("assistants")).toBeGreaterThanOrEqual(1);
    expect(existsSync(join(server.dataDir, "troupe.mdb"))).toBe(false);
  });

  it("threads: create, search, count", async () => {
    const t = await client.threads.create({ metadata: { suite: "pg" } });
    await client.threads.create({ metadata: { suite: "pg" } });
    const found = await client.threads.search({ metadata: { suite: "pg" } });
    expect(found.map((x) => x.thread_id)).toContain(t.thread_id);
    expect(await client.threads.count({ metadata: { suite: "pg" } })).toBe(2);
    expect((await client.threads.get(t.thread_id)).status).toBe("idle");
  });

  it("runs.wait, runs.stream, a background run joined; state and history", async () => {
    const t = await client.threads.create();
    const waited = (await client.runs.wait(t.thread_id, "echo", { input: human("hello") })) as Messages;
    expect(waited.messages.map((m) => m.content)).toEqual(["hello", "hello"]);

    const events: string[] = [];
    let last: Messages | undefined;
    for await (const chunk of client.runs.stream(t.thread_id, "echo", { input: human("streamed"), streamMode: "values" })) {
      events.push(chunk.event);
      if (chunk.event === "values") last = chunk.data as Messages;
    }
    expect(events[0]).toBe("metadata");
    expect(last?.messages.map((m) => m.content)).toEqual(["hello", "hello", "streamed", "streamed"]);

    const bg = await client.runs.create(t.thread_id, "echo", { input: human("background") });
    const joined = (await client.runs.join(t.thread_id, bg.run_id)) as Messages;
    expect(joined.messages.at(-1)?.content).toBe("background");
    expect((await client.runs.get(t.thread_id, bg.run_id)).status).toBe("success");

    const state = await client.threads.getState<Messages>(t.thread_id);
    expect(state.values.messages).toHaveLength(6);
    const history = await client.threads.getHistory(t.thread_id, { limit: 100 });
    expect(history.length).toBeGreaterThanOrEqual(6); // input + node checkpoints of 3 runs
    expect(history[0].checkpoint.checkpoint_id).toBe(state.checkpoint.checkpoint_id);
    expect((await client.threads.get(t.thread_id)).status).toBe("idle");
    expect(await rowCount("runs", `thread_id = '${t.thread_id}'`)).toBe(3);
  });

  it("enqueued runs on one thread run in the order they were created", async () => {
    const t = await client.threads.create();
    const runs = [];
    for (let i = 0; i < 4; i++) {
      runs.push(
        await client.runs.create(t.thread_id, "slow", { input: human(`r${i}`), multitaskStrategy: "enqueue", config: { configurable: { sleep_ms: 50 } } }),
      );
    }
    for (const r of runs) await client.runs.join(t.thread_id, r.run_id);
    for (const r of runs) expect((await client.runs.get(t.thread_id, r.run_id)).status).toBe("success");
    const state = await client.threads.getState<Messages>(t.thread_id);
    expect(state.values.messages.map((m) => m.content)).toEqual(["r0", "r0", "r1", "r1", "r2", "r2", "r3", "r3"]);
    expect((await client.threads.get(t.thread_id)).status).toBe("idle");
  });

  it("a burst of concurrent creates on one thread runs in run id order (assistant reads finish out of order on the pool)", async () => {
    const t = await client.threads.create();
    for (let round = 0; round < 3; round++) {
      const created = await Promise.all(Array.from({ length: 40 }, (_, i) => client.runs.create(t.thread_id, "echo", { input: human(`${round}-${i}`) })));
      await Promise.all(created.map((r) => client.runs.join(t.thread_id, r.run_id)));
      const byId = [...created]
        .sort((a, b) => a.run_id.localeCompare(b.run_id))
        .map((r) => (r as unknown as { kwargs: { input: Messages } }).kwargs.input.messages[0].content);
      const state = await client.threads.getState<Messages>(t.thread_id);
      const ran = state.values.messages.filter((m) => m.type === "human" && m.content.startsWith(`${round}-`)).map((m) => m.content);
      expect(ran).toEqual(byId);
    }
  });

  it("runs on many threads at once over both workers, twice (each thread's lease taken, kept while it lingers idle, released)", async () => {
    // a server on PostgreSQL is a cluster node of one: every thread's commands go through its lease
    const threads = await Promise.all(Array.from({ length: 24 }, () => client.threads.create({ metadata: { suite: "pg-many" } })));
    for (let round = 0; round < 2; round++) {
      const waited = await Promise.all(
        threads.map((t, i) =>
          i % 3 === 0
            ? client.runs.wait(t.thread_id, "slow", { input: human(`${round}-${i}`), config: { configurable: { sleep_ms: 200 } } })
            : client.runs.wait(t.thread_id, "echo", { input: human(`${round}-${i}`) }),
        ),
      );
      waited.forEach((v, i) => expect((v as Messages).messages.at(-1)?.content).toBe(`${round}-${i}`));
      // and enqueued behind each other on a few of them
      const queued = await Promise.all(
        threads
          .slice(0, 6)
          .flatMap((t, i) => [0, 1].map((k) => client.runs.create(t.thread_id, "echo", { input: human(`${round}-${i}-q${k}`), multitaskStrategy: "enqueue" }))),
      );
      for (const r of queued) await client.runs.join(r.thread_id, r.run_id);
      for (const r of queued) expect((await client.runs.get(r.thread_id, r.run_id)).status).toBe("success");
    }
    for (const [i, t] of threads.entries()) {
      const humans = (await client.threads.getState<Messages>(t.thread_id)).values.messages.filter((m) => m.type === "human").map((m) => m.content);
      expect(humans).toEqual(i < 6 ? ["0-" + i, `0-${i}-q0`, `0-${i}-q1`, "1-" + i, `1-${i}-q0`, `1-${i}-q1`] : ["0-" + i, "1-" + i]);
    }
    await waitUntil(async () => (await client.threads.count({ metadata: { suite: "pg-many" }, status: "busy" })) === 0, { what: "no thread busy" });
  }, 120_000);

  it("a lease row under the server's own node id that it does not hold (a holding released or given up as lost, still standing) does not block the thread", async () => {
    // a thread no request reached yet (a POST /threads here would take its lease: this node alone)
    const t = { thread_id: randomUUID() };
    const { node_id } = (await (await fetch(`${server.url}/info`)).json()) as { node_id: string };
    const c = new pg.Client({ connectionString: db.uri });
    await c.connect();
    try {
      // as a late heartbeat leaves it: the row extended after the node had dropped the holding
      await c.query(
        `INSERT INTO thread_leases (thread_id, node_id, epoch, expires_at) VALUES ($1, $2, nextval('thread_lease_epochs'), now() + interval '1 hour')
         ON CONFLICT (thread_id) DO UPDATE SET node_id = EXCLUDED.node_id, epoch = EXCLUDED.epoch, expires_at = EXCLUDED.expires_at`,
        [t.thread_id, node_id],
      );
      const ghost = (await c.query<{ epoch: string }>("SELECT epoch FROM thread_leases WHERE thread_id = $1", [t.thread_id])).rows[0].epoch;
      const waited = (await client.runs.wait(t.thread_id, "echo", { input: human("not blocked"), ifNotExists: "create" })) as Messages;
      expect(waited.messages.at(-1)?.content).toBe("not blocked");
      const row = (await c.query<{ epoch: string }>("SELECT epoch FROM thread_leases WHERE thread_id = $1", [t.thread_id])).rows[0];
      expect(row?.epoch).not.toBe(ghost); // taken again (new epoch) or released since
    } finally {
      await c.end();
    }
  });

  it("lease lifecycle on a node alone: the create takes it, the runs reuse it, released once idle, taken again by the next run", async () => {
    const holding = async (threadId: string) => {
      const c = new pg.Client({ connectionString: db.uri });
      await c.connect();
      try {
        return (await c.query<{ epoch: string }>("SELECT epoch FROM thread_leases WHERE thread_id = $1", [threadId])).rows[0]?.epoch;
      } finally {
        await c.end();
      }
    };
    const t = await client.threads.create();
    // a node alone takes a generated thread's lease with its create (its first run arrives here)
    const epoch = await holding(t.thread_id);
    expect(epoch).toBeDefined();
    await client.runs.wait(t.thread_id, "echo", { input: human("one") });
    expect(await holding(t.thread_id)).toBe(epoch);
    // within the linger (5 s here): the same holding, no new acquire (nor a recovery, nor a release)
    for (const input of ["two", "three"]) {
      await client.runs.wait(t.thread_id, "echo", { input: human(input) });
      expect(await holding(t.thread_id)).toBe(epoch);
    }
    await waitUntil(async () => (await holding(t.thread_id)) === undefined, { timeoutMs: 15_000, what: "the idle lease released" });
    const waited = (await client.runs.wait(t.thread_id, "echo", { input: human("four") })) as Messages;
    expect(waited.messages.filter((m) => m.type === "human").map((m) => m.content)).toEqual(["one", "two", "three", "four"]);
    expect(Number(await holding(t.thread_id))).toBeGreaterThan(Number(epoch)); // taken again
  });

  it("store: put, get, search", async () => {
    await client.store.putItem(["pg", "notes"], "a", { text: "first" });
    await client.store.putItem(["pg", "notes"], "b", { text: "second" });
    expect((await client.store.getItem(["pg", "notes"], "a"))?.value).toEqual({ text: "first" });
    const found = await client.store.searchItems(["pg"], { filter: { text: "second" } });
    expect(found.items.map((i) => i.key)).toEqual(["b"]);
  });

  it("values Postgres text cannot hold are answered as on LMDB: a checkpoint id with a NUL is not found, a depth of 1e308 is no limit", async () => {
    const t = await client.threads.create();
    await client.runs.wait(t.thread_id, "echo", { input: human("one") });
    const post = (path: string, body: unknown) =>
      fetch(`${server.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    const fromNul = await post(`/threads/${t.thread_id}/runs/wait`, {
      assistant_id: "echo",
      input: human("two"),
      config: { configurable: { checkpoint_id: "a\u0000b" } },
    });
    expect(fromNul.status).toBe(404);
    expect(((await fromNul.json()) as { detail: string }).detail).toMatch(/not found/);
    expect([404, 422]).toContain((await fetch(`${server.url}/threads/${t.thread_id}/state/a%00b`)).status); // a clear error, not a 500
    await client.store.putItem(["pg", "deep", "er"], "k", { v: 1 });
    const listed = await post("/store/namespaces", { prefix: ["pg", "deep"], max_depth: 1e308, offset: 0 });
    expect(listed.status).toBe(200);
    expect(await listed.json()).toEqual({ namespaces: [["pg", "deep", "er"]] });
  });

  it("crons: created, listed, and it fires", async () => {
    const t = await client.threads.create();
    const cron = await client.crons.createForThread(t.thread_id, "echo", { schedule: "* * * * * *", input: human("tick") });
    const listed = await client.crons.search({ threadId: t.thread_id });
    expect(listed.map((c) => c.cron_id)).toEqual([cron.cron_id]);
    await waitUntil(async () => (await client.runs.list(t.thread_id)).some((r) => r.status === "success"), { timeoutMs: 20_000, what: "a cron run finished" });
    await client.crons.delete(cron.cron_id);
    expect(await client.crons.count({ threadId: t.thread_id })).toBe(0);
  });

  it("a run's webhook is delivered by the webhook worker, its delivery recorded in the database", async () => {
    const received: { run_id: string; status: string }[] = [];
    const receiver = createServer((req, res) => {
      let raw = "";
      req.on("data", (d: Buffer) => (raw += d.toString()));
      req.on("end", () => {
        received.push(JSON.parse(raw) as { run_id: string; status: string });
        res.end();
      });
    });
    await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
    try {
      const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
      const t = await client.threads.create();
      const run = await client.runs.create(t.thread_id, "echo", { input: human("hooked"), webhook: url });
      await client.runs.join(t.thread_id, run.run_id);
      await waitUntil(() => received.some((h) => h.run_id === run.run_id), { timeoutMs: 20_000, what: "the webhook delivered" });
      expect(received.find((h) => h.run_id === run.run_id)?.status).toBe("success");
      // 200 comes while the delivery is still "pending" in the outbox: wait for its outcome row
      await waitUntil(
        async () => {
          const res = await fetch(`${server.url}/threads/${t.thread_id}/runs/${run.run_id}/webhook`);
          return res.status === 200 && ((await res.json()) as { state: string }).state === "delivered";
        },
        { what: "the delivery recorded" },
      );
      expect(await rowCount("webhook_outcomes", `run_id = '${run.run_id}'`)).toBe(1);
      expect(existsSync(join(server.dataDir, "troupe.mdb"))).toBe(false); // the worker opened no LMDB either
    } finally {
      receiver.close();
    }
  });

  it("kill -9 during a slow run, restart on the same database: the run ends, the thread is not busy", async () => {
    const t = await client.threads.create();
    const run = await client.runs.create(t.thread_id, "slow", { input: human("survive"), config: { configurable: { sleep_ms: 3_000 } } });
    const queued = await client.runs.create(t.thread_id, "echo", { input: human("after"), multitaskStrategy: "enqueue" });
    await waitUntil(async () => (await client.runs.get(t.thread_id, run.run_id)).status === "running", { timeoutMs: 20_000, what: "the slow run running" });
    await server.kill();

    // DATABASE_URI (no flag) names the database this time, on `troupe serve`
    server = await startTestServer({ command: "serve", env: { DATABASE_URI: db.uri }, dataDir: server.dataDir, extraArgs: ["--host", "127.0.0.1"] });
    servers.push(server);
    client = new Client({ apiUrl: server.url, apiKey: null });
    await client.runs.join(t.thread_id, run.run_id);
    await client.runs.join(t.thread_id, queued.run_id);
    for (const id of [run.run_id, queued.run_id]) expect(["success", "error", "interrupted"]).toContain((await client.runs.get(t.thread_id, id)).status);
    await waitUntil(async () => (await client.threads.get(t.thread_id)).status !== "busy", { timeoutMs: 20_000, what: "the thread not busy" });
    expect(await client.threads.count({ status: "busy" })).toBe(0);
    // the data written before the crash is still there
    expect(await client.threads.count({ metadata: { suite: "pg" } })).toBe(2);
    expect(existsSync(join(server.dataDir, "troupe.mdb"))).toBe(false);
  }, 90_000);
});
