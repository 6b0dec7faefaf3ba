// A thread's first run on a cluster node (issue 21): the lease take reads, in its round trip,
// whether the thread has a root checkpoint; with none, the holding's savers answer the graph's
// first checkpoint read with none, without a statement. Real PostgreSQL, the actor in-process over
// the port a shard uses, fenced as thread.recover fences it. Wrong answers would lose state, so
// every way a thread gets a checkpoint without this holding's savers knowing is tried: a state
// update or copy before the take, another node's holding in between, a late message of an older
// holding, a write of the same holding before the read. Then a real server alone on its database,
// traced (TROUPE_TRACE): the statements a fresh thread's runs send.
import { statementsSince } from "./helpers/trace-statements.ts";
import { join } from "node:path";
import { Client } from "@langchain/langgraph-sdk";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { acquireLease, handOverLease, releaseLease, type AcquiredLease } from "../src/cluster/leases.ts";
import { databaseStamp } from "../src/cluster/time.ts";
import { runCheckpointMetadata } from "../src/actors/run-checkpoint-saver.ts";
import type { PostgresStorage } from "../src/storage/postgres/adapter.ts";
import { nowIso } from "../src/storage/records.ts";
import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import type { ThreadCheckpointOps } from "../src/storage/port.ts";
import { gateOf } from "./fixtures/actor/gate.ts";
import { ActorHarness } from "./helpers/actor-harness.ts";
import { usePostgresNodePair } from "./helpers/postgres.ts";
import { startTestServer, type TestServer } from "./helpers/server.ts";
import { waitUntil } from "./helpers/wait.ts";

const nodes = usePostgresNodePair();
const database = nodes;
const timing = { ttlMs: 15_000, stamp: databaseStamp };

type Saver = BaseCheckpointSaver & ThreadCheckpointOps;

/** Counts the latest-checkpoint reads sent through the node's pool (the statement the skip saves). */
function latestReads(node: PostgresStorage): { readonly n: number } {
  const pool = node.db.pool as unknown as { query: (...a: unknown[]) => unknown };
  const query = pool.query.bind(pool);
  const counter = { n: 0 };
  pool.query = (...a: unknown[]) => {
    if ((a[0] as { name?: string })?.name === "troupe_get_latest_tuple") counter.n++;
    return query(...a);
  };
  return counter;
}

async function actorsOn(node: PostgresStorage): Promise<{ h: ActorHarness; saver: Saver }> {
  const saver = (await node.checkpoints.open()).saver({ putMetadata: runCheckpointMetadata });
  return { h: ActorHarness.onPort({ port: node, saver }), saver };
}

/** `node` takes the thread's lease as a run's routing does (record and checkpoints read with it) and its shard handles thread.recover. */
async function take(node: PostgresStorage, h: ActorHarness, saver: Saver, threadId: string, nodeId: string): Promise<AcquiredLease> {
  const lease = await acquireLease(node.db, threadId, nodeId, timing, true);
  if (lease === undefined) throw new Error(`${nodeId} could not take ${threadId}`);
  node.fences!.fence(threadId, lease.epoch);
  if (lease.noCheckpoints === true) saver.learnNoCheckpoints?.(threadId, lease.epoch);
  h.actor(threadId).learnThread(lease.thread ?? undefined, lease.epoch);
  return lease;
}

/** A thread as POST /threads writes it: unfenced, no checkpoint. */
async function createThread(node: PostgresStorage, threadId: string): Promise<void> {
  const now = nowIso();
  const record = { thread_id: threadId, created_at: now, updated_at: now, metadata: { graph_id: "gate" }, status: "idle" as const, config: {} };
  expect(await node.threads.create(record)).toEqual(record);
}

async function runTo(h: ActorHarness, threadId: string, runId: string): Promise<void> {
  gateOf(runId).open();
  await h.create(threadId, runId, { input: runId });
  await h.sentLine(`done ${runId} success idle`);
}

/** The human messages of the thread's state, read through its actor (the checkpoints, not the stored values). */
async function humans(h: ActorHarness, threadId: string): Promise<string[]> {
  const state = (await h.actor(threadId).handle({ type: "thread.state", threadId, subgraphs: false })) as {
    values: { messages?: { type: string; content: string }[] };
  };
  return (state.values.messages ?? []).filter((m) => m.type === "human").map((m) => m.content);
}

const id = (n: number) => `00000000-0000-4000-8000-0000000fe${String(n).padStart(3, "0")}`;
const run = (n: number) => `00000000-0000-7000-8000-0000000fe${String(n).padStart(3, "0")}`;

