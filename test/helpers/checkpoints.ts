// Fixtures shared by the checkpointer tests of both backends (test/unit/checkpointer.test.ts on
// LMDB, test/checkpointer-postgres.test.ts): configs, checkpoints, metadata, and the scenario of a
// real LangGraph graph (time travel, updateState forks) any saver must keep apart.
import { AIMessage, HumanMessage, type BaseMessage } from "@langchain/core/messages";
import type { RunnableConfig } from "@langchain/core/runnables";
import { Annotation, END, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { emptyCheckpoint, uuid6, type BaseCheckpointSaver, type Checkpoint, type CheckpointMetadata } from "@langchain/langgraph-checkpoint";
import { expect } from "vitest";

export const cfg = (thread_id: string, checkpoint_id?: string, extra: Partial<RunnableConfig> = {}): RunnableConfig => ({
  ...extra,
  configurable: { thread_id, checkpoint_ns: "", ...(checkpoint_id ? { checkpoint_id } : {}) },
});

export function checkpoint(values: Record<string, unknown>, versions: Record<string, number>): Checkpoint {
  return { ...emptyCheckpoint(), id: uuid6(-1), channel_values: values, channel_versions: versions };
}

export function meta(step: number, extra: Record<string, unknown> = {}): CheckpointMetadata {
  return { source: "loop", step, parents: {}, ...extra };
}

/** Puts a root checkpoint as a child of `parent` and returns its id. */
export async function putChild(
  saver: BaseCheckpointSaver,
  thread: string,
  parent: string | undefined,
  values: Record<string, unknown>,
  versions: Record<string, number>,
  newVersions: Record<string, number>,
  metadata: CheckpointMetadata,
): Promise<string> {
  const result = await saver.put(cfg(thread, parent), checkpoint(values, versions), metadata, newVersions);
  return result.configurable?.checkpoint_id as string;
}

export function metaField(metadata: CheckpointMetadata | undefined, key: string): unknown {
  return (metadata as Record<string, unknown> | undefined)?.[key];
}

export async function collect<T>(iterable: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of iterable) out.push(item);
  return out;
}

/**
 * A real graph on `saver`: state persists across invocations, a run from an older checkpoint and
 * an updateState fork reuse the original branch's channel versions, and each branch keeps its values.
 */
export async function expectGraphBranchesKeptApart(saver: BaseCheckpointSaver): Promise<void> {
  const State = Annotation.Root({ ...MessagesAnnotation.spec, turns: Annotation<number>({ reducer: (a, b) => a + b, default: () => 0 }) });
  const graph = new StateGraph(State)
    .addNode("echo", (s: typeof State.State) => ({ messages: [new AIMessage(`echo ${String(s.messages.at(-1)?.content)}`)], turns: 1 }))
    .addEdge(START, "echo")
    .addEdge("echo", END)
    .compile({ checkpointer: saver });
  const config = { configurable: { thread_id: "g" } };
  const contents = (messages: BaseMessage[]) => messages.map((m) => m.content);
  await graph.invoke({ messages: [new HumanMessage("one")] }, config);
  const second = await graph.invoke({ messages: [new HumanMessage("two")] }, config);
  expect(contents(second.messages)).toEqual(["one", "echo one", "two", "echo two"]);
  expect(second.turns).toBe(2);

  const history = await collect(graph.getStateHistory(config));
  expect(history.map((s) => s.metadata?.step)).toEqual([4, 3, 2, 1, 0, -1]);

  // Time travel: run again from the state after the first turn. The new branch reuses the
  // channel versions of the original one; both branches must keep their own values.
  const afterFirst = history.find((s) => s.metadata?.step === 1);
  if (afterFirst === undefined) throw new Error("no step-1 state");
  const replay = await graph.invoke({ messages: [new HumanMessage("again")] }, afterFirst.config);
  expect(contents(replay.messages)).toEqual(["one", "echo one", "again", "echo again"]);
  expect(contents((await graph.getState(history[0].config)).values.messages)).toEqual(["one", "echo one", "two", "echo two"]);

  // updateState forks too; the latest state of the thread is then the fork.
  const forked = await graph.updateState(afterFirst.config, { messages: [new HumanMessage("fork")] });
  expect(contents((await graph.getState(forked)).values.messages)).toEqual(["one", "echo one", "fork"]);
  expect(contents((await graph.getState(config)).values.messages)).toEqual(["one", "echo one", "fork"]);
  expect((await graph.getState(history[0].config)).values.turns).toBe(2);
}

