// Batched thread writes on Postgres (src/storage/postgres/write-chains.ts): writes of one thread
// that queue up behind one in flight commit together, in one transaction, still in issue order;
// a batch that fails leaves every write with the outcome it has on its own.
import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import pgDriver from "pg";
import { describe, expect, it } from "vitest";
import { postgresAdapter } from "../../src/storage/open.ts";
import { openPostgresStorage, type PostgresStorage } from "../../src/storage/postgres/adapter.ts";
import type { PostgresCheckpointSaver } from "../../src/storage/postgres/checkpointer.ts";
import type { RunRecord } from "../../src/storage/records.ts";
import { cfg, checkpoint, meta } from "../helpers/checkpoints.ts";
import { usePostgresStorage } from "../helpers/postgres.ts";
import { runRecord, threadRecord } from "../helpers/records.ts";

const PgClient = pgDriver.Client;
const fx = usePostgresStorage();

let serial = 0;
const nextId = (prefix: string): string => `${prefix}-${String(++serial).padStart(6, "0")}`;
const thread = threadRecord;
const run = (threadId: string, runId = nextId("run")): RunRecord => runRecord(threadId, runId);

/** how many transactions wrote the thread's run rows (rows written by one transaction share its xmin) */
async function runTransactions(threadId: string): Promise<number> {
  const r = await fx.storage.db.pool.query<{ n: number }>("SELECT count(DISTINCT xmin::text)::int AS n FROM runs WHERE thread_id = $1", [threadId]);
  return r.rows[0].n;
}

describe("batched thread writes (Postgres)", () => {
  it("writes queued behind one in flight commit in one transaction, in issue order", async () => {
    const id = nextId("t");
    await fx.storage.threads.create(thread(id));
    const runs = Array.from({ length: 20 }, () => run(id));
    // issued without awaiting: whatever queues behind a write in flight leaves with the next batch
    const committed = runs.map((r, i) => fx.storage.runs.create({ run: r, thread: thread(id, { status: "busy", metadata: { step: i } }) }).committed);
    const started = fx.storage.runs.save({ ...runs[19], status: "running", attempt: 1 }).committed; // after its create, in the same batch
    await Promise.all([...committed, started]);
    // (one write each: 20)
    expect(await runTransactions(id)).toBeLessThanOrEqual(2);
    expect(await fx.storage.runs.get(id, runs[19].run_id)).toMatchObject({ status: "running", attempt: 1 });
    expect((await fx.storage.runs.list(id, { offset: 0, limit: 50 })).map((r) => r.run_id)).toEqual(runs.map((r) => r.run_id));
    // the last write issued is the thread record that stays
    expect(await fx.storage.threads.get(id)).toMatchObject({ status: "busy", metadata: { step: 19 } });
  });

  it("a write that fails in a batch fails alone: the writes around it commit, in order", async () => {
    const id = nextId("t");
    await fx.storage.threads.create(thread(id));
    const first = run(id);
    await fx.storage.runs.create({ run: first, thread: thread(id) }).committed;
    const before = run(id);
    const after = run(id);
    const blocker = fx.storage.threads.save(thread(id, { metadata: { n: 0 } })); // in flight: what follows queues
    const ok1 = fx.storage.runs.create({ run: before, thread: thread(id, { metadata: { n: 1 } }) }).committed;
    const duplicate = fx.storage.runs.create({ run: first, thread: thread(id, { metadata: { n: 2 } }) }).committed; // the run id is taken
    const ok2 = fx.storage.runs.create({ run: after, thread: thread(id, { metadata: { n: 3 } }) }).committed;
    const outcomes = await Promise.allSettled([blocker, ok1, duplicate, ok2]);
    expect(outcomes.map((o) => o.status)).toEqual(["fulfilled", "fulfilled", "rejected", "fulfilled"]);
    expect((await fx.storage.runs.list(id, { offset: 0, limit: 10 })).map((r) => r.run_id)).toEqual([first.run_id, before.run_id, after.run_id]);
    expect(await fx.storage.threads.get(id)).toMatchObject({ metadata: { n: 3 } });
  });

  it("checkpoints put in a batch read back whole, and a batch resends chunks another process removed", async () => {
    const id = nextId("t");
    const saver = (await fx.storage.checkpoints.open()).saver();
    // 200 messages: a chunked list (message-chunks.ts); each put adds one
    const all = Array.from({ length: 202 }, (_, i) => new HumanMessage({ content: `m${i}`, id: `m${i}` }));
    const messages = (n: number) => all.slice(0, n);
    const c1 = checkpoint({ messages: messages(200) }, { messages: 1 });
    await saver.put(cfg(id), c1, meta(0), { messages: 1 });
    await (saver as PostgresCheckpointSaver).flush(id); // (put resolves once issued)
    // another process removes the chunks: this saver still believes them stored
    await fx.storage.db.pool.query("DELETE FROM checkpoint_chunks WHERE thread_id = $1", [id]);
    const blocker = fx.storage.threads.save(thread(id)); // in flight: the two puts queue behind it and go as one batch
    const c2 = checkpoint({ messages: messages(201) }, { messages: 2 });
    const c3 = checkpoint({ messages: messages(202) }, { messages: 3 });
    const p2 = saver.put(cfg(id, c1.id), c2, meta(1), { messages: 2 });
    const p3 = saver.put(cfg(id, c2.id), c3, meta(2), { messages: 3 });
    await Promise.all([blocker, p2, p3]);
    const latest = await saver.getTuple(cfg(id));
    expect(latest?.checkpoint.id).toBe(c3.id);
    expect((latest?.checkpoint.channel_values.messages as BaseMessage[]).map((m) => m.id)).toEqual(all.map((m) => m.id));
    const second = (await saver.getTuple(cfg(id, c2.id)))?.checkpoint.channel_values.messages as BaseMessage[];
    expect(second.map((m) => m.id)).toEqual(all.slice(0, 201).map((m) => m.id));
    // the batch failed on the missing chunks and each put ran again alone, sending them
    expect((await fx.storage.db.pool.query("SELECT count(*)::int AS n FROM checkpoint_chunks WHERE thread_id = $1", [id])).rows[0].n).toBe(3);
  });
});

