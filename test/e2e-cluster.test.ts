// Cluster mode end to end (docs/CLUSTER.md): three real `troupe serve` processes on one PostgreSQL
// database, driven by the real SDK with requests spread over the nodes. A thread's commands reach
// the node holding its lease whichever node receives them; runs are waited for, joined, streamed
// and cancelled through other nodes; kill -9 of one node under running and queued runs loses
// nothing (every accepted run ends, no thread stays busy, each successful run's input is in its
// thread once); SIGTERM drains a node (its running run finishes, its queued run moves on).
// The lease TTL is shortened to 6 s (TROUPE_CLUSTER_LEASE_TTL_MS) so takeovers come sooner.
import { Client } from "@langchain/langgraph-sdk";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { usePostgresDatabase } from "./helpers/postgres.ts";
import { startTestServer, type TestServer } from "./helpers/server.ts";
import { waitUntil } from "./helpers/wait.ts";

const db = usePostgresDatabase();
const NODE_IDS = ["node-a", "node-b", "node-c"];
const nodes: TestServer[] = [];
const clients: Client[] = [];
const [A, B, C] = [0, 1, 2];

const human = (content: string) => ({ messages: [{ role: "human", content }] });
type Messages = { messages: { content: string; type: string }[] };
const slow = (ms: number) => ({ configurable: { sleep_ms: ms } });
const FINAL = new Set(["success", "error", "interrupted", "timeout"]);

/** Minimal N-node harness: each node a `troupe serve` on port 0 with its own data dir, all on the file's database. */
async function startNode(i: number): Promise<TestServer> {
  return startTestServer({
    command: "serve",
    databaseUri: db.uri,
    workers: 1,
    extraArgs: ["--host", "127.0.0.1", "--node-id", NODE_IDS[i]],
    // an idle lease lingers 5 s (not 2): the lease lifecycle test's forward within it on a busy machine
    env: { TROUPE_CLUSTER_LEASE_TTL_MS: "6000", TROUPE_CLUSTER_LEASE_LINGER_MS: "5000" },
  });
}

beforeAll(async () => {
  // one after another: the first applies the migrations, the others find them applied
  for (let i = 0; i < 3; i++) {
    nodes.push(await startNode(i));
    clients.push(new Client({ apiUrl: nodes[i].url, apiKey: null }));
  }
}, 120_000);

afterAll(async () => {
  if (process.env.TROUPE_TEST_DUMP) for (const n of nodes) console.log(n.output().slice(-6000));
  for (const n of nodes) await n.stop();
  for (const n of nodes) n.cleanup();
});

async function sql<T extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<T[]> {
  const c = new pg.Client({ connectionString: db.uri });
  await c.connect();
  try {
    return (await c.query<T>(text, values)).rows;
  } finally {
    await c.end();
  }
}

async function leaseHolder(threadId: string): Promise<string | undefined> {
  return (await sql<{ node_id: string }>("SELECT node_id FROM thread_leases WHERE thread_id = $1 AND expires_at > now()", [threadId]))[0]?.node_id;
}