/** What a scenario may ask of a saver beyond BaseCheckpointSaver (both backends' savers have it). */
export type ThreadOpsSaver = BaseCheckpointSaver & {
  copyThread(from: string, to: string): Promise<void>;
  deleteThread(threadId: string): Promise<void>;
  deleteCheckpointsOfRun(threadId: string, runId: string): Promise<number>;
  pruneToLatest(threadId: string): Promise<number>;
  hasCheckpointOfRun(threadId: string, runId: string): Promise<boolean>;
  hasCheckpoint(threadId: string, ns: string, checkpointId: string): Promise<boolean>;
};

/** What is stored for a thread, read from the backend itself (not through the saver). */
export interface StoredView {
  /** `channel@version` of each stored value, sorted (one per stored blob) */
  blobs(thread: string): Promise<string[]>;
  writes(thread: string): Promise<number>;
  checkpoints(thread: string): Promise<number>;
}

export async function expectCopyThread(saver: ThreadOpsSaver, stored: StoredView): Promise<void> {
  const c1 = await putChild(saver, "src", undefined, { foo: "a" }, { foo: 1 }, { foo: 1 }, meta(0, { thread_id: "src", graph_id: "g" }));
  const c2 = await putChild(saver, "src", c1, { foo: "a", bar: 2 }, { foo: 1, bar: 1 }, { bar: 1 }, meta(1, { thread_id: "src" }));
  await saver.putWrites(cfg("src", c2), [["foo", "next"]], "task-1", "~path");
  await saver.copyThread("src", "dst");

  const copied = await collect(saver.list(cfg("dst")));
  const original = await collect(saver.list(cfg("src")));
  expect(copied.map((t) => t.checkpoint.id)).toEqual([c2, c1]);
  expect(copied.map((t) => metaField(t.metadata, "thread_id"))).toEqual(["dst", "dst"]);
  expect(copied.map((t) => metaField(t.metadata, "graph_id"))).toEqual([undefined, "g"]);
  expect(copied[0].checkpoint).toEqual(original[0].checkpoint);
  expect(copied[0].checkpoint.channel_values).toEqual({ foo: "a", bar: 2 });
  expect(copied[0].pendingWrites).toEqual([["task-1", "foo", "next"]]);
  expect(copied[0].parentConfig?.configurable).toEqual({ thread_id: "dst", checkpoint_ns: "", checkpoint_id: c1 });
  // metadata filters see the rewritten thread_id
  expect((await collect(saver.list(cfg("dst"), { filter: { thread_id: "dst" } }))).map((t) => t.checkpoint.id)).toEqual([c2, c1]);
  // the source is untouched and the copy is independent of it
  expect(original.map((t) => metaField(t.metadata, "thread_id"))).toEqual(["src", "src"]);
  await saver.deleteThread("src");
  expect(await saver.getTuple(cfg("src"))).toBeUndefined();
  expect([await stored.checkpoints("src"), await stored.writes("src"), await stored.blobs("src")]).toEqual([0, 0, []]);
  expect((await saver.getTuple(cfg("dst")))?.checkpoint.channel_values).toEqual({ foo: "a", bar: 2 });
}

