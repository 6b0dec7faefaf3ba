// The assistant of a run on PostgreSQL (issue 21): the HTTP thread answers it from a cache
// (AssistantsPort.forRun), and the run's create statement checks that the assistant's row is still
// the version cached; a row changed or deleted through another node fails the create with
// ASSISTANT_CHANGED, writing nothing, and the create is built again from a fresh read. In-process
// on two storages of one database (the actor over the port, its early start included), then real
// servers: one alone, traced (no assistant read on a known assistant's run), and two nodes on one
// database (an assistant changed or deleted through one, a run created right after through the other).
import { statementsSince } from "./helpers/trace-statements.ts";
import { join } from "node:path";
import { Client } from "@langchain/langgraph-sdk";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { runCheckpointMetadata } from "../src/actors/run-checkpoint-saver.ts";
import { shareAssistantWrites } from "../src/cluster/assistant-notices.ts";
import { NotifyBus } from "../src/cluster/bus.ts";
import { TroupeError } from "../src/errors.ts";
import type { PostgresStorage } from "../src/storage/postgres/adapter.ts";
import type { AssistantRecord } from "../src/storage/records.ts";
import { gateOf } from "./fixtures/actor/gate.ts";
import { ActorHarness, GATE_ASSISTANT } from "./helpers/actor-harness.ts";
import { usePostgresNodePair } from "./helpers/postgres.ts";
import { startTestServer, type TestServer } from "./helpers/server.ts";
import { waitUntil } from "./helpers/wait.ts";

const nodes = usePostgresNodePair();

/** Counts the statements of one name sent through the storage's pool. */
function sentThrough(node: PostgresStorage, name: string): { readonly n: number } {
  const pool = node.db.pool as unknown as { query: (...a: unknown[]) => unknown };
  const query = pool.query.bind(pool);
  const counter = { n: 0 };
  pool.query = (...a: unknown[]) => {
    if ((a[0] as { name?: string })?.name === name) counter.n++;
    return query(...a);
  };
  return counter;
}

const assistantId = (n: number) => `00000000-0000-4000-8000-0000000a5${String(n).padStart(3, "0")}`;
const threadId = (n: number) => `00000000-0000-4000-8000-0000000b5${String(n).padStart(3, "0")}`;
const runId = (n: number) => `00000000-0000-7000-8000-0000000c5${String(n).padStart(3, "0")}`;
const gateAssistant = (n: number): AssistantRecord => ({ ...GATE_ASSISTANT, assistant_id: assistantId(n) });

/** Run creates (and only they) sent through the storage's pool once `before` resolves: a slow round trip, in effect. */
function createsAfter(node: PostgresStorage, before: () => Promise<unknown>): { restore(): void } {
  const pool = node.db.pool as unknown as { query: (...a: unknown[]) => unknown };
  const query = pool.query;
  pool.query = function (this: unknown, ...a: unknown[]) {
    if (!/^troupe_run_create/.test((a[0] as { name?: string })?.name ?? "")) return query.apply(this, a);
    return before().then(() => query.apply(this, a));
  };
  return { restore: () => void (pool.query = query) };
}

/** Gives a run's graph that outlived its run time to write (it must not be able to). */
const settledWrites = (_node: PostgresStorage) => new Promise((resolve) => setTimeout(resolve, 500));

/** The human messages of the thread's state, read through its actor (the checkpoints). */
async function humans(h: ActorHarness, threadId: string): Promise<string[]> {
  const state = (await h.actor(threadId).handle({ type: "thread.state", threadId, subgraphs: false })) as {
    values: { messages?: { type: string; content: string }[] };
  };
  return (state.values.messages ?? []).filter((m) => m.type === "human").map((m) => m.content);
}

const changed = (err: unknown) => err instanceof TroupeError && err.code === "ASSISTANT_CHANGED";

