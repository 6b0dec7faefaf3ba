// Cluster chaos (issue 22 item 5; docs/CLUSTER.md): three real `troupe serve` nodes on one
// PostgreSQL database, threads whose leases are spread over all three, a load of running and
// queued runs created round-robin through the nodes; one node is killed with -9 while they run and
// more runs keep arriving through the survivors. Every accepted run must end in a final status
// within the lease expiry plus a generous margin, no thread stays busy, and each successful run's
// input is in its thread's state exactly once, in acceptance order. Then, on the survivors: a run
// executing on one node streamed through another (its first event), joined mid-stream through a
// third with Last-Event-ID (exactly the events after that id), and cancelled through another.
// The lease TTL is 6 s (TROUPE_CLUSTER_LEASE_TTL_MS) so the takeover comes sooner.
import { Client } from "@langchain/langgraph-sdk";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestCluster, type TestCluster } from "./helpers/cluster-servers.ts";
import { waitUntil } from "./helpers/wait.ts";

const TTL_MS = 6_000;
let cluster: TestCluster;
const human = (content: string) => ({ messages: [{ role: "human", content }] });
type Messages = { messages: { content: string; type: string }[] };
const slow = (ms: number) => ({ configurable: { sleep_ms: ms } });
const FINAL = new Set(["success", "error", "interrupted", "timeout"]);
const sdk = (url: string) => new Client({ apiUrl: url, apiKey: null });

beforeAll(async () => {
  cluster = await startTestCluster({ nodes: 3, env: { TROUPE_CLUSTER_LEASE_TTL_MS: String(TTL_MS) } });
}, 180_000);

afterAll(async () => {
  await cluster?.close();
});

async function sql<T extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<T[]> {
  const c = new pg.Client({ connectionString: cluster.databaseUri });
  await c.connect();
  try {
    return (await c.query<T>(text, values)).rows;
  } finally {
    await c.end();
  }
}

const leaseHolder = async (threadId: string): Promise<string | undefined> =>
  (await sql<{ node_id: string }>("SELECT node_id FROM thread_leases WHERE thread_id = $1 AND expires_at > now()", [threadId]))[0]?.node_id;

interface Accepted {
  threadId: string;
  runId: string;
  tag: string;
}

/** An SSE body's events with their ids, read until it ends or `stopAfter` events with an id came. */
async function readSse(res: Response, stopAfter = Infinity): Promise<{ id?: string; event: string; data: string }[]> {
  const events: { id?: string; event: string; data: string }[] = [];
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let buf = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    buf += decoder.decode(value, { stream: true });
    let cut: number;
    while ((cut = buf.indexOf("\n\n")) >= 0) {
      const frame = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      const e: { id?: string; event: string; data: string } = { event: "message", data: "" };
      for (const line of frame.split("\n")) {
        if (line.startsWith("id:")) e.id = line.slice(3).trim();
        else if (line.startsWith("event:")) e.event = line.slice(6).trim();
        else if (line.startsWith("data:")) e.data += line.slice(5).trim();
      }
      if (frame.trim() === "" || frame.startsWith(":")) continue;
      events.push(e);
      if (events.filter((x) => x.id !== undefined).length >= stopAfter) {
        await reader.cancel();
        return events;
      }
    }
  }
  return events;
}