describe("group commit across threads (Postgres)", () => {
  /** how many transactions wrote these threads' rows */
  async function threadTransactions(ids: string[]): Promise<number> {
    const r = await fx.storage.db.pool.query<{ n: number }>("SELECT count(DISTINCT xmin::text)::int AS n FROM threads WHERE thread_id = ANY($1)", [ids]);
    return r.rows[0].n;
  }

  it("writes of several threads that wait for transactions in flight commit together, each with its own outcome", async () => {
    const ids = Array.from({ length: 20 }, () => nextId("t"));
    for (const id of ids) await fx.storage.threads.create(thread(id));
    await Promise.all(ids.map((id, i) => fx.storage.threads.save(thread(id, { metadata: { n: i } }))));
    // a few leave at once (GROUPS_IN_FLIGHT), the rest wait for them and go as one group (one
    // transaction per thread on its own: 20)
    expect(await threadTransactions(ids)).toBeLessThanOrEqual(6);
    for (const [i, id] of ids.entries()) expect(await fx.storage.threads.get(id)).toMatchObject({ metadata: { n: i } });
  });

  it("a write that fails in a group fails alone: the other threads' writes commit", async () => {
    const [a, b, c] = [nextId("t"), nextId("t"), nextId("t")];
    const fillers = Array.from({ length: 6 }, () => nextId("t"));
    for (const id of [a, b, c, ...fillers]) await fx.storage.threads.create(thread(id));
    const taken = run(b);
    await fx.storage.runs.create({ run: taken, thread: thread(b) }).committed;
    // in flight first, so that a, b and c wait and leave as one group
    const busy = fillers.map((id) => fx.storage.threads.save(thread(id, { status: "busy" })));
    const outcomes = await Promise.allSettled([
      fx.storage.threads.save(thread(a, { metadata: { n: 1 } })),
      fx.storage.runs.create({ run: taken, thread: thread(b, { metadata: { n: 2 } }) }).committed, // the run id is taken
      fx.storage.threads.save(thread(c, { metadata: { n: 3 } })),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    await Promise.all(busy);
    expect(await fx.storage.threads.get(a)).toMatchObject({ metadata: { n: 1 } });
    expect(await fx.storage.threads.get(b)).toMatchObject({ metadata: {} });
    expect(await fx.storage.threads.get(c)).toMatchObject({ metadata: { n: 3 } });
  });
});

describe("checkpoint writes resolve once issued (Postgres, issued-writes.ts)", () => {
  it("puts awaited one after another, as LangGraph chains them, leave together, and reads see them", async () => {
    const id = nextId("t");
    const saver = (await fx.storage.checkpoints.open()).saver() as PostgresCheckpointSaver;
    let parent: string | undefined;
    const ids: string[] = [];
    for (let step = 0; step < 4; step++) {
      const c = checkpoint({ foo: `v${step}` }, { foo: step + 1 });
      await saver.put(cfg(id, parent), c, meta(step), { foo: step + 1 });
      await saver.putWrites(cfg(id, c.id), [["foo", `w${step}`]], `task-${step}`);
      ids.push((parent = c.id));
    }
    // read-your-writes: the reads wait for the writes issued before them
    expect((await saver.getTuple(cfg(id)))?.checkpoint.id).toBe(ids[3]);
    expect((await saver.getTuple(cfg(id)))?.pendingWrites).toEqual([["task-3", "foo", "w3"]]);
    expect(await saver.hasCheckpoint(id, "", ids[2])).toBe(true);
    // on commit each put was a round trip of its own: 4 transactions (one per put; its writes with the next put)
    const r = await fx.storage.db.pool.query<{ n: number }>("SELECT count(DISTINCT xmin::text)::int AS n FROM checkpoints WHERE thread_id = $1", [id]);
    expect(r.rows[0].n).toBeLessThanOrEqual(2);
  });

  it("a write that failed after it resolved is reported once, by the thread's next read", async () => {
    const id = nextId("t");
    const saver = (await fx.storage.checkpoints.open()).saver() as PostgresCheckpointSaver;
    const c1 = checkpoint({ foo: "a" }, { foo: 1 });
    await saver.put(cfg(id), c1, meta(0), { foo: 1 });
    // a namespace PostgreSQL cannot store (a NUL character): the statement fails after put resolved
    const bad = checkpoint({ foo: "b" }, { foo: 2 });
    await saver.put({ configurable: { thread_id: id, checkpoint_ns: "x\u0000y", checkpoint_id: c1.id } }, bad, meta(1), { foo: 2 });
    await expect(saver.getTuple(cfg(id))).rejects.toThrow(/an earlier checkpoint write of thread/);
    expect((await saver.getTuple(cfg(id)))?.checkpoint.id).toBe(c1.id);
  });
});

describe("prepared statements' plans (Postgres)", () => {
  it("the actor shards' and webhook worker's sessions plan each prepared statement once; the HTTP thread's keep the server's choice", async () => {
    const mode = async (s: PostgresStorage) => (await s.db.pool.query<{ plan_cache_mode: string }>("SHOW plan_cache_mode")).rows[0].plan_cache_mode;
    expect(await mode(fx.storage)).toBe("auto");
    const worker = (await postgresAdapter({ dataDir: "unused", databaseUri: fx.uri, primary: false })) as PostgresStorage;
    try {
      expect(await mode(worker)).toBe("force_generic_plan");
    } finally {
      await worker.close();
    }
  });
});

describe("commit durability (Postgres)", () => {
  it("commits without waiting for the WAL flush by default, as LMDB commits without fsync; --sync-commits keeps the server's setting", async () => {
    const setting = async (s: PostgresStorage) => (await s.db.pool.query<{ synchronous_commit: string }>("SHOW synchronous_commit")).rows[0].synchronous_commit;
    expect(await setting(fx.storage)).toBe("off");
    const synced = await openPostgresStorage({ uri: fx.uri, schema: "troupe", maxConnections: 1, migrate: false, syncCommits: true });
    const plain = new PgClient({ connectionString: fx.uri });
    await plain.connect();
    try {
      // (the test server runs with synchronous_commit off: compare with what any session gets)
      expect(await setting(synced)).toBe((await plain.query<{ synchronous_commit: string }>("SHOW synchronous_commit")).rows[0].synchronous_commit);
    } finally {
      await plain.end();
      await synced.close();
    }
  });
});
