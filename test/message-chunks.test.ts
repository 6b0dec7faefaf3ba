// Long message lists stored as shared chunks (storage/checkpoints/message-chunks.ts): the reassembled bytes are
// the serde's, and across runs, forks, rollbacks, copies, prunes and deletes every checkpoint of a
// long thread still reads back (through a saver with an empty cache), every chunk a blob names
// exists, and no chunk outlives the blobs that named it.
import { AIMessage, HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { END, MessagesAnnotation, START, StateGraph, messagesStateReducer } from "@langchain/langgraph";
import { JsonPlusSerializer, emptyCheckpoint, uuid6, type Checkpoint } from "@langchain/langgraph-checkpoint";
import type { RunnableConfig } from "@langchain/core/runnables";
import { describe, expect, it, vi } from "vitest";
import { LmdbCheckpointSaver } from "../src/storage/checkpoints/lmdb-saver.ts";
import type { Storage } from "../src/storage/env.ts";
import { useTempStorage } from "./helpers/storage.ts";
import { CHUNK_ITEMS, MessageChunker, joinChunks } from "../src/storage/checkpoints/message-chunks.ts";
import { MessageCachingSerde } from "../src/storage/checkpoints/message-serde.ts";

const text = (v: Uint8Array): string => Buffer.from(v).toString("utf8");

function echoGraph(saver: LmdbCheckpointSaver) {
  return new StateGraph(MessagesAnnotation)
    .addNode("echo", (s: typeof MessagesAnnotation.State) => ({ messages: [new AIMessage(`echo ${String(s.messages.at(-1)?.content)}`)] }))
    .addEdge(START, "echo")
    .addEdge("echo", END)
    .compile({ checkpointer: saver });
}

/** Deterministic pseudo-random numbers (mulberry32), so a failure replays. */
function rng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const summary = (messages: BaseMessage[]): string[] => messages.map((m) => `${m.getType()}:${m.id}:${String(m.content)}`);

/** Every chunk named by a blob of the thread exists, and every chunk of the thread is named by one. */
function expectChunksConsistent(storage: Storage, threadId: string): number {
  const range = { start: [threadId], end: [threadId, new Uint8Array([0xff])] };
  const named = new Set<string>();
  for (const { key, value } of storage.blobs.getRange(range)) for (const id of value.chunks ?? []) named.add(JSON.stringify([key[1], key[2], id]));
  const stored = new Set<string>();
  for (const key of storage.blobChunks.getKeys(range)) stored.add(JSON.stringify([key[1], key[2], key[3]]));
  expect(
    [...named].filter((k) => !stored.has(k)),
    "chunks named but missing",
  ).toEqual([]);
  expect(
    [...stored].filter((k) => !named.has(k)),
    "chunks left unreferenced",
  ).toEqual([]);
  return stored.size;
}

/**
 * Every stored blob of the thread is listed as created by exactly one of its checkpoints (whoever
 * removes that checkpoint removes the blob), and every listed blob exists.
 */
function expectBlobsOwned(storage: Storage, threadId: string): void {
  // a range object each: lmdb-js' getKeys() marks the options it is given as keys-only
  const range = () => ({ start: [threadId], end: [threadId, new Uint8Array([0xff])] });
  const stored = new Set<string>();
  for (const key of storage.blobs.getKeys(range())) stored.add(JSON.stringify(key.slice(1)));
  const owners = new Map<string, number>();
  for (const { key, value } of storage.checkpoints.getRange(range())) {
    for (const [channel, version, tag] of value.blobs) {
      const id = JSON.stringify([key[1], channel, version, tag]);
      owners.set(id, (owners.get(id) ?? 0) + 1);
    }
  }
  expect(
    [...stored].filter((id) => !owners.has(id)),
    "blobs no checkpoint owns",
  ).toEqual([]);
  expect(
    [...owners].filter(([, n]) => n > 1).map(([id]) => id),
    "blobs owned twice",
  ).toEqual([]);
  expect(
    [...owners.keys()].filter((id) => !stored.has(id)),
    "owned blobs missing",
  ).toEqual([]);
}

/** Each checkpoint's messages as read by `reader` (a fresh saver: nothing cached). */
async function historyOf(reader: LmdbCheckpointSaver, threadId: string): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  for await (const t of reader.list({ configurable: { thread_id: threadId, checkpoint_ns: "" } })) {
    out.set(t.checkpoint.id, summary((t.checkpoint.channel_values.messages as BaseMessage[] | undefined) ?? []));
  }
  return out;
}