/** Rollback of a run; returns the checkpoint put after it (a new run from c1 reusing version 2). */
export async function expectRollbackOfRun(saver: ThreadOpsSaver, stored: StoredView): Promise<string> {
  const c1 = await putChild(saver, "t", undefined, { foo: "a" }, { foo: 1 }, { foo: 1 }, meta(0, { run_id: "run-1" }));
  await saver.putWrites(cfg("t", c1), [["foo", "kept"]], "task-1");
  await saver.putWrites(cfg("t", c1, { metadata: { run_id: "run-2" } }), [["__resume__", "yes"]], "resume-task");
  const c2 = await putChild(saver, "t", c1, { foo: "b" }, { foo: 2 }, { foo: 2 }, meta(1, { run_id: "run-2" }));
  const c3 = await putChild(saver, "t", c2, { foo: "c" }, { foo: 3 }, { foo: 3 }, meta(2, { run_id: "run-2" }));
  await saver.putWrites(cfg("t", c3), [["foo", "x"]], "task-3");
  expect(await saver.hasCheckpointOfRun("t", "run-2")).toBe(true);

  expect(await saver.deleteCheckpointsOfRun("t", "run-2")).toBe(2);
  expect(await saver.hasCheckpointOfRun("t", "run-2")).toBe(false);
  const latest = await saver.getTuple(cfg("t"));
  expect(latest?.checkpoint.id).toBe(c1);
  expect(latest?.pendingWrites).toEqual([["task-1", "foo", "kept"]]);
  expect(await saver.getTuple(cfg("t", c2))).toBeUndefined();
  expect(await saver.hasCheckpoint("t", "", c2)).toBe(false);
  expect(await stored.writes("t")).toBe(1);
  expect(await stored.blobs("t")).toEqual(["foo@1"]);

  // A new run from c1 reuses version 2 without colliding with the removed branch.
  const next = await putChild(saver, "t", c1, { foo: "z" }, { foo: 2 }, { foo: 2 }, meta(1, { run_id: "run-3" }));
  expect((await saver.getTuple(cfg("t")))?.checkpoint.channel_values).toEqual({ foo: "z" });
  expect(await saver.deleteCheckpointsOfRun("t", "no-such-run")).toBe(0);
  return next;
}

export async function expectRollbackKeepsNamedValues(saver: ThreadOpsSaver, stored: StoredView): Promise<void> {
  // run-1 sets foo and bar; run-2's checkpoints change only foo, so they name run-1's bar value.
  const c1 = await putChild(saver, "t", undefined, { foo: "a", bar: "from run-1" }, { foo: 1, bar: 1 }, { foo: 1, bar: 1 }, meta(0, { run_id: "run-1" }));
  const c2 = await putChild(saver, "t", c1, { foo: "b", bar: "from run-1" }, { foo: 2, bar: 1 }, { foo: 2 }, meta(1, { run_id: "run-2" }));
  expect(await saver.deleteCheckpointsOfRun("t", "run-1")).toBe(1);
  expect((await saver.getTuple(cfg("t", c2)))?.checkpoint.channel_values).toEqual({ foo: "b", bar: "from run-1" });
  expect(await stored.blobs("t")).toEqual(["bar@1", "foo@2"]);
  // once nothing names it, it goes
  expect(await saver.deleteCheckpointsOfRun("t", "run-2")).toBe(1);
  expect(await stored.blobs("t")).toEqual([]);
}

export async function expectPruneToLatest(saver: ThreadOpsSaver, stored: StoredView): Promise<void> {
  const big = ["a", "b", "c"];
  const c1 = await putChild(saver, "t", undefined, { messages: big, step: 1 }, { messages: 1, step: 1 }, { messages: 1, step: 1 }, meta(0));
  const c2 = await putChild(saver, "t", c1, { messages: [...big, "d"], step: 2 }, { messages: 2, step: 2 }, { messages: 2, step: 2 }, meta(1));
  const c3 = await putChild(saver, "t", c2, { messages: [...big, "d"], step: 3 }, { messages: 2, step: 3 }, { step: 3 }, meta(2));
  await saver.putWrites(cfg("t", c2), [["step", 9]], "task-old");
  await saver.putWrites(cfg("t", c3), [["step", 4]], "task-new");
  const sub = await saver.put({ configurable: { thread_id: "t", checkpoint_ns: "child:1" } }, checkpoint({ x: 1 }, { x: 1 }), meta(0), { x: 1 });
  await putChild(saver, "other", undefined, { step: 1 }, { step: 1 }, { step: 1 }, meta(0));

  expect(await saver.pruneToLatest("t")).toBe(2);
  const latest = await saver.getTuple(cfg("t"));
  expect(latest?.config.configurable?.checkpoint_id).toBe(c3);
  expect(latest?.checkpoint.channel_values).toEqual({ messages: [...big, "d"], step: 3 }); // messages@2 came from c2
  expect(latest?.parentConfig).toBeUndefined();
  expect(latest?.pendingWrites).toEqual([["task-new", "step", 4]]);
  expect(await saver.getTuple(cfg("t", c1))).toBeUndefined();
  expect(await saver.getTuple(cfg("t", c2))).toBeUndefined();
  expect((await saver.getTuple(sub))?.checkpoint.channel_values).toEqual({ x: 1 });
  // values: messages@2, step@3 (root) and x@1 (child); writes: only c3's
  expect(await stored.blobs("t")).toEqual(["messages@2", "step@3", "x@1"]);
  expect(await stored.writes("t")).toBe(1);
  expect(await stored.checkpoints("other")).toBe(1);
  expect(await saver.pruneToLatest("t")).toBe(0);
}