async function rowCount(node: PostgresStorage, sql: string, values: unknown[]): Promise<number> {
  return Number((await node.db.pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${sql}`, values)).rows[0].n);
}

describe("a run's assistant from the HTTP thread's cache (Postgres, in-process)", () => {
  it("is read once, then answered from the cache with a check; this storage's own writes drop it", async () => {
    const reads = sentThrough(nodes.a, "troupe_assistant_get_stamped");
    const a = gateAssistant(1);
    await nodes.a.assistants.create(a);
    const first = await nodes.a.assistants.forRun(a.assistant_id, false);
    expect(first).toEqual({ record: a }); // read now: nothing to check
    expect(reads.n).toBe(1);
    const second = await nodes.a.assistants.forRun(a.assistant_id, false);
    expect(second?.record).toEqual(a);
    expect(second?.check).toMatchObject({ assistantId: a.assistant_id, stamp: expect.any(String) });
    expect(reads.n).toBe(1); // no statement
    // a fresh read (the retry after ASSISTANT_CHANGED) reads, and caches what it read
    expect((await nodes.a.assistants.forRun(a.assistant_id, true))?.check).toBeUndefined();
    expect(reads.n).toBe(2);
    // this storage's patch, latest version, delete: the entry goes, the next run reads
    const patched = await nodes.a.assistants.patch(a.assistant_id, { context: { v: 2 } }, new Date().toISOString());
    expect(await nodes.a.assistants.forRun(a.assistant_id, false)).toEqual({ record: patched });
    expect(reads.n).toBe(3);
    const stamp = (await nodes.a.assistants.forRun(a.assistant_id, false))?.check?.stamp;
    const latest = await nodes.a.assistants.setLatest(a.assistant_id, 1, new Date().toISOString());
    const afterLatest = await nodes.a.assistants.forRun(a.assistant_id, false);
    expect(afterLatest).toEqual({ record: latest });
    expect(reads.n).toBe(4);
    expect((await nodes.a.assistants.forRun(a.assistant_id, false))?.check?.stamp).not.toBe(stamp);
    expect(await nodes.a.assistants.delete(a.assistant_id)).toBe(true);
    expect(await nodes.a.assistants.forRun(a.assistant_id, false)).toBeUndefined();
    expect(await nodes.a.assistants.forRun(a.assistant_id, false)).toBeUndefined(); // "none" is not cached
    expect(reads.n).toBe(6);
  });

  it("a create whose cached assistant changed or went through another node writes nothing and fails ASSISTANT_CHANGED; created again at once", async () => {
    const saver = (await nodes.a.checkpoints.open()).saver({ putMetadata: runCheckpointMetadata });
    const h = ActorHarness.onPort({ port: nodes.a, saver });
    const a = gateAssistant(2);
    await nodes.a.assistants.create(a);
    await nodes.a.assistants.forRun(a.assistant_id, false);
    const cached = (await nodes.a.assistants.forRun(a.assistant_id, false))!;
    expect(cached.check).toBeDefined();

    // current: the checked create runs (a thread made by its run: the upsert statement)
    const [t, r] = [threadId(2), runId(2)];
    gateOf(r).open();
    await h.create(t, r, { assistant: cached.record, assistantCheck: cached.check, strategy: "reject" });
    await h.sentLine(`done ${r} success idle`);

    // the other node patches it: this node's cache does not know
    const patched = (await nodes.b.assistants.patch(a.assistant_id, { context: { v: 2 } }, new Date().toISOString()))!;
    const stale = (await nodes.a.assistants.forRun(a.assistant_id, false))!;
    expect(stale.record).toEqual(a);
    // a run nobody streams on an idle thread starts before its create commits (PostgreSQL): the
    // refused create ends it unseen. The retry comes at once (as the HTTP thread's: a fresh read,
    // the same run id, reject): the run started early is gone by then, and nothing of it lands
    const r2 = runId(3);
    const refused = await h.create(t, r2, { assistant: stale.record, assistantCheck: stale.check, strategy: "reject" }).catch((e: unknown) => e);
    expect(changed(refused)).toBe(true);
    gateOf(r2).open();
    await h.create(t, r2, { assistant: patched, strategy: "reject" });
    await h.sentLine(`done ${r2} success idle`);
    expect((await nodes.a.runs.get(t, r2))?.kwargs.context).toEqual({ v: 2 });
    await settledWrites(nodes.a);
    expect(await humans(h, t)).toEqual([r, r2]); // the input once: no checkpoint of the refused start
    expect(await rowCount(nodes.a, "checkpoints WHERE thread_id = $1 AND run_id = $2", [t, r2])).toBe(
      await rowCount(nodes.a, "checkpoints WHERE thread_id = $1 AND run_id = $2", [t, r]),
    );

    // a run superseding one in flight (interrupt), with a stale check: nothing of it lands, the running run goes on
    expect(await nodes.a.assistants.forRun(a.assistant_id, true)).toEqual({ record: patched }); // (the HTTP thread's retry reads it so)
    const current = (await nodes.a.assistants.forRun(a.assistant_id, false))!;
    expect(current.check).toBeDefined();
    const [r3, r4] = [runId(4), runId(5)];
    await h.create(t, r3, { assistant: current.record, assistantCheck: current.check });
    await nodes.b.assistants.patch(a.assistant_id, { context: { v: 3 } }, new Date().toISOString());
    const superseding = await h.create(t, r4, { assistant: current.record, assistantCheck: current.check, strategy: "interrupt" }).catch((e: unknown) => e);
    expect(changed(superseding)).toBe(true);
    expect(await nodes.a.runs.get(t, r4)).toBeUndefined();
    expect((await nodes.a.runs.get(t, r3))?.status).toBe("running");
    expect((await nodes.a.runs.get(t, r3))?.cancel_reason).toBeUndefined();
    gateOf(r3).open();
    await h.sentLine(`done ${r3} success idle`);

    // refused while its graph runs: the create's statement held back until the graph is in its node
    const again = (await nodes.a.assistants.forRun(a.assistant_id, true), await nodes.a.assistants.forRun(a.assistant_id, false))!;
    await nodes.b.assistants.patch(a.assistant_id, { context: { v: 4 } }, new Date().toISOString());
    const r6 = runId(7);
    const slowed = createsAfter(nodes.a, () => waitUntil(() => gateOf(r6).arrivals === 1, { what: "the graph in its node" }));
    try {
      const late = await h.create(t, r6, { assistant: again.record, assistantCheck: again.check }).catch((e: unknown) => e);
      expect(changed(late)).toBe(true);
    } finally {
      slowed.restore();
    }
    await settledWrites(nodes.a);
    expect(await nodes.a.runs.get(t, r6)).toBeUndefined();
    expect(await rowCount(nodes.a, "checkpoints WHERE thread_id = $1 AND run_id = $2", [t, r6])).toBe(0);
    expect(await rowCount(nodes.a, "checkpoint_writes WHERE thread_id = $1 AND run_id = $2", [t, r6])).toBe(0);

    // deleted through the other node: refused the same way (the retry then finds no assistant)
    const beforeDelete = (await nodes.a.assistants.forRun(a.assistant_id, true), await nodes.a.assistants.forRun(a.assistant_id, false))!;
    expect(beforeDelete.check).toBeDefined();
    expect(await nodes.b.assistants.delete(a.assistant_id)).toBe(true);
    const r5 = runId(6);
    const gone = await h.create(threadId(3), r5, { assistant: beforeDelete.record, assistantCheck: beforeDelete.check }).catch((e: unknown) => e);
    expect(changed(gone)).toBe(true);
    expect(await nodes.a.threads.get(threadId(3))).toBeUndefined();
    expect(await nodes.a.runs.get(threadId(3), r5)).toBeUndefined();
    expect(await nodes.a.assistants.forRun(a.assistant_id, true)).toBeUndefined();
  });
});

describe("assistant writes told over the cluster bus (Postgres, in-process)", () => {
  it("another node's write drops this node's entry as its notice arrives; a gap drops them all", async () => {
    const buses = [new NotifyBus(nodes.a.db, { cleanupEveryMs: 0 }), new NotifyBus(nodes.b.db, { cleanupEveryMs: 0 })];
    const stops: (() => Promise<void>)[] = [];
    // (created before the notices are shared: a create's notice could arrive after A cached it)
    const [x, y] = [gateAssistant(10), gateAssistant(11)];
    await nodes.b.assistants.create(x);
    await nodes.b.assistants.create(y);
    try {
      for (const [i, node] of [nodes.a, nodes.b].entries()) {
        await buses[i].start();
        stops.push(await shareAssistantWrites(buses[i], node.db.schema, node.assistants, (err) => console.error(err)));
      }
      const cachedOnA = async (id: string) => {
        await nodes.a.assistants.forRun(id, true);
        expect((await nodes.a.assistants.forRun(id, false))?.check).toBeDefined();
      };
      await cachedOnA(x.assistant_id);
      await cachedOnA(y.assistant_id);
      const patched = await nodes.b.assistants.patch(x.assistant_id, { context: { v: 2 } }, new Date().toISOString());
      // A's next run reads it again (no check: read now) once the notice is in; y stays cached
      await waitUntil(async () => (await nodes.a.assistants.forRun(x.assistant_id, false))?.check === undefined, { what: "the notice on A" });
      expect(await nodes.a.assistants.forRun(x.assistant_id, false)).toMatchObject({ record: patched, check: expect.anything() });
      expect((await nodes.a.assistants.forRun(y.assistant_id, false))?.check).toBeDefined();
      // the LISTEN session lost (notices may be missed): every entry goes
      await nodes.a.db.pool.query("SELECT pg_terminate_backend($1)", [await buses[0].listenerPid()]);
      await waitUntil(async () => (await nodes.a.assistants.forRun(y.assistant_id, false))?.check === undefined, { what: "the gap on A" });
    } finally {
      for (const stop of stops) await stop();
      for (const bus of buses) await bus.close();
    }
  });
});

const flushed = () => new Promise((resolve) => setTimeout(resolve, 400)); // each thread appends its trace every 100 ms
type Messages = { messages: { content: string; type: string }[] };
const human = (content: string) => ({ messages: [{ role: "human", content }] });
const lastContent = (values: unknown) => (values as Messages).messages.at(-1)?.content;

describe("a run's assistant on real servers (PostgreSQL)", () => {
  const servers: TestServer[] = [];
  afterAll(async () => {
    for (const s of servers) await s.stop();
    for (const s of servers) s.cleanup();
  });

  it("a server alone, traced: a run on an assistant it knows sends no assistant read", async () => {
    const trace = join(process.env.TMPDIR ?? "/tmp", `troupe-run-assistant-${process.pid}.trace`);
    const server = await startTestServer({ databaseUri: nodes.uri, env: { TROUPE_TRACE: trace } });
    const client = new Client({ apiUrl: server.url, apiKey: null });
    await client.runs.wait((await client.threads.create()).thread_id, "echo", { input: human("warm") });
    await flushed();
    const mark = statementsSince(trace, 0).lines;
    const t = await client.threads.create();
    expect(lastContent(await client.runs.wait(t.thread_id, "echo", { input: human("one") }))).toBe("one");
    expect(lastContent(await client.runs.wait(null, "echo", { input: human("two") }))).toBe("two");
    await flushed();
    const sent = statementsSince(trace, mark).sent;
    // was: troupe_assistant_get once per run
    expect([...sent.keys()].filter((k) => k.startsWith("troupe_assistant_get"))).toEqual([]);
    expect(sent.get("troupe_run_create_on_thread_checked_fenced")).toBe(1);
    expect([...sent.keys()].filter((k) => k.startsWith("troupe_run_create") && !k.includes("_checked"))).toEqual([]);
    await server.stop(); // (the next test's two nodes are the database's only ones)
    server.cleanup();
  }, 60_000);

  it("an assistant patched, set to a version or deleted through one node: a run created right after through another sees it", async () => {
    const a = await startTestServer({ databaseUri: nodes.uri, env: { TROUPE_NODE_NAME: "assistant-node-a" } });
    servers.push(a);
    const b = await startTestServer({ databaseUri: nodes.uri, env: { TROUPE_NODE_NAME: "assistant-node-b" } });
    servers.push(b);
    const viaA = new Client({ apiUrl: a.url, apiKey: null });
    const viaB = new Client({ apiUrl: b.url, apiKey: null });
    const assistant = await viaA.assistants.create({ graphId: "context", context: { who: "v1" } });
    /** the configurable the run was created with, as stored */
    const configurableOf = async (run: { run_id: string; thread_id: string }) =>
      ((await nodes.a.runs.get(run.thread_id, run.run_id))?.kwargs.config.configurable ?? {}) as Record<string, unknown>;
    const contextOf = async (values: unknown) => JSON.parse(String(lastContent(values))) as unknown;
    const onThread = async () => contextOf(await viaB.runs.wait((await viaB.threads.create()).thread_id, assistant.assistant_id, { input: human("x") }));
    const stateless = async () => contextOf(await viaB.runs.wait(null, assistant.assistant_id, { input: human("x") }));
    // B reads it, then answers it from its cache
    expect(await onThread()).toEqual({ who: "v1" });
    expect(await stateless()).toEqual({ who: "v1" });
    // changed through A: B's next runs (its cache stale) get the new one
    await viaA.assistants.update(assistant.assistant_id, { context: { who: "v2" } });
    expect(await onThread()).toEqual({ who: "v2" });
    await viaA.assistants.update(assistant.assistant_id, { context: { who: "v3" } });
    expect(await stateless()).toEqual({ who: "v3" });
    // an earlier version made the latest through A (context is not versioned: config is)
    await viaA.assistants.update(assistant.assistant_id, { config: { configurable: { tag: "v4" } } });
    const run4 = await viaB.runs.create((await viaB.threads.create()).thread_id, assistant.assistant_id, { input: human("x") });
    expect(await configurableOf(run4)).toMatchObject({ tag: "v4" });
    await viaA.assistants.setLatest(assistant.assistant_id, 1);
    const run5 = await viaB.runs.create((await viaB.threads.create()).thread_id, assistant.assistant_id, { input: human("x") });
    expect((await configurableOf(run5)).tag).toBeUndefined();
    // deleted through A: B's run fails as the JS server's does
    await viaA.assistants.delete(assistant.assistant_id);
    await expect(viaB.runs.wait(null, assistant.assistant_id, { input: human("x") })).rejects.toThrow(/No assistant found for/);
    const t = await viaB.threads.create();
    await expect(viaB.runs.create(t.thread_id, assistant.assistant_id, { input: human("x") })).rejects.toThrow(/No assistant found for/);
    // nothing of the refused creates is left: only the runs answered above
    const c = new pg.Client({ connectionString: nodes.uri });
    await c.connect();
    try {
      const runs = await c.query<{ n: string }>("SELECT count(*) AS n FROM runs WHERE assistant_id = $1", [assistant.assistant_id]);
      expect(Number(runs.rows[0].n)).toBe(0); // the assistant's delete removed its runs: none was written after it
    } finally {
      await c.end();
    }
  }, 120_000);
});
