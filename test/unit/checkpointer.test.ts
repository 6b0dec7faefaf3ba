// LmdbCheckpointSaver beyond the conformance suite: Troupe helpers (copyThread, rollback by run id),
// durability across reopening the env, fork-safe channel blobs, and a real LangGraph graph on top.
import { AIMessage, HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { ERROR } from "@langchain/langgraph-checkpoint";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { LmdbCheckpointSaver } from "../../src/storage/checkpoints/lmdb-saver.ts";
import { openStorage, type Storage } from "../../src/storage/env.ts";
import {
  cfg,
  checkpoint,
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
} from "../helpers/checkpoints.ts";

type ChildArgs = Parameters<typeof putChildOn> extends [unknown, ...infer Rest] ? Rest : never;

let dir: string;
let storage: Storage;
let saver: LmdbCheckpointSaver;

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "troupe-checkpointer-"));
  storage = openStorage(dir);
  saver = new LmdbCheckpointSaver(storage);
});

afterEach(async () => {
  await storage.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Puts a checkpoint as a child of `parent` and returns its id. */
const putChild = (...args: ChildArgs) => putChildOn(saver, ...args);

const keysOf = (db: { getKeys(o: object): Iterable<unknown> }, thread: string): unknown[] =>
  Array.from(db.getKeys({ start: [thread], end: [thread, new Uint8Array([0xff])] }));

/** What LMDB holds for a thread, read after every queued write committed. */
const stored: StoredView = {
  async blobs(thread) {
    await saver.flush();
    return (keysOf(storage.blobs, thread) as [string, string, string, number, string][]).map((k) => `${k[2]}@${k[3]}`).sort();
  },
  async writes(thread) {
    await saver.flush();
    return keysOf(storage.writes, thread).length;
  },
  async checkpoints(thread) {
    await saver.flush();
    return keysOf(storage.checkpoints, thread).length;
  },
};

describe("channel blobs", () => {
  it("rebuilds unchanged channels from ancestors and stores each changed channel once", async () => {
    await expectUnchangedChannelsRebuilt(saver, stored);
  });

  it("keeps each branch's value when a fork reuses a channel version", async () => {
    await expectForkKeepsBranches(saver);
  });

  it("keeps each branch's value when a fork reuses a version another branch has only queued", async () => {
    const c1 = await putChild("t", undefined, { foo: "a" }, { foo: 1 }, { foo: 1 }, meta(0));
    await saver.flush(); // c1 committed: a fork of it knows its parent's tags without waiting
    const c2 = await putChild("t", c1, { foo: "b" }, { foo: 2 }, { foo: 2 }, meta(1)); // queued, not committed
    const fork = await putChild("t", c1, { foo: "c" }, { foo: 2 }, { foo: 2 }, meta(1, { source: "update" }));
    await saver.flush();
    expect((await saver.getTuple(cfg("t", c2)))?.checkpoint.channel_values).toEqual({ foo: "b" });
    expect((await saver.getTuple(cfg("t", fork)))?.checkpoint.channel_values).toEqual({ foo: "c" });
  });

  it("round-trips LangChain message classes", async () => {
    await expectMessageClassesRoundTrip(saver);
  });
});

describe("putWrites", () => {
  it("keeps the first regular write of a (task, idx) and lets special writes overwrite", async () => {
    const id = await putChild("t", undefined, {}, {}, {}, meta(0));
    await saver.putWrites(cfg("t", id), [["a", 1]], "task");
    await saver.putWrites(cfg("t", id), [["a", 2]], "task");
    await saver.putWrites(cfg("t", id), [[ERROR, "first"]], "task");
    await saver.putWrites(cfg("t", id), [[ERROR, "second"]], "task");
    expect((await saver.getTuple(cfg("t", id)))?.pendingWrites).toEqual([
      ["task", ERROR, "second"],
      ["task", "a", 1],
    ]);
    // what LMDB holds (the writes above were decided against the pending checkpoint), then writes
    // to the committed checkpoint (no pending view: conditional puts)
    await saver.flush("t");
    const stored = async () => (await new LmdbCheckpointSaver(storage).getTuple(cfg("t", id)))?.pendingWrites;
    expect(await stored()).toEqual([
      ["task", ERROR, "second"],
      ["task", "a", 1],
    ]);
    await saver.putWrites(
      cfg("t", id),
      [
        ["a", 3],
        ["b", 4],
      ],
      "task",
    );
    await saver.putWrites(cfg("t", id), [[ERROR, "third"]], "task");
    await saver.flush("t");
    expect(await stored()).toEqual([
      ["task", ERROR, "third"],
      ["task", "a", 1],
      ["task", "b", 4],
    ]);
  });
});

describe("thread operations (the same scenarios as on Postgres)", () => {
  it("copyThread duplicates checkpoints, writes and values under the new id and rewrites metadata.thread_id", async () => {
    await expectCopyThread(saver, stored);
  });

  it("deleteCheckpointsOfRun removes the run's checkpoints, their writes and values, and the run's writes elsewhere", async () => {
    const next = await expectRollbackOfRun(saver, stored);
    // the branch's version 2 went with it: the new run's value needed no fork tag
    expect(storage.checkpoints.get(["t", "", next])?.tags).toBeUndefined();
  });

  it("deleteCheckpointsOfRun keeps the values of a deleted older run that later checkpoints still name", async () => {
    await expectRollbackKeepsNamedValues(saver, stored);
  });

  it("pruneToLatest keeps the newest checkpoint per namespace with its writes and values, and removes the rest", async () => {
    await expectPruneToLatest(saver, stored);
  });
});

describe("queued writes", () => {
  it("serves reads of a thread after its queued writes commit (read-your-writes)", async () => {
    // put resolves once the transaction is queued; every read waits for the thread's queue
    const c1 = await putChild("t", undefined, { step: 1 }, { step: 1 }, { step: 1 }, meta(0));
    const puts = [2, 3, 4].map((step) => saver.put(cfg("t", c1), checkpoint({ step }, { step }), meta(step), { step }));
    await Promise.all(puts);
    const latest = await saver.getTuple(cfg("t"));
    expect(latest?.checkpoint.channel_values).toEqual({ step: 4 });
    const listed = [];
    for await (const tuple of saver.list(cfg("t"))) listed.push(tuple.checkpoint.channel_values.step);
    expect(listed).toEqual([4, 3, 2, 1]);
    await saver.flush();
    expect(keysOf(storage.checkpoints, "t")).toHaveLength(4);
  });

  it("reports a failed queued write on the next read of that thread only, and keeps other threads' writes", async () => {
    const tooLong = "x".repeat(4000); // longer than LMDB's maximum key size: the transaction fails
    const before = saver.put(cfg("a"), checkpoint({ step: 1 }, { step: 1 }), meta(0), { step: 1 });
    const failing = saver.put(cfg(tooLong), checkpoint({ step: 1 }, { step: 1 }), meta(0), { step: 1 });
    const after = saver.put(cfg("b"), checkpoint({ step: 2 }, { step: 1 }), meta(0), { step: 1 });
    await Promise.all([before, failing, after]);
    await expect(saver.getTuple(cfg(tooLong))).rejects.toThrow(/earlier checkpoint write of thread x+ failed/);
    await expect(saver.flush(tooLong)).resolves.toBeUndefined(); // reported once
    expect((await saver.getTuple(cfg("a")))?.checkpoint.channel_values).toEqual({ step: 1 });
    expect((await saver.getTuple(cfg("b")))?.checkpoint.channel_values).toEqual({ step: 2 });
  });
});

describe("reads of the latest checkpoint while its write is queued", () => {
  const longList = (tag: string): BaseMessage[] =>
    Array.from({ length: 20 }, (_, i) => new AIMessage({ content: `${tag} ${i} ${"x".repeat(300)}`, id: `${tag}${i}` }));

  /**
   * Reads the thread's latest checkpoint before its queued writes commit, then again after the
   * commit: both must be the same tuple, and the first must not have waited for the commit.
   */
  async function expectPendingReadAsCommitted(thread: string, checkpointId?: string): Promise<void> {
    let committed = false;
    void saver.flush(thread).then(() => (committed = true));
    const pending = await saver.getTuple(cfg(thread, checkpointId));
    expect(committed).toBe(false);
    await saver.flush(thread);
    expect(await saver.getTuple(cfg(thread, checkpointId))).toEqual(pending);
  }

  it("answers from the pending puts and writes exactly as after the commit, without waiting for it", async () => {
    const messages = longList("m");
    // a chain of puts on one thread, none committed in between: unchanged channels come from the parent put
    const c1 = await putChild(
      "p",
      undefined,
      { messages, foo: "a", small: [1, 2] },
      { messages: 1, foo: 1, small: 1 },
      { messages: 1, foo: 1, small: 1 },
      meta(-1, { source: "input" }),
    );
    await saver.putWrites(
      cfg("p", c1),
      [
        ["foo", "first"],
        ["foo", "second"],
      ],
      "task-1",
    );
    await saver.putWrites(cfg("p", c1), [["foo", "ignored: a regular write is first-wins"]], "task-1");
    await saver.putWrites(cfg("p", c1), [[ERROR, { message: "one" }]], "task-2");
    await saver.putWrites(cfg("p", c1), [[ERROR, { message: "two: special writes overwrite" }]], "task-2");
    await expectPendingReadAsCommitted("p");
    const c2 = await putChild("p", c1, { messages, foo: "b", small: [1, 2] }, { messages: 1, foo: 2, small: 1 }, { foo: 2 }, meta(0, { run_id: "r1" }));
    const c3 = await putChild(
      "p",
      c2,
      { messages: [...messages, new HumanMessage({ content: "more", id: "h1" })], foo: "b", small: [1, 2] },
      { messages: 2, foo: 2, small: 1 },
      { messages: 2 },
      meta(1, { run_id: "r1" }),
    );
    await saver.putWrites(cfg("p", c3), [["messages", [new AIMessage({ content: "pending", id: "a1" })]]], "task-3");
    await expectPendingReadAsCommitted("p", c3); // by its id: the same as the latest
    // after a commit: unchanged channels are read from the committed blobs (the cache's copy of messages)
    const c4 = await putChild(
      "p",
      c3,
      { messages: [...messages, new HumanMessage({ content: "more", id: "h1" })], foo: "c", small: [1, 2] },
      { messages: 2, foo: 3, small: 1 },
      { foo: 3 },
      meta(2),
    );
    await expectPendingReadAsCommitted("p");
    const read = (await saver.getTuple(cfg("p")))!;
    expect(read.checkpoint.id).toBe(c4);
    expect(read.checkpoint.channel_values.messages).toHaveLength(21);
    expect(read.parentConfig?.configurable?.checkpoint_id).toBe(c3);
  });

  it("keeps a fork's values (a version reused on another branch) and a new version without a value", async () => {
    const c1 = await putChild("f", undefined, { foo: "a" }, { foo: 1 }, { foo: 1 }, meta(0));
    const c2 = await putChild("f", c1, { foo: "b" }, { foo: 2 }, { foo: 2 }, meta(1));
    await saver.flush();
    // a fork of c1 writes foo@2 again with another value, and gone@1 with none
    const fork = await putChild("f", c1, { foo: "c" }, { foo: 2, gone: 1 }, { foo: 2, gone: 1 }, meta(1, { source: "update" }));
    await expectPendingReadAsCommitted("f");
    const child = await putChild("f", fork, { foo: "c", bar: 1 }, { foo: 2, gone: 1, bar: 1 }, { bar: 1 }, meta(2));
    await expectPendingReadAsCommitted("f");
    expect((await saver.getTuple(cfg("f", child)))?.checkpoint.channel_values).toEqual({ foo: "c", bar: 1 });
    expect((await saver.getTuple(cfg("f", c2)))?.checkpoint.channel_values).toEqual({ foo: "b" });
  });

  it("is not used for a put older than the thread's latest, nor after other writes to the thread", async () => {
    const older = checkpoint({ step: 0 }, { step: 1 }); // its id is made first: it sorts before c1
    const c1 = await putChild("o", undefined, { step: 1 }, { step: 1 }, { step: 1 }, meta(0));
    await saver.put(cfg("o"), older, meta(0), { step: 1 });
    expect((await saver.getTuple(cfg("o")))?.checkpoint.id).toBe(c1);
    const c2 = await putChild("o", c1, { step: 2 }, { step: 2 }, { step: 2 }, meta(1, { run_id: "gone" }));
    expect(await saver.deleteCheckpointsOfRun("o", "gone")).toBe(1);
    expect((await saver.getTuple(cfg("o")))?.checkpoint.id).not.toBe(c2);
    const c3 = await putChild("o", c1, { step: 3 }, { step: 3 }, { step: 3 }, meta(1));
    await saver.patchMetadata("o", { patched: true });
    expect((await saver.getTuple(cfg("o")))?.metadata).toMatchObject({ patched: true });
    await putChild("o", c3, { step: 4 }, { step: 4 }, { step: 4 }, meta(2));
    await saver.deleteThread("o");
    expect(await saver.getTuple(cfg("o"))).toBeUndefined();
  });
});

describe("durability", () => {
  it("keeps checkpoints, writes and values across closing and reopening the env", async () => {
    const c1 = await putChild("t", undefined, { foo: "a" }, { foo: 1 }, { foo: 1 }, meta(0));
    const c2 = await putChild("t", c1, { foo: "a", bar: [1, 2] }, { foo: 1, bar: 1 }, { bar: 1 }, meta(1, { run_id: "r" }));
    await saver.putWrites(cfg("t", c2), [["foo", "w"]], "task");
    const before = await saver.getTuple(cfg("t"));
    await storage.close();

    storage = openStorage(dir);
    saver = new LmdbCheckpointSaver(storage);
    const after = await saver.getTuple(cfg("t"));
    expect(after?.checkpoint.id).toBe(c2);
    expect(after).toEqual(before);
    expect(after?.checkpoint.channel_values).toEqual({ foo: "a", bar: [1, 2] });
    expect((await collect(saver.list(cfg("t"), { filter: { run_id: "r" } }))).map((t) => t.checkpoint.id)).toEqual([c2]);
  });
});

describe("with a real LangGraph graph", () => {
  it("persists state across invocations, keeps branches apart on time travel and updateState forks", async () => {
    await expectGraphBranchesKeptApart(saver);
  });
});