describe("three troupe serve nodes on one database", () => {
  it("GET /info names the node that answered and counts the live nodes", async () => {
    for (let i = 0; i < 3; i++) {
      const info = await waitUntil(
        async () => {
          const body = (await (await fetch(`${nodes[i].url}/info`)).json()) as { node_id: string; nodes_alive: number };
          return body.nodes_alive === 3 ? body : undefined;
        },
        { timeoutMs: 20_000, what: `node ${i} seeing 3 live nodes` },
      );
      expect(info.node_id).toBe(NODE_IDS[i]);
    }
  });

  it("create a thread on A, run on B, join and wait on C", async () => {
    const t = await clients[A].threads.create();
    const run = await clients[B].runs.create(t.thread_id, "echo", { input: human("hello cluster") });
    const joined = (await clients[C].runs.join(t.thread_id, run.run_id)) as Messages;
    expect(joined.messages.map((m) => m.content)).toContain("hello cluster");
    const waited = (await clients[C].runs.wait(t.thread_id, "echo", { input: human("second") })) as Messages;
    expect(waited.messages.map((m) => m.content)).toEqual(["hello cluster", "hello cluster", "second", "second"]);
    expect((await clients[B].runs.get(t.thread_id, run.run_id)).status).toBe("success");
    const state = await clients[C].threads.getState(t.thread_id);
    expect((state.values as Messages).messages).toHaveLength(4);
  });

  it("multitask reject is decided cluster-wide (409 through another node)", async () => {
    const t = await clients[A].threads.create();
    const first = await clients[A].runs.create(t.thread_id, "slow", { input: human("long"), config: slow(2_000) });
    await waitUntil(async () => (await clients[C].runs.get(t.thread_id, first.run_id)).status === "running", { timeoutMs: 20_000, what: "first run running" });
    const res = await fetch(`${nodes[B].url}/threads/${t.thread_id}/runs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ assistant_id: "slow", input: human("refused"), multitask_strategy: "reject" }),
    });
    expect(res.status).toBe(409);
    await clients[C].runs.join(t.thread_id, first.run_id);
    expect((await clients[B].runs.get(t.thread_id, first.run_id)).status).toBe("success");
  });

  it("enqueued runs created round-robin over the nodes run in acceptance order", async () => {
    const t = await clients[B].threads.create();
    const runs = [];
    for (let i = 0; i < 6; i++) {
      runs.push(await clients[i % 3].runs.create(t.thread_id, "slow", { input: human(`r${i}`), multitaskStrategy: "enqueue", config: slow(50) }));
    }
    await clients[A].runs.join(t.thread_id, runs[5].run_id);
    for (const r of runs) expect((await clients[C].runs.get(t.thread_id, r.run_id)).status).toBe("success");
    const state = await clients[A].threads.getState(t.thread_id);
    const humans = (state.values as Messages).messages.filter((m) => m.type === "human").map((m) => m.content);
    expect(humans).toEqual(["r0", "r1", "r2", "r3", "r4", "r5"]);
  });

  it("a run on A streamed through B, join-streamed and cancelled through C", async () => {
    const t = await clients[A].threads.create();
    const seen: string[] = [];
    for await (const chunk of clients[B].runs.stream(t.thread_id, "echo", { input: human("streamed"), streamMode: "values" })) seen.push(chunk.event);
    expect(seen).toContain("metadata");
    expect(seen).toContain("values");

    const run = await clients[A].runs.create(t.thread_id, "slow", { input: human("joined"), config: slow(1_500), streamResumable: true });
    const joined: string[] = [];
    for await (const chunk of clients[C].runs.joinStream(t.thread_id, run.run_id, { lastEventId: "-1" })) joined.push(chunk.event);
    expect(joined).toContain("metadata");
    expect((await clients[B].runs.get(t.thread_id, run.run_id)).status).toBe("success");

    const long = await clients[A].runs.create(t.thread_id, "slow", { input: human("cancel me"), config: slow(30_000) });
    await waitUntil(async () => (await clients[B].runs.get(t.thread_id, long.run_id)).status === "running", { timeoutMs: 20_000, what: "long run running" });
    await clients[C].runs.cancel(t.thread_id, long.run_id, true);
    expect((await clients[B].runs.get(t.thread_id, long.run_id)).status).toBe("interrupted");
    expect((await clients[A].threads.get(t.thread_id)).status).toBe("idle");
  });

  it("lease lifecycle: a new thread's first run takes its lease where it arrives; a run through another node meanwhile is forwarded to it; the lease goes once idle", async () => {
    const t = await clients[A].threads.create(); // an id the server generated: no lease taken for the create
    expect(await leaseHolder(t.thread_id)).toBeUndefined();
    await clients[B].runs.wait(t.thread_id, "echo", { input: human("on b") });
    const taken = await sql<{ node_id: string; epoch: string }>("SELECT node_id, epoch FROM thread_leases WHERE thread_id = $1", [t.thread_id]);
    expect(taken).toEqual([{ node_id: "node-b", epoch: expect.any(String) }]);
    // B keeps the idle thread's lease for its linger: C forwards the next run to B, which runs it under the same holding
    const waited = (await clients[C].runs.wait(t.thread_id, "echo", { input: human("through c") })) as Messages;
    expect(waited.messages.map((m) => m.content)).toEqual(["on b", "on b", "through c", "through c"]);
    expect(await sql("SELECT node_id, epoch FROM thread_leases WHERE thread_id = $1", [t.thread_id])).toEqual(taken);
    // idle past the linger (5 s here, swept every 2.5 s): released, the row gone (not expired: nothing to recover)
    await waitUntil(async () => (await sql("SELECT 1 FROM thread_leases WHERE thread_id = $1", [t.thread_id])).length === 0, {
      timeoutMs: 15_000,
      what: "the idle lease released",
    });
    await clients[C].runs.wait(t.thread_id, "echo", { input: human("on c") });
    expect(await leaseHolder(t.thread_id)).toBe("node-c");
    expect((await clients[A].threads.get(t.thread_id)).status).toBe("idle");
  });

  it("a run request refused by its checks leaves no lease behind: the take begun alongside them lingers and goes", async () => {
    const t = await clients[A].threads.create();
    // the lease take starts while the assistant is read (prepareThread); the request then fails
    await expect(clients[B].runs.wait(t.thread_id, "no-such-assistant", { input: human("never") })).rejects.toThrow(/404|No assistant found/);
    await waitUntil(async () => (await sql("SELECT 1 FROM thread_leases WHERE thread_id = $1", [t.thread_id])).length === 0, {
      timeoutMs: 15_000,
      what: "no lease of the thread (never taken, or released after the linger)",
    });
    const waited = (await clients[C].runs.wait(t.thread_id, "echo", { input: human("on c") })) as Messages;
    expect(waited.messages.map((m) => m.content)).toEqual(["on c", "on c"]);
    expect(await leaseHolder(t.thread_id)).toBe("node-c");
    expect((await clients[A].runs.list(t.thread_id)).map((r) => r.status)).toEqual(["success"]);
  });

  it("a write refused by the lease fence sends the thread's next command to its new owner at once, not after the next heartbeat", async () => {
    const t = await clients[A].threads.create();
    await clients[A].runs.wait(t.thread_id, "echo", { input: human("before the takeover") });
    expect(await leaseHolder(t.thread_id)).toBe("node-a"); // lingering on A
    // A's lease runs out unnoticed (as when A is paused past it) and B takes the thread with its next
    // run. A node's takeover scan (every node runs one) may take the expired lease first, A's own
    // included, on a loaded machine: then expire it again, until B's run is the one that takes it.
    for (let attempt = 0; ; attempt++) {
      await sql("UPDATE thread_leases SET expires_at = now() - interval '1 second' WHERE thread_id = $1", [t.thread_id]);
      await clients[B].runs.wait(t.thread_id, "echo", { input: human(`on B ${attempt}`) });
      const holder = await leaseHolder(t.thread_id);
      if (holder === "node-b") break;
      if (attempt === 4) expect(holder).toBe("node-b");
    }
    const patch = (i: number) =>
      fetch(`${nodes[A].url}/threads/${t.thread_id}`, {
        method: "PATCH",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ metadata: { [`k${i}`]: i } }),
      });
    // A still routes to its own actor until it learns: its write is refused (503, which the SDK
    // retries). Its heartbeat (every 2 s) may have learnt first: then this one is forwarded already
    const first = await patch(0);
    expect([503, 200]).toContain(first.status);
    // the refusal dropped A's holding at once: the next command is forwarded to B
    const second = await patch(1);
    expect(second.status).toBe(200);
    expect(await leaseHolder(t.thread_id)).toBe("node-b");
    const seen = await clients[C].threads.get(t.thread_id);
    expect(seen.metadata).toMatchObject({ k1: 1, ...(first.status === 200 ? { k0: 0 } : {}) });
    if (first.status === 503) expect(seen.metadata).not.toHaveProperty("k0");
  });

  it("kill -9 of one node under running and queued runs: every run ends, no thread stays busy, each input once", async () => {
    // each thread's first run is created through B, which takes the thread's lease (an idle
    // thread holds none) and keeps it while runs are in flight; the queued ones come through A and C
    const threads: { thread_id: string }[] = [];
    for (let i = 0; i < 4; i++) threads.push(await clients[i % 3].threads.create({ metadata: { chaos: true } }));
    const accepted: { threadId: string; runId: string; tag: string }[] = [];
    for (const [ti, t] of threads.entries()) {
      for (let r = 0; r < 3; r++) {
        const tag = `t${ti}-r${r}`;
        const run = await clients[[B, A, C][r]].runs.create(t.thread_id, "slow", {
          input: human(tag),
          multitaskStrategy: "enqueue",
          config: slow(r === 0 ? 4_000 : 300),
        });
        accepted.push({ threadId: t.thread_id, runId: run.run_id, tag });
      }
    }
    for (const t of threads) expect(await leaseHolder(t.thread_id)).toBe("node-b");
    await waitUntil(async () => (await clients[A].runs.get(threads[0].thread_id, accepted[0].runId)).status === "running", {
      timeoutMs: 20_000,
      what: "the first run running on B",
    });
    await nodes[B].kill();

    const survivors = [clients[A], clients[C]];
    await waitUntil(
      async () => {
        for (const [i, a] of accepted.entries()) {
          const run = await survivors[i % 2].runs.get(a.threadId, a.runId);
          if (!FINAL.has(run.status)) return false;
        }
        return true;
      },
      { timeoutMs: 60_000, intervalMs: 500, what: "every accepted run final after the kill" },
    );
    for (const t of threads) {
      const thread = await waitUntil(
        async () => {
          const got = await clients[A].threads.get(t.thread_id);
          return got.status === "busy" ? undefined : got;
        },
        { timeoutMs: 20_000, what: "thread not busy" },
      );
      expect(thread.status).toBe("idle");
      const holder = await leaseHolder(t.thread_id);
      expect(holder === undefined || holder !== "node-b").toBe(true);
    }
    for (const a of accepted) {
      const run = await clients[C].runs.get(a.threadId, a.runId);
      expect(run.status).toBe("success");
      const state = await clients[C].threads.getState(a.threadId);
      const inputs = (state.values as Messages).messages.filter((m) => m.type === "human" && m.content === a.tag);
      expect(inputs, a.tag).toHaveLength(1);
    }
  }, 120_000);

  it("SIGTERM drains a node: its running run finishes there, its queued run moves to another node", async () => {
    const t = await clients[A].threads.create();
    const running = await clients[C].runs.create(t.thread_id, "slow", { input: human("finish here"), config: slow(2_000) });
    expect(await leaseHolder(t.thread_id)).toBe("node-c"); // took the idle thread's lease, kept while the run is in flight
    const queued = await clients[A].runs.create(t.thread_id, "slow", { input: human("moved"), multitaskStrategy: "enqueue", config: slow(100) });
    await waitUntil(async () => (await clients[A].runs.get(t.thread_id, running.run_id)).status === "running", { timeoutMs: 20_000, what: "run running on C" });
    await nodes[C].stop();
    expect((await clients[A].runs.get(t.thread_id, running.run_id)).status).toBe("success");
    const moved = await waitUntil(
      async () => {
        const r = await clients[A].runs.get(t.thread_id, queued.run_id);
        return FINAL.has(r.status) ? r : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 250, what: "the queued run final on another node" },
    );
    expect(moved.status).toBe("success");
    expect(await leaseHolder(t.thread_id)).not.toBe("node-c");
    const state = await clients[A].threads.getState(t.thread_id);
    expect((state.values as Messages).messages.filter((m) => m.type === "human").map((m) => m.content)).toEqual(["finish here", "moved"]);
  }, 120_000);
});