describe("a thread's first run on a cluster node (Postgres)", () => {
  it("with no checkpoint as the lease was taken, the run reads none; its own checkpoints are read after it", async () => {
    const t = id(1);
    const { h, saver } = await actorsOn(nodes.a);
    const reads = latestReads(nodes.a);
    await createThread(nodes.a, t);
    const lease = await take(nodes.a, h, saver, t, "node-a");
    expect(lease).toMatchObject({ recover: false, noCheckpoints: true, thread: { thread_id: t } });
    await runTo(h, t, run(1));
    expect(reads.n).toBe(0); // was 1: the graph's first checkpoint read
    expect(h.reads).toEqual({ threads: 0, runs: 0 });
    // the run's checkpoints replaced what was known: the next run and the state read see them
    await runTo(h, t, run(2));
    expect(await humans(h, t)).toEqual([run(1), run(2)]);
    // taken again after a release: the take sees the checkpoints, nothing is skipped
    expect(await releaseLease(nodes.a.db, lease)).toBe(true);
    nodes.a.fences!.unfence(t);
    const again = await acquireLease(nodes.a.db, t, "node-a", timing, true);
    expect(again).toMatchObject({ noCheckpoints: false });
    await releaseLease(nodes.a.db, again!);
    // a thread that does not exist yet (a run with if_not_exists create): none either
    expect(await acquireLease(nodes.a.db, id(99), "node-a", timing, true)).toMatchObject({ thread: null, noCheckpoints: true });
  });

  it("a thread given a checkpoint before the take (a state update, a copy) is read", async () => {
    const [source, updated, copied] = [id(10), id(11), id(12)];
    const { h, saver } = await actorsOn(nodes.a);
    await createThread(nodes.a, source);
    await take(nodes.a, h, saver, source, "node-a");
    await runTo(h, source, run(10));
    // a state update on a fresh thread (its own holding), released idle
    await createThread(nodes.a, updated);
    const u = await take(nodes.a, h, saver, updated, "node-a");
    await h.actor(updated).handle({
      type: "thread.update_state",
      threadId: updated,
      values: { messages: [{ role: "human", content: "set by update_state" }] },
      asNode: "wait",
    });
    await releaseLease(nodes.a.db, u);
    nodes.a.fences!.unfence(updated);
    // a copy (written by the source's actor, unfenced target)
    await h.actor(source).handle({ type: "thread.copy", threadId: source, newThreadId: copied });

    const { h: h2, saver: saver2 } = await actorsOn(nodes.a);
    const reads = latestReads(nodes.a);
    expect(await take(nodes.a, h2, saver2, updated, "node-a")).toMatchObject({ noCheckpoints: false });
    expect(await take(nodes.a, h2, saver2, copied, "node-a")).toMatchObject({ noCheckpoints: false });
    await runTo(h2, updated, run(11));
    await runTo(h2, copied, run(12));
    expect(reads.n).toBe(2);
    expect(await humans(h2, updated)).toEqual(["set by update_state", run(11)]);
    expect(await humans(h2, copied)).toEqual([run(10), run(12)]);
  });

  it("what a holding learnt is not used by a later one, nor by a late message of an earlier one, nor after its own write", async () => {
    const t = id(20);
    const { h, saver } = await actorsOn(nodes.a);
    await createThread(nodes.a, t);
    const first = await take(nodes.a, h, saver, t, "node-a");
    // A pauses past its lease (not told): B takes the thread and runs it (a checkpoint)
    await handOverLease(nodes.b.db, first);
    const { h: hb, saver: saverB } = await actorsOn(nodes.b);
    const onB = await take(nodes.b, hb, saverB, t, "node-b");
    expect(onB.noCheckpoints).toBe(true);
    await runTo(hb, t, run(20));
    // ...then releases it, and A takes it back under a new holding: its saver reads the checkpoint
    await releaseLease(nodes.b.db, onB);
    nodes.b.fences!.unfence(t);
    const reads = latestReads(nodes.a);
    const third = await take(nodes.a, h, saver, t, "node-a");
    expect(third.noCheckpoints).toBe(false);
    saver.learnNoCheckpoints?.(t, first.epoch); // a late thread.recover of the first holding: ignored
    await runTo(h, t, run(21));
    expect(reads.n).toBe(1);
    expect(await humans(h, t)).toEqual([run(20), run(21)]);

    // a fresh thread whose holding writes a checkpoint (a state update) before its first run: the run reads it
    const u = id(21);
    await createThread(nodes.a, u);
    expect(await take(nodes.a, h, saver, u, "node-a")).toMatchObject({ noCheckpoints: true });
    await h.actor(u).handle({
      type: "thread.update_state",
      threadId: u,
      values: { messages: [{ role: "human", content: "before the first run" }] },
      asNode: "wait",
    });
    await runTo(h, u, run(22));
    expect(await humans(h, u)).toEqual(["before the first run", run(22)]);
  });
});

