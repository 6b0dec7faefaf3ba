// PostgresCheckpointSaver beyond the conformance suite, on a real PostgreSQL: the thread operations
// the actors use (copy, rollback by run, prune, metadata patch, write barrier), fork-safe channel
// values, long message lists stored as shared chunks, and a real LangGraph graph on top.
import { AIMessage, HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { ERROR } from "@langchain/langgraph-checkpoint";
import { PostgresCheckpointSaver } from "../src/storage/postgres/checkpointer.ts";
import { migrate } from "../src/storage/postgres/migrations.ts";
import { openPostgres, type PostgresDb } from "../src/storage/postgres/pool.ts";
import {
  cfg,
  collect,
  expectCopyThread,
  expectForkKeepsBranches,
  expectGraphBranchesKeptApart,
  expectMessageClassesRoundTrip,
  expectPruneToLatest,
  expectRollbackKeepsNamedValues,
  expectRollbackOfRun,
  expectUnchangedChannelsRebuilt,
  meta,
  putChild as putChildOn,
  type StoredView,
} from "./helpers/checkpoints.ts";
import { usePostgresDatabase } from "./helpers/postgres.ts";

type ChildArgs = Parameters<typeof putChildOn> extends [unknown, ...infer Rest] ? Rest : never;

const database = usePostgresDatabase();
let db: PostgresDb;
let saver: PostgresCheckpointSaver;

beforeAll(async () => {
  db = openPostgres({ uri: database.uri, schema: "troupe", maxConnections: 4 });
  await migrate(db);
});

afterAll(async () => {
  await db.close();
});

beforeEach(async () => {
  await db.pool.query("TRUNCATE checkpoints, checkpoint_blobs, checkpoint_chunks, checkpoint_writes");
  saver = new PostgresCheckpointSaver(db);
});

const putChild = (...args: ChildArgs) => putChildOn(saver, ...args);

/** rows as committed: puts resolve once issued (issued-writes.ts), so this waits for the saver's writes first */
async function count(table: string, thread: string): Promise<number> {
  await saver.flush(thread);
  return countNow(table, thread);
}

async function countNow(table: string, thread: string): Promise<number> {
  const result = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table} WHERE thread_id = $1`, [thread]);
  return result.rows[0].n;
}

async function blobKeys(thread: string): Promise<string[]> {
  await saver.flush(thread);
  const result = await db.pool.query<{ channel: string; version: string }>(
    "SELECT channel, version FROM checkpoint_blobs WHERE thread_id = $1 ORDER BY channel, version",
    [thread],
  );
  return result.rows.map((r) => `${r.channel}@${r.version}`);
}

const stored: StoredView = {
  blobs: blobKeys,
  writes: (thread) => count("checkpoint_writes", thread),
  checkpoints: (thread) => count("checkpoints", thread),
};

describe("channel values (the same scenarios as on LMDB)", () => {
  it("rebuilds unchanged channels from the parent's refs and stores each changed channel once", async () => {
    await expectUnchangedChannelsRebuilt(saver, stored);
  });

  it("keeps each branch's value when a fork reuses a channel version", async () => {
    await expectForkKeepsBranches(saver);
  });

  it("round-trips LangChain message classes, in values and pending writes", async () => {
    await expectMessageClassesRoundTrip(saver);
  });
});

describe("long message lists", () => {
  const conversation = (n: number) =>
    Array.from({ length: n }, (_, i) =>
      i % 2 === 0 ? new HumanMessage({ content: `question ${i}`, id: `m${i}` }) : new AIMessage({ content: `answer ${i}`, id: `m${i}` }),
    );

  it("are stored as shared chunks plus a tail: each step writes only what is new, and reads back whole", async () => {
    const all = conversation(300);
    let parent: string | undefined;
    const ids: string[] = [];
    for (let step = 1; step <= 5; step++) {
      const list = all.slice(0, 200 + step * 20);
      parent = await putChild("t", parent, { messages: list }, { messages: step }, { messages: step }, meta(step));
      ids.push(parent);
    }
    // 300 messages: 4 full chunks of 64, shared by every version that contains them
    expect(await count("checkpoint_chunks", "t")).toBe(4);
    const latest = (await saver.getTuple(cfg("t")))?.checkpoint.channel_values.messages as BaseMessage[];
    expect(latest.map((m) => m.id)).toEqual(all.map((m) => m.id));
    expect(latest[299]).toBeInstanceOf(AIMessage);
    const first = (await saver.getTuple(cfg("t", ids[0])))?.checkpoint.channel_values.messages as BaseMessage[];
    expect(first.map((m) => m.id)).toEqual(all.slice(0, 220).map((m) => m.id));
  });

  it("are rewritten whole when chunks this saver believed stored were removed by someone else", async () => {
    const list = conversation(130);
    const c1 = await putChild("t", undefined, { messages: list.slice(0, 129) }, { messages: 1 }, { messages: 1 }, meta(0));
    // another process (another saver on the same database) removes the thread meanwhile
    await saver.flush("t"); // (the other saver's writes are not ordered after this one's)
    await new PostgresCheckpointSaver(db).deleteThread("t");
    const c2 = await putChild("t", c1, { messages: list }, { messages: 2 }, { messages: 2 }, meta(1));
    expect(await count("checkpoint_chunks", "t")).toBe(2);
    const read = (await saver.getTuple(cfg("t", c2)))?.checkpoint.channel_values.messages as BaseMessage[];
    expect(read.map((m) => m.id)).toEqual(list.map((m) => m.id));
  });

  it("are reported damaged, not shortened, when a chunk is missing", async () => {
    await putChild("t", undefined, { messages: conversation(140) }, { messages: 1 }, { messages: 1 }, meta(0));
    await saver.flush("t");
    await db.pool.query("DELETE FROM checkpoint_chunks WHERE chunk_id = (SELECT min(chunk_id) FROM checkpoint_chunks)");
    await expect(saver.getTuple(cfg("t"))).rejects.toThrow(/damaged/);
  });
});

describe("putWrites", () => {
  it("keeps the first regular write of a (task, idx) and lets special writes overwrite", async () => {
    const id = await putChild("t", undefined, {}, {}, {}, meta(0));
    await saver.putWrites(cfg("t", id), [["a", 1]], "task");
    await saver.putWrites(cfg("t", id), [["a", 2]], "task");
    await saver.putWrites(cfg("t", id), [[ERROR, "first"]], "task");
    await saver.putWrites(
      cfg("t", id),
      [
        [ERROR, "second"],
        [ERROR, "third"],
      ],
      "task",
    );
    expect((await saver.getTuple(cfg("t", id)))?.pendingWrites).toEqual([
      ["task", ERROR, "third"],
      ["task", "a", 1],
    ]);
  });
});

describe("thread operations (the same scenarios as on LMDB)", () => {
  it("copyThread duplicates checkpoints, writes and values under the new id and rewrites metadata.thread_id", async () => {
    await expectCopyThread(saver, stored);
  });

  it("deleteCheckpointsOfRun removes the run's checkpoints, their writes and values, and the run's writes elsewhere", async () => {
    await expectRollbackOfRun(saver, stored);
  });

  it("deleteCheckpointsOfRun keeps the values of a deleted older run that later checkpoints still name", async () => {
    await expectRollbackKeepsNamedValues(saver, stored);
  });

  it("pruneToLatest keeps the newest checkpoint per namespace with its writes and values, and removes the rest", async () => {
    await expectPruneToLatest(saver, stored);
  });

  it("patchMetadata merges into the latest root checkpoint's metadata (or a named one), and filters see it", async () => {
    const c1 = await putChild("t", undefined, {}, {}, {}, meta(0, { tag: "old" }));
    const c2 = await putChild("t", c1, {}, {}, {}, meta(1));
    expect(await saver.patchMetadata("t", { tag: "new" })).toBe(true);
    expect(await saver.patchMetadata("t", { extra: 1 }, c1)).toBe(true);
    expect(await saver.patchMetadata("none", { tag: "x" })).toBe(false);
    expect((await saver.getTuple(cfg("t", c2)))?.metadata).toMatchObject({ step: 1, tag: "new" });
    expect((await saver.getTuple(cfg("t", c1)))?.metadata).toMatchObject({ tag: "old", extra: 1 });
    expect((await collect(saver.list(cfg("t"), { filter: { tag: "new" } }))).map((t) => t.checkpoint.id)).toEqual([c2]);
  });

  it("list filters compare whole values, also for metadata the jsonb index cannot hold", async () => {
    const plain = await putChild("t", undefined, {}, {}, {}, meta(0, { tags: ["a", "b"], who: "x" }));
    const nul = await putChild("t", plain, {}, {}, {}, meta(1, { who: "x\u0000y" }));
    expect(await collect(saver.list(cfg("t"), { filter: { tags: ["a"] } }))).toEqual([]); // containment alone would match
    expect((await collect(saver.list(cfg("t"), { filter: { tags: ["a", "b"] } }))).map((t) => t.checkpoint.id)).toEqual([plain]);
    expect((await collect(saver.list(cfg("t"), { filter: { who: "x\u0000y" } }))).map((t) => t.checkpoint.id)).toEqual([nul]);
    expect((await collect(saver.list(cfg("t"), { filter: { step: 1 }, limit: 1 }))).map((t) => t.checkpoint.id)).toEqual([nul]);
  });

  it("holdWritesUntil: the thread's writes reach the database only after the barrier settles", async () => {
    const c1 = await putChild("t", undefined, { foo: "a" }, { foo: 1 }, { foo: 1 }, meta(0));
    let release!: () => void;
    saver.holdWritesUntil("t", new Promise<void>((resolve) => (release = resolve)));
    const held = putChild("t", c1, { foo: "b" }, { foo: 2 }, { foo: 2 }, meta(1));
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await countNow("checkpoints", "t")).toBe(1);
    await putChild("other", undefined, {}, {}, {}, meta(0)); // other threads are not held
    release();
    await held;
    expect(await count("checkpoints", "t")).toBe(2);
  });
});

describe("with a real LangGraph graph", () => {
  it("persists state across invocations, keeps branches apart on time travel and updateState forks", async () => {
    await expectGraphBranchesKeptApart(saver);
  });
});