export async function expectUnchangedChannelsRebuilt(saver: BaseCheckpointSaver, stored: Pick<StoredView, "blobs">): Promise<void> {
  const big = Array.from({ length: 50 }, (_, i) => `message ${i}`);
  const c1 = await putChild(saver, "t", undefined, { messages: big, step: 1 }, { messages: 1, step: 1 }, { messages: 1, step: 1 }, meta(0));
  const c2 = await putChild(saver, "t", c1, { messages: big, step: 2 }, { messages: 1, step: 2 }, { step: 2 }, meta(1));
  const c3 = await putChild(saver, "t", c2, { messages: big, step: 3 }, { messages: 1, step: 3 }, { step: 3 }, meta(2));
  expect((await saver.getTuple(cfg("t", c3)))?.checkpoint.channel_values).toEqual({ messages: big, step: 3 });
  expect((await saver.getTuple(cfg("t", c1)))?.checkpoint.channel_values).toEqual({ messages: big, step: 1 });
  // messages@1 once, step@1..3
  expect(await stored.blobs("t")).toEqual(["messages@1", "step@1", "step@2", "step@3"]);
}

export async function expectForkKeepsBranches(saver: BaseCheckpointSaver): Promise<void> {
  const c1 = await putChild(saver, "t", undefined, { foo: "a" }, { foo: 1 }, { foo: 1 }, meta(0));
  const c2 = await putChild(saver, "t", c1, { foo: "b" }, { foo: 2 }, { foo: 2 }, meta(1));
  const fork = await putChild(saver, "t", c1, { foo: "c" }, { foo: 2 }, { foo: 2 }, meta(1, { source: "update" }));
  const forkChild = await putChild(saver, "t", fork, { foo: "c", bar: 1 }, { foo: 2, bar: 1 }, { bar: 1 }, meta(2));
  expect((await saver.getTuple(cfg("t", c2)))?.checkpoint.channel_values).toEqual({ foo: "b" });
  expect((await saver.getTuple(cfg("t", fork)))?.checkpoint.channel_values).toEqual({ foo: "c" });
  expect((await saver.getTuple(cfg("t", forkChild)))?.checkpoint.channel_values).toEqual({ foo: "c", bar: 1 });
}

export async function expectMessageClassesRoundTrip(saver: BaseCheckpointSaver): Promise<void> {
  const messages = [new HumanMessage({ content: "hi", id: "h1" }), new AIMessage({ content: "hello", id: "a1" })];
  const id = await putChild(saver, "t", undefined, { messages }, { messages: 1 }, { messages: 1 }, meta(0));
  await saver.putWrites(cfg("t", id), [["messages", [new AIMessage("pending")]]], "task-1");
  const tuple = await saver.getTuple(cfg("t"));
  const loaded = tuple?.checkpoint.channel_values.messages as BaseMessage[];
  expect(loaded[0]).toBeInstanceOf(HumanMessage);
  expect(loaded[1]).toBeInstanceOf(AIMessage);
  expect(loaded.map((m) => m.content)).toEqual(["hi", "hello"]);
  const [[, , pending]] = tuple?.pendingWrites ?? [];
  expect((pending as BaseMessage[])[0]).toBeInstanceOf(AIMessage);
}