describe("a run started before its create committed, on a thread known to have no checkpoint (Postgres)", () => {
  it("sends its create before its graph runs (the graph awaits no I/O before its first step)", async () => {
    const t = id(30);
    const r = run(30);
    const { h, saver } = await actorsOn(nodes.a);
    // the graph loaded and compiled (its first run imports it: I/O)
    await createThread(nodes.a, id(31));
    await take(nodes.a, h, saver, id(31), "node-a");
    await runTo(h, id(31), run(31));
    await createThread(nodes.a, t);
    await take(nodes.a, h, saver, t, "node-a");
    // when the create's statement goes out on a connection: has the run's graph reached its node yet?
    const client = pg.Client.prototype as unknown as { query: (...a: unknown[]) => unknown };
    const query = client.query;
    let arrivalsAtSend: number | undefined;
    client.query = function (this: unknown, ...a: unknown[]) {
      if (/^troupe_run_create(_on_thread)?_fenced$/.test((a[0] as { name?: string })?.name ?? "")) arrivalsAtSend ??= gateOf(r).arrivals;
      return query.apply(this, a);
    };
    try {
      await runTo(h, t, r);
    } finally {
      client.query = query;
    }
    expect(arrivalsAtSend).toBe(0); // was 1: the driver's nextTick waited for the graph's microtasks to drain
    expect(await humans(h, t)).toEqual([r]);
  });
});

describe("a fresh thread's runs on a server alone (PostgreSQL, traced)", () => {
  let server: TestServer | undefined;
  afterAll(async () => {
    await server?.stop();
    server?.cleanup();
  });

  it("POST /threads takes the lease; the first run sends no acquire, record read or checkpoint read; a run within the linger no record read", async () => {
    const trace = join(process.env.TMPDIR ?? "/tmp", `troupe-fresh-thread-${process.pid}.trace`);
    server = await startTestServer({ databaseUri: database.uri, env: { TROUPE_TRACE: trace, TROUPE_CLUSTER_LEASE_LINGER_MS: "3000" } });
    const client = new Client({ apiUrl: server.url, apiKey: null });
    const human = (content: string) => ({ messages: [{ role: "human", content }] });
    type Messages = { messages: { content: string; type: string }[] };
    const humans = async (threadId: string) =>
      (await client.threads.getState<Messages>(threadId)).values.messages.filter((m) => m.type === "human").map((m) => m.content);
    const leaseOf = async (threadId: string) => {
      const c = new pg.Client({ connectionString: database.uri });
      await c.connect();
      try {
        return (await c.query<{ epoch: string; node_id: string }>("SELECT epoch, node_id FROM thread_leases WHERE thread_id = $1", [threadId])).rows[0];
      } finally {
        await c.end();
      }
    };
    const flushed = () => new Promise((resolve) => setTimeout(resolve, 400)); // each thread appends its trace every 100 ms
    // the in-process holdings above would expire into the server's takeover scan (acquires in the windows counted below)
    const c = new pg.Client({ connectionString: database.uri });
    await c.connect();
    await c.query("DELETE FROM thread_leases").finally(() => c.end());
    // warm up (the assistant, the graph, prepared statements)
    await client.runs.wait((await client.threads.create()).thread_id, "echo", { input: human("warm") });

    const t = await client.threads.create();
    const taken = await leaseOf(t.thread_id);
    expect(taken).toBeDefined(); // was: none until the first run
    await flushed();
    let mark = statementsSince(trace, 0).lines;
    expect(((await client.runs.wait(t.thread_id, "echo", { input: human("one") })) as Messages).messages.at(-1)?.content).toBe("one");
    await flushed();
    const first = statementsSince(trace, mark);
    // was: troupe_lease_acquire + troupe_lease_thread (the take), troupe_get_latest_tuple (the graph's first read)
    expect([...first.sent.keys()].filter((k) => /^troupe_(lease_acquire|lease_thread|get_latest_tuple|thread_get)$/.test(k))).toEqual([]);
    expect((await leaseOf(t.thread_id))?.epoch).toBe(taken.epoch);

    // the next run within the linger: its actor starts from the record the last one knew (was: troupe_thread_get)
    mark = first.lines;
    await client.runs.wait(t.thread_id, "echo", { input: human("two") });
    await flushed();
    const second = statementsSince(trace, mark);
    expect([...second.sent.keys()].filter((k) => /^troupe_(lease_acquire|lease_thread|thread_get)$/.test(k))).toEqual([]);
    expect(await humans(t.thread_id)).toEqual(["one", "two"]);

    // released once idle; taken again by the next run, which reads the checkpoints it now has
    await waitUntil(async () => (await leaseOf(t.thread_id)) === undefined, { timeoutMs: 15_000, what: "the idle lease released" });
    await flushed();
    mark = statementsSince(trace, 0).lines;
    await client.runs.wait(t.thread_id, "echo", { input: human("three") });
    await flushed();
    const third = statementsSince(trace, mark);
    expect(third.sent.get("troupe_lease_acquire")).toBe(1);
    expect(third.sent.get("troupe_get_latest_tuple")).toBe(1);
    expect(await humans(t.thread_id)).toEqual(["one", "two", "three"]);
    // a thread never run: its lease goes with the idle ones
    const unused = await client.threads.create();
    expect(await leaseOf(unused.thread_id)).toBeDefined();
    await waitUntil(async () => (await leaseOf(unused.thread_id)) === undefined, { timeoutMs: 15_000, what: "the unused thread's lease released" });
  }, 90_000);
});