describe("three nodes, one killed with -9 under load", () => {
  it("every accepted run ends, no thread stays busy, each successful input is in its thread once and in order", async () => {
    const urls = cluster.urls();
    const clients = urls.map(sdk);
    const nodeIds = cluster.nodes.map((n) => n.nodeId);
    const victim = 1;
    // 9 threads; each thread's first run is created through node i % 3, which takes its lease
    const threads: string[] = [];
    for (let i = 0; i < 9; i++) threads.push((await clients[i % 3].threads.create({ metadata: { chaos: "kill" } })).thread_id);
    const accepted: Accepted[] = [];
    let n = 0;
    const create = async (via: Client, threadId: string, sleepMs: number): Promise<void> => {
      const tag = `in-${n++}`;
      const run = await via.runs.create(threadId, "slow", { input: human(tag), multitaskStrategy: "enqueue", config: slow(sleepMs) });
      accepted.push({ threadId, runId: run.run_id, tag });
    };
    // long first runs (running at the kill), created through the node that created the thread
    await Promise.all(threads.map((t, i) => create(clients[i % 3], t, 10_000)));
    const holders = await Promise.all(threads.map(leaseHolder));
    for (const [i, h] of holders.entries()) expect(h, `thread ${i}`).toBe(nodeIds[i % 3]);
    // queued behind them, through every node in turn (a round at a time: each thread's runs in a known order)
    for (let round = 0; round < 3; round++) await Promise.all(threads.map((t, i) => create(clients[(i + round + 1) % 3], t, 200)));
    // the victim's threads have a run in flight when it dies
    await waitUntil(
      async () => {
        for (const [i, t] of threads.entries())
          if (i % 3 === victim && (await clients[0].runs.get(t, accepted.find((a) => a.threadId === t)!.runId)).status !== "running") return false;
        return true;
      },
      { timeoutMs: 30_000, intervalMs: 100, what: "the victim's first runs running" },
    );
    const killedAt = Date.now();
    await cluster.kill(victim);

    // more runs keep arriving through the survivors, on every thread (the victim's wait for the takeover)
    const survivors = [clients[0], clients[2]];
    await Promise.all(threads.map((t, i) => create(survivors[i % 2], t, 100)));

    await waitUntil(
      async () => {
        for (const [i, a] of accepted.entries()) if (!FINAL.has((await survivors[i % 2].runs.get(a.threadId, a.runId)).status)) return false;
        return true;
      },
      { timeoutMs: TTL_MS + 60_000, intervalMs: 500, what: "every accepted run final after the kill" },
    );
    // generous: the lease expiry plus a margin for a loaded machine (no timing claim beyond it)
    expect(Date.now() - killedAt).toBeLessThan(TTL_MS + 60_000);
    await waitUntil(async () => (await survivors[0].threads.count({ metadata: { chaos: "kill" }, status: "busy" })) === 0, {
      timeoutMs: 20_000,
      what: "no thread busy",
    });
    for (const t of threads) expect(await leaseHolder(t)).not.toBe(nodeIds[victim]);

    for (const t of threads) {
      const mine = accepted.filter((a) => a.threadId === t);
      const statuses = await Promise.all(mine.map(async (a) => (await survivors[0].runs.get(t, a.runId)).status));
      // runs are never lost or doubled: every accepted run of a thread succeeded (none was cancelled)
      expect(statuses).toEqual(mine.map(() => "success"));
      const humans = ((await survivors[1].threads.getState(t)).values as Messages).messages.filter((m) => m.type === "human").map((m) => m.content);
      expect(humans, `thread ${t}`).toEqual(mine.map((a) => a.tag)); // each once, in acceptance order
      const history = await survivors[0].threads.getHistory(t, { limit: 1 });
      expect(((history[0]?.values ?? {}) as Messages).messages.filter((m) => m.type === "human")).toHaveLength(mine.length);
    }
  }, 240_000);

  it("across the survivors: a stream's first event, a mid-stream join with Last-Event-ID, a cancel", async () => {
    const up = cluster.nodes.flatMap((node, i) => (node.server === undefined ? [] : [i]));
    const [owner, reader] = up;
    const [ownerUrl, readerUrl] = [cluster.nodes[owner].url, cluster.nodes[reader].url];
    const t = await sdk(ownerUrl).threads.create();
    // a thread's lease is taken by the node a run is created through when the thread is idle, and
    // kept while runs are in flight: each part below starts with a run created through the owner
    const hold = await sdk(ownerUrl).runs.create(t.thread_id, "slow", { input: human("hold"), config: slow(1_500) });
    expect(await leaseHolder(t.thread_id)).toBe(cluster.nodes[owner].nodeId);
    // streamed through the other node (queued behind): the first event comes (metadata), then the values
    const events: string[] = [];
    const streamed = sdk(readerUrl).runs.stream(t.thread_id, "slow", {
      input: human("streamed"),
      streamMode: "values",
      multitaskStrategy: "enqueue",
      config: slow(200),
    });
    for await (const chunk of streamed) events.push(chunk.event);
    expect(events[0]).toBe("metadata");
    expect(events).toContain("values");
    expect((await sdk(readerUrl).runs.get(t.thread_id, hold.run_id)).status).toBe("success");

    // a resumable run on the owner: its first events read through the reader node, then joined again there from the last id seen
    const run = await sdk(ownerUrl).runs.create(t.thread_id, "slow", {
      input: human("joined"),
      config: slow(2_500),
      streamMode: ["values", "updates", "debug"],
      streamResumable: true,
    });
    expect(await leaseHolder(t.thread_id)).toBe(cluster.nodes[owner].nodeId);
    const path = `/threads/${t.thread_id}/runs/${run.run_id}/stream`;
    const idsOf = (evs: { id?: string }[]) => evs.flatMap((e) => (e.id === undefined ? [] : [e.id]));
    const whole = readSse(await fetch(`${ownerUrl}${path}`, { headers: { "Last-Event-ID": "-1" } })); // on the owner, from the start to the end
    const first = await readSse(await fetch(`${readerUrl}${path}`, { headers: { "Last-Event-ID": "-1" } }), 2);
    const ids = idsOf(first);
    expect(ids.length).toBe(2);
    expect(first[0].event).toBe("metadata");
    const rest = await readSse(await fetch(`${readerUrl}${path}`, { headers: { "Last-Event-ID": ids[1] } }));
    const allIds = idsOf(await whole);
    expect(allIds.slice(0, 2)).toEqual(ids);
    // exactly the events after that id: none again, none missing
    expect(idsOf(rest)).toEqual(allIds.slice(2));
    expect(rest.some((e) => e.event === "values" && e.data.includes("joined"))).toBe(true);
    expect((await sdk(readerUrl).runs.get(t.thread_id, run.run_id)).status).toBe("success");

    // cancelled through the other node while it runs on the owner
    const long = await sdk(ownerUrl).runs.create(t.thread_id, "slow", { input: human("cancel me"), config: slow(30_000) });
    await waitUntil(async () => (await sdk(readerUrl).runs.get(t.thread_id, long.run_id)).status === "running", {
      timeoutMs: 20_000,
      what: "long run running",
    });
    expect(await leaseHolder(t.thread_id)).toBe(cluster.nodes[owner].nodeId);
    await sdk(readerUrl).runs.cancel(t.thread_id, long.run_id, true);
    expect((await sdk(ownerUrl).runs.get(t.thread_id, long.run_id)).status).toBe("interrupted");
    expect((await sdk(readerUrl).threads.get(t.thread_id)).status).toBe("idle");
  }, 120_000);
});