const fx = useTempStorage("troupe-chunks-");

describe("message chunks", () => {
  it("reassemble to exactly the serde's bytes and reuse unchanged chunks", async () => {
    const inner = new JsonPlusSerializer();
    const serde = new MessageCachingSerde(inner);
    let list: BaseMessage[] = [];
    for (let i = 0; i < CHUNK_ITEMS * 2 + 5; i++) list = messagesStateReducer(list, [i % 2 ? new AIMessage(`a${i} "q" \u2028`) : new HumanMessage(`h${i}`)]);
    expect(await serde.dumpsChunked(list.slice(0, CHUNK_ITEMS - 1))).toBeUndefined();
    const first = await serde.dumpsChunked(list);
    expect(first?.chunks).toHaveLength(2);
    expect(
      text(
        joinChunks(
          first!.chunks.map((c) => c.bytes),
          first!.tail,
        ),
      ),
    ).toBe(text((await inner.dumpsTyped(list))[1]));
    const grown = messagesStateReducer(list, [new AIMessage("more")]);
    const second = await serde.dumpsChunked(grown);
    expect(second!.chunks.map((c) => c.id)).toEqual(first!.chunks.map((c) => c.id));
    expect(second!.chunks[0]).toBe(first!.chunks[0]); // not re-encoded
    // an exact multiple of the chunk size: no tail
    const exact = await serde.dumpsChunked(list.slice(0, CHUNK_ITEMS * 2));
    expect(exact!.tail.byteLength).toBe(0);
    expect(
      text(
        joinChunks(
          exact!.chunks.map((c) => c.bytes),
          exact!.tail,
        ),
      ),
    ).toBe(text((await inner.dumpsTyped(list.slice(0, CHUNK_ITEMS * 2)))[1]));
    // an edit inside a chunk changes that chunk only
    const edited = messagesStateReducer(grown, [new AIMessage({ content: "edited", id: grown[CHUNK_ITEMS + 3].id })]);
    const third = await serde.dumpsChunked(edited);
    expect(third!.chunks[0].id).toBe(first!.chunks[0].id);
    expect(third!.chunks[1].id).not.toBe(first!.chunks[1].id);
    expect(
      text(
        joinChunks(
          third!.chunks.map((c) => c.bytes),
          third!.tail,
        ),
      ),
    ).toBe(text((await inner.dumpsTyped(edited))[1]));
    // a non-message item: not chunked
    expect(await serde.dumpsChunked([{}, ...list])).toBeUndefined();
    expect(new MessageChunker().split([{ lc_kwargs: {} }, ...list], () => undefined)).toBeUndefined();
  });

  it("only work on what changed since the conversation's last list, and notice every change", async () => {
    const inner = new JsonPlusSerializer();
    const serde = new MessageCachingSerde(inner);
    const expectSerdeBytes = async (l: BaseMessage[]) => {
      const chunked = await serde.dumpsChunked(l);
      expect(
        text(
          joinChunks(
            chunked!.chunks.map((c) => c.bytes),
            chunked!.tail,
          ),
        ),
      ).toBe(text((await inner.dumpsTyped(l))[1]));
      return chunked!;
    };
    let list: BaseMessage[] = [];
    for (let i = 0; i < CHUNK_ITEMS * 3 + 10; i++) list = messagesStateReducer(list, [i % 2 ? new AIMessage(`a${i}`) : new HumanMessage(`h${i}`)]);
    const base = await expectSerdeBytes(list);
    // a step that appends: only the new message is serialized (counted through the inner serde)
    let calls = 0;
    const counting = new MessageCachingSerde({
      dumpsTyped: (v: unknown) => {
        calls++;
        return inner.dumpsTyped(v);
      },
      loadsTyped: (t: string, d: Uint8Array | string) => inner.loadsTyped(t, d),
    });
    await counting.dumpsChunked(list);
    calls = 0;
    await counting.dumpsChunked(messagesStateReducer(list, [new AIMessage("next")]));
    expect(calls).toBe(1);
    // an in-place edit of a kept message (content replaced on the same object) changes its chunk
    const editedInPlace = list.slice();
    const victim = editedInPlace[CHUNK_ITEMS + 1];
    const original = victim.content;
    victim.content = "edited in place";
    const afterEdit = await expectSerdeBytes(editedInPlace);
    expect(afterEdit.chunks[0].id).toBe(base.chunks[0].id);
    expect(afterEdit.chunks[1].id).not.toBe(base.chunks[1].id);
    victim.content = original;
    // two branches of one conversation, alternating: each read back exactly
    const branchA = messagesStateReducer(list.slice(0, CHUNK_ITEMS + 7), [new AIMessage("branch A")]);
    const branchB = messagesStateReducer(list, [new HumanMessage("branch B")]);
    for (const l of [branchA, branchB, branchA, list, branchB]) await expectSerdeBytes(l);
    // a shorter list than the last one (a rollback), then the long one again
    await expectSerdeBytes(list.slice(0, CHUNK_ITEMS));
    expect((await expectSerdeBytes(list)).chunks.map((c) => c.id)).toEqual(base.chunks.map((c) => c.id));
  });

  it("keep a long thread's history intact across runs, forks, rollback, copy, prune and delete", async () => {
    const random = rng(20261122);
    const saver = new LmdbCheckpointSaver(fx.storage);
    const graph = echoGraph(saver);
    const fresh = () => new LmdbCheckpointSaver(fx.storage);
    const thread = "thread-a";
    const config = (runId: string) => ({ configurable: { thread_id: thread }, metadata: { run_id: runId } });
    const runIds: string[] = [];
    // 100 runs (~200 messages: several full chunks), with forks from random older checkpoints
    for (let i = 0; i < 100; i++) {
      const runId = `run-${String(i).padStart(3, "0")}`;
      runIds.push(runId);
      if (i > 40 && random() < 0.1) {
        const history: { config: { configurable?: Record<string, unknown> } }[] = [];
        for await (const s of graph.getStateHistory({ configurable: { thread_id: thread } })) history.push(s);
        const target = history[Math.floor(random() * Math.min(history.length, 12))]; // a recent one: the list stays long
        const forked = await graph.updateState(target.config, { messages: [new HumanMessage(`fork ${i}`)] }, "echo");
        await graph.invoke({ messages: [new HumanMessage(`after fork ${i}`)] }, { ...config(runId), configurable: { ...forked.configurable } });
      } else {
        await graph.invoke({ messages: [new HumanMessage(`m${i}`)] }, config(runId));
      }
    }
    await saver.flush();
    const latest = await graph.getState({ configurable: { thread_id: thread } });
    expect((latest.values.messages as BaseMessage[]).length).toBeGreaterThan(CHUNK_ITEMS * 2);

    const before = await historyOf(fresh(), thread);
    expect(await historyOf(saver, thread)).toEqual(before); // cached reads agree with uncached ones
    expect(expectChunksConsistent(fx.storage, thread)).toBeGreaterThan(1);
    expectBlobsOwned(fx.storage, thread);

    // chunks are shared: the store holds far fewer message bytes than the sum of every version's list
    let chunkBytes = 0;
    for (const { value } of fx.storage.blobChunks.getRange({ start: [thread], end: [thread, new Uint8Array([0xff])] })) chunkBytes += value.byteLength;
    let fullBytes = 0;
    for (const messages of before.values()) fullBytes += messages.length * 60;
    expect(chunkBytes).toBeLessThan(fullBytes / 5);

    // copy: the copy reads back the same, with its own chunks
    await saver.copyThread(thread, "thread-b");
    const copied = await historyOf(fresh(), "thread-b");
    expect([...copied.values()]).toEqual([...before.values()]);
    expectChunksConsistent(fx.storage, "thread-b");

    // rollback of several runs (the latest and random older ones): survivors read back unchanged
    const rolledBack = [runIds[runIds.length - 1], ...runIds.filter(() => random() < 0.15)];
    for (const runId of rolledBack) await saver.deleteCheckpointsOfRun(thread, runId);
    const afterRollback = await historyOf(fresh(), thread);
    expect(afterRollback.size).toBeLessThan(before.size);
    for (const [id, messages] of afterRollback) expect(messages, id).toEqual(before.get(id));
    expectChunksConsistent(fx.storage, thread);
    expectBlobsOwned(fx.storage, thread);

    // prune to the latest checkpoint: it reads back whole, nothing else is left
    const newest = [...afterRollback.keys()].sort().at(-1)!;
    await saver.pruneToLatest(thread);
    const pruned = await historyOf(fresh(), thread);
    expect([...pruned.keys()]).toEqual([newest]);
    expect(pruned.get(newest)).toEqual(afterRollback.get(newest));
    expectChunksConsistent(fx.storage, thread);
    expectBlobsOwned(fx.storage, thread);
    // runs continue on the pruned thread
    await graph.invoke({ messages: [new HumanMessage("after prune")] }, config("run-after-prune"));
    await saver.flush();
    const continued = await graph.getState({ configurable: { thread_id: thread } });
    expect(summary(continued.values.messages as BaseMessage[]).slice(0, -2)).toEqual(afterRollback.get(newest));
    expectChunksConsistent(fx.storage, thread);

    // the copy was untouched by all of that; deleting it removes its chunks
    expect([...(await historyOf(fresh(), "thread-b")).values()]).toEqual([...before.values()]);
    await saver.deleteThread("thread-b");
    expect(expectChunksConsistent(fx.storage, "thread-b")).toBe(0);
    await saver.deleteThread(thread);
    expect(expectChunksConsistent(fx.storage, thread)).toBe(0);
  }, 180_000); // ~30 s alone; minutes on a loaded machine

  it("report a missing chunk as damaged data instead of returning a wrong list", async () => {
    const saver = new LmdbCheckpointSaver(fx.storage);
    const graph = echoGraph(saver);
    for (let i = 0; i < CHUNK_ITEMS; i++) await graph.invoke({ messages: [new HumanMessage(`m${i}`)] }, { configurable: { thread_id: "t" } });
    await saver.flush();
    const [firstChunk] = Array.from(fx.storage.blobChunks.getKeys({ start: ["t"], end: ["t", new Uint8Array([0xff])] }));
    await fx.storage.blobChunks.remove(firstChunk);
    await expect(new LmdbCheckpointSaver(fx.storage).getTuple({ configurable: { thread_id: "t" } })).rejects.toThrow(/damaged: chunk/);
  }, 60_000);

  it("are written once: a put skips chunks an earlier put committed, unless the thread's chunks were removed since", async () => {
    const saver = new LmdbCheckpointSaver(fx.storage);
    const chunkWrites = vi.spyOn(fx.storage.blobChunks, "ifNoExists");
    const messages = (n: number, from = 0) => Array.from({ length: n }, (_, i) => new HumanMessage({ content: `m${from + i}`, id: `m${from + i}` }));
    const twoChunks = messages(CHUNK_ITEMS * 2 + 2);
    const threeChunks = [...twoChunks, ...messages(CHUNK_ITEMS, twoChunks.length)];
    /** puts `list` as version `version` of the messages channel, after `parent` */
    const put = async (parent: RunnableConfig, list: BaseMessage[], version: number, runId: string) => {
      const checkpoint: Checkpoint = { ...emptyCheckpoint(), id: uuid6(-1), channel_values: { messages: list }, channel_versions: { messages: version } };
      const next = await saver.put(parent, checkpoint, { source: "loop", step: version, parents: {}, run_id: runId } as never, { messages: version });
      await saver.flush();
      return next;
    };
    const root = (thread: string): RunnableConfig => ({ configurable: { thread_id: thread, checkpoint_ns: "" } });
    const readBack = async (thread: string) =>
      summary((await new LmdbCheckpointSaver(fx.storage).getTuple(root(thread)))?.checkpoint.channel_values.messages as BaseMessage[]);
    const writesOf = async (step: () => Promise<unknown>): Promise<number> => {
      chunkWrites.mockClear();
      await step();
      return chunkWrites.mock.calls.length;
    };

    let parent = root("t");
    expect(await writesOf(async () => (parent = await put(parent, twoChunks, 1, "r1")))).toBe(2);
    expect(await writesOf(async () => (parent = await put(parent, [...twoChunks, ...messages(1, 500)], 2, "r1")))).toBe(0);
    const beforeThird = parent;
    expect(await writesOf(async () => (parent = await put(parent, threeChunks, 3, "r2")))).toBe(1);
    expect(await readBack("t")).toEqual(summary(threeChunks));

    // rollback removes the chunk only r2 named: the same list put again writes it again (and, as
    // anything that removes chunks of a thread forgets what was known of it, the other two)
    await saver.deleteCheckpointsOfRun("t", "r2");
    expect(await writesOf(() => put(beforeThird, threeChunks, 4, "r3"))).toBe(3);
    expect(await readBack("t")).toEqual(summary(threeChunks));
    expectChunksConsistent(fx.storage, "t");

    // a deleted thread's chunks are gone: a new thread under the same id writes them all
    await saver.deleteThread("t");
    expect(await writesOf(() => put(root("t"), threeChunks, 1, "r4"))).toBe(3);
    expect(await readBack("t")).toEqual(summary(threeChunks));
    expectChunksConsistent(fx.storage, "t");

    // another thread with the same messages has chunks of its own
    expect(await writesOf(() => put(root("other"), threeChunks, 1, "r5"))).toBe(3);
    expectChunksConsistent(fx.storage, "other");
  });
});
