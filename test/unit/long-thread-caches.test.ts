// Caches that keep runs on long threads cheap: per-message checkpoint JSON (MessageCachingSerde),
// decoded message-list blobs (BlobCache in LmdbCheckpointSaver) and per-message wire JSON (actors/value-json.ts).
import { AIMessage, AIMessageChunk, HumanMessage, SystemMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { MessagesAnnotation, START, END, StateGraph, messagesStateReducer } from "@langchain/langgraph";
import { JsonPlusSerializer, emptyCheckpoint, uuid6, type Checkpoint } from "@langchain/langgraph-checkpoint";
import type { RunnableConfig } from "@langchain/core/runnables";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { LmdbCheckpointSaver } from "../../src/storage/checkpoints/lmdb-saver.ts";
import { openStorage, type Storage } from "../../src/storage/env.ts";
import { useTempStorage } from "../helpers/storage.ts";
import { MessageCachingSerde } from "../../src/storage/checkpoints/message-serde.ts";
import { BlobCache, entryCost } from "../../src/storage/checkpoints/blob-cache.ts";
import { toJsonSegments, toJsonText } from "../../src/actors/value-json.ts";
import { jsonBytes, jsonText } from "../../src/bridge/json-segments.ts";
import { putThreadValues, threadValuesJson } from "../../src/storage/thread-values.ts";
import { SEGMENT_ITEMS } from "../../src/storage/message-list-json.ts";

function conversation(): BaseMessage[] {
  return messagesStateReducer(
    [],
    [
      { role: "human", content: "hi" },
      new HumanMessage({ content: [{ type: "text", text: 'x \u2028 "q"' }], name: "bob" }),
      new AIMessage({ content: "", tool_calls: [{ id: "c1", name: "f", args: { a: 1, nested: { b: [1, 2] } } }] }),
      new ToolMessage({ content: "result", tool_call_id: "c1", artifact: { big: 1n.toString() } }),
      new SystemMessage("sys"),
      new AIMessageChunk({ content: "chunk" }),
      new AIMessage({ content: "with meta", response_metadata: { model: "m" }, usage_metadata: { input_tokens: 1, output_tokens: 2, total_tokens: 3 } }),
    ],
  );
}

const bytesOf = (v: Uint8Array): string => Buffer.from(v).toString("utf8");

describe("MessageCachingSerde", () => {
  it("writes exactly the inner serde's bytes, before and after messages were cached", async () => {
    const inner = new JsonPlusSerializer();
    const serde = new MessageCachingSerde(inner);
    const messages = conversation();
    const expected = await inner.dumpsTyped(messages);
    expect(await serde.dumpsTyped(messages)).toEqual(expected);
    const again = await serde.dumpsTyped(messages);
    expect(again[0]).toBe("json");
    expect(bytesOf(again[1])).toBe(bytesOf(expected[1]));
    // a longer list reusing cached items, as every step of a run does
    const longer = messagesStateReducer(messages, [new AIMessage("next")]);
    expect(bytesOf((await serde.dumpsTyped(longer))[1])).toBe(bytesOf((await inner.dumpsTyped(longer))[1]));
    // revived messages re-serialize as the inner serde does
    const revived = (await serde.loadsTyped("json", (await serde.dumpsTyped(longer))[1])) as BaseMessage[];
    expect(bytesOf((await serde.dumpsTyped(revived))[1])).toBe(bytesOf((await inner.dumpsTyped(revived))[1]));
    // edits that are not appends: a message replaced by id, one removed, an id assigned in place
    const replaced = messagesStateReducer(longer, [new AIMessage({ content: "replaced", id: longer[2].id })]);
    expect(bytesOf((await serde.dumpsTyped(replaced))[1])).toBe(bytesOf((await inner.dumpsTyped(replaced))[1]));
    const removed = replaced.filter((_, i) => i !== 1);
    expect(bytesOf((await serde.dumpsTyped(removed))[1])).toBe(bytesOf((await inner.dumpsTyped(removed))[1]));
    const anonymous = new HumanMessage("no id yet");
    const withAnon = [...removed, anonymous];
    await serde.dumpsTyped(withAnon);
    const grown = messagesStateReducer(withAnon, [new AIMessage("after")]); // assigns anonymous an id in place
    expect(anonymous.id).toBeTruthy();
    const grownText = bytesOf((await serde.dumpsTyped(grown))[1]);
    expect(grownText).toContain(String(anonymous.id));
    expect(grownText).toBe(bytesOf((await inner.dumpsTyped(grown))[1]));
    // non-message values go to the inner serde untouched
    const mixed = { a: [1, 2], s: new Set([1]) };
    expect(bytesOf((await serde.dumpsTyped(mixed))[1])).toBe(bytesOf((await inner.dumpsTyped(mixed))[1]));
  });

  it("notices an id assigned or content replaced after caching", async () => {
    const serde = new MessageCachingSerde();
    const a = new HumanMessage("a");
    const b = new AIMessage({ content: "b", id: "b1" });
    await serde.dumpsTyped([a, b]);
    a.id = "late-id";
    a.lc_kwargs.id = "late-id";
    b.content = "changed";
    b.lc_kwargs.content = "changed";
    const text = bytesOf((await serde.dumpsTyped([a, b]))[1]);
    expect(text).toContain("late-id");
    expect(text).toContain("changed");
    expect(text).toBe(bytesOf((await new JsonPlusSerializer().dumpsTyped([a, b]))[1]));
  });
});

describe("LmdbCheckpointSaver blob cache", () => {
  let dir: string;
  let storage: Storage;
  let saver: LmdbCheckpointSaver;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "troupe-blobcache-"));
    storage = openStorage(dir);
    saver = new LmdbCheckpointSaver(storage);
  });
  afterEach(async () => {
    await storage.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const cfg = (thread_id: string, checkpoint_id?: string): RunnableConfig => ({
    configurable: { thread_id, checkpoint_ns: "", ...(checkpoint_id ? { checkpoint_id } : {}) },
  });
  const ckpt = (messages: BaseMessage[]): Checkpoint => ({
    ...emptyCheckpoint(),
    id: uuid6(-1),
    channel_values: { messages },
    channel_versions: { messages: 1 },
  });
  const put = (thread: string, messages: BaseMessage[], runId: string) =>
    saver.put(cfg(thread), ckpt(messages), { source: "loop", step: 0, parents: {}, run_id: runId } as never, { messages: 1 });
  const loaded = async (s: LmdbCheckpointSaver, thread: string): Promise<BaseMessage[]> =>
    (await s.getTuple(cfg(thread)))?.checkpoint.channel_values.messages as BaseMessage[];
  /** `first` and `second`, then enough filler that the stored list is above MIN_CACHED_BLOB_BYTES */
  const longList = (first: BaseMessage, second: BaseMessage): BaseMessage[] => [
    first,
    second,
    ...Array.from({ length: 16 }, (_, i) => new AIMessage({ content: `filler ${i} ${"x".repeat(300)}`, id: `f${i}` })),
  ];

  it("serves the put value (as a fresh array) without reviving it", async () => {
    const messages = longList(new HumanMessage({ content: "hi", id: "h1" }), new AIMessage({ content: "yo", id: "a1" }));
    await put("t", messages, "r1");
    const first = await loaded(saver, "t");
    expect(first).not.toBe(messages);
    expect(first[0]).toBe(messages[0]); // from the cache, not revived
    first.push(new AIMessage("local edit"));
    messages.push(new AIMessage("edit after put"));
    expect((await loaded(saver, "t")).map((m) => m.content).slice(0, 2)).toEqual(["hi", "yo"]);
    expect(await loaded(saver, "t")).toHaveLength(18);
    // a cold saver revives the same values (once committed: until then every saver on the env reads the pending put)
    await saver.flush();
    const cold = await loaded(new LmdbCheckpointSaver(storage), "t");
    expect(cold[0]).not.toBe(messages[0]);
    expect(cold.slice(0, 2).map((m) => [m.getType(), m.id, m.content])).toEqual([
      ["human", "h1", "hi"],
      ["ai", "a1", "yo"],
    ]);
  });

  it("keeps the latest version cached while history (older versions) is read", async () => {
    const v1 = longList(new HumanMessage({ content: "one", id: "h1" }), new AIMessage({ content: "one", id: "a1" }));
    const v2 = [...v1, new HumanMessage({ content: "two", id: "h2" })];
    const first = await saver.put(cfg("t"), ckpt(v1), { source: "loop", step: 0, parents: {} }, { messages: 1 });
    await saver.put(first, { ...ckpt(v2), channel_versions: { messages: 2 } }, { source: "loop", step: 1, parents: {} }, { messages: 2 });
    await saver.flush(); // committed: a read while the put is queued is answered without the cache
    const cold = new LmdbCheckpointSaver(storage); // caches only what it reads
    const latest = await loaded(cold, "t");
    expect(latest).toHaveLength(19);
    const history: number[] = [];
    for await (const tuple of cold.list(cfg("t"))) history.push((tuple.checkpoint.channel_values.messages as BaseMessage[]).length);
    expect(history).toEqual([19, 18]);
    expect((await loaded(cold, "t"))[0]).toBe(latest[0]); // still served from the cache, not revived
  });

  it("does not cache short lists: they are revived on every read", async () => {
    const messages = [new HumanMessage({ content: "hi", id: "h1" }), new AIMessage({ content: "yo", id: "a1" })];
    await put("t", messages, "r1");
    const first = await loaded(saver, "t");
    expect(first[0]).not.toBe(messages[0]);
    expect((await loaded(saver, "t"))[0]).not.toBe(first[0]);
    expect(first.map((m) => m.content)).toEqual(["hi", "yo"]);
  });

  it("never serves a deleted thread's or rolled-back run's values for a re-used blob key", async () => {
    await put("t", longList(new HumanMessage({ content: "old", id: "1" }), new AIMessage({ content: "old", id: "2" })), "r1");
    expect((await loaded(saver, "t"))[0].content).toBe("old");
    await saver.deleteThread("t");
    await put("t", longList(new HumanMessage({ content: "new", id: "1" }), new AIMessage({ content: "new", id: "2" })), "r2");
    expect((await loaded(saver, "t"))[0].content).toBe("new");
    expect(await saver.deleteCheckpointsOfRun("t", "r2")).toBe(1);
    expect(await saver.getTuple(cfg("t"))).toBeUndefined();
    await put("t", longList(new HumanMessage({ content: "third", id: "1" }), new AIMessage({ content: "third", id: "2" })), "r3");
    expect((await loaded(saver, "t"))[0].content).toBe("third");
  });

  it("serves a hit after checking the blob's stamp only, and misses once the stamp changes", async () => {
    await put("t", longList(new HumanMessage({ content: "cached", id: "1" }), new AIMessage({ content: "cached", id: "2" })), "r1");
    await saver.flush();
    const keys = Array.from(storage.blobStamps.getKeys({ start: ["t"], end: ["t", new Uint8Array([0xff])] }));
    expect(keys).toHaveLength(1);
    const blob = storage.blobs.get(keys[0])!;
    // hide the bytes: a hit must not need them
    await storage.blobs.put(keys[0], { type: blob.type, value: new TextEncoder().encode("[]") });
    expect((await loaded(saver, "t"))[0].content).toBe("cached");
    // a new stamp means another write: the cache misses and the stored bytes are read
    await storage.blobStamps.put(keys[0], 42);
    expect(await loaded(saver, "t")).toEqual([]);
  });

  it("checks cached entries against the stored stamp (writes by another saver on the same env)", async () => {
    await put("t", longList(new HumanMessage({ content: "mine", id: "1" }), new AIMessage({ content: "mine", id: "2" })), "r1");
    expect((await loaded(saver, "t"))[0].content).toBe("mine");
    const other = new LmdbCheckpointSaver(storage);
    await other.deleteThread("t");
    await other.put(
      cfg("t"),
      ckpt(longList(new HumanMessage({ content: "theirs", id: "1" }), new AIMessage({ content: "theirs", id: "2" }))),
      { source: "loop", step: 0, parents: {} },
      { messages: 1 },
    );
    expect((await loaded(saver, "t"))[0].content).toBe("theirs");
  });

  it("stays within its budget of estimated memory, evicting least recently used entries", () => {
    const value = [new HumanMessage("x"), new HumanMessage("y")];
    const cost = entryCost(200, 2);
    expect(cost).toBeGreaterThan(2 * 200); // revived messages and bookkeeping count, not only the stored size
    const cache = new BlobCache(4 * cost, 0);
    const key = (i: number) => BlobCache.key(`t${i}`, "", "messages", 1, "");
    for (let i = 0; i < 10; i++) cache.set(key(i), `t${i}`, 1, 200, value);
    expect(cache.totalBytes).toBeLessThanOrEqual(4 * cost);
    expect(cache.size).toBe(4);
    expect(cache.get(key(0), 1)).toBeUndefined();
    expect(cache.get(key(9), 1)).toHaveLength(2);
    expect(cache.get(key(9), 2)).toBeUndefined();
    cache.set(key(100), "t2", 1, 10, value);
    cache.removeThread("t2");
    expect(cache.get(key(100), 1)).toBeUndefined();
    // an entry estimated above a quarter of the budget is not kept
    cache.set(key(200), "t3", 1, 4 * cost, value);
    expect(cache.get(key(200), 1)).toBeUndefined();
  });

  it("skips lists stored in fewer than its minimum bytes", () => {
    const cache = new BlobCache(1 << 20, 1000);
    const value = [new HumanMessage("x")];
    cache.set(BlobCache.key("t", "", "messages", 1, ""), "t", 1, 999, value);
    cache.set(BlobCache.key("u", "", "messages", 1, ""), "u", 1, 1000, value);
    expect(cache.get(BlobCache.key("t", "", "messages", 1, ""), 1)).toBeUndefined();
    expect(cache.get(BlobCache.key("u", "", "messages", 1, ""), 1)).toHaveLength(1);
  });

  it("keeps one version per thread, namespace and channel", () => {
    const cache = new BlobCache(1 << 20, 0);
    const value = [new HumanMessage("x")];
    for (let v = 1; v <= 5; v++) cache.set(BlobCache.key("t", "", "messages", v, ""), "t", 1, 100, value);
    cache.set(BlobCache.key("t", "", "other", 1, ""), "t", 1, 100, value);
    cache.set(BlobCache.key("t", "sub", "messages", 1, ""), "t", 1, 100, value);
    cache.set(BlobCache.key("t2", "", "messages", 1, ""), "t2", 1, 100, value);
    expect(cache.size).toBe(4);
    expect(cache.totalBytes).toBe(4 * entryCost(100, 1));
    expect(cache.get(BlobCache.key("t", "", "messages", 4, ""), 1)).toBeUndefined();
    expect(cache.get(BlobCache.key("t", "", "messages", 5, ""), 1)).toHaveLength(1);
    // a tagged value (rollback branch) of the same channel replaces it too
    cache.set(BlobCache.key("t", "", "messages", 5, "c1"), "t", 1, 100, value);
    expect(cache.get(BlobCache.key("t", "", "messages", 5, ""), 1)).toBeUndefined();
    expect(cache.get(BlobCache.key("t", "", "messages", 5, "c1"), 1)).toHaveLength(1);
    expect(cache.size).toBe(4);
    // removing a replaced version's key leaves the slot's newer value alone
    cache.remove(BlobCache.key("t", "", "messages", 5, ""));
    expect(cache.get(BlobCache.key("t", "", "messages", 5, "c1"), 1)).toHaveLength(1);
    cache.remove(BlobCache.key("t", "", "messages", 5, "c1"));
    expect(cache.get(BlobCache.key("t", "", "messages", 5, "c1"), 1)).toBeUndefined();
    expect(cache.size).toBe(3);
    expect(cache.totalBytes).toBe(3 * entryCost(100, 1));
  });

  it("runs a long thread with the same results as a cold saver", async () => {
    const graph = new StateGraph(MessagesAnnotation)
      .addNode("echo", (s: typeof MessagesAnnotation.State) => ({ messages: [new AIMessage({ content: `echo ${String(s.messages.at(-1)?.content)}` })] }))
      .addEdge(START, "echo")
      .addEdge("echo", END)
      .compile({ checkpointer: saver });
    for (let i = 0; i < 20; i++) await graph.invoke({ messages: [{ role: "human", content: `m${i}` }] }, cfg("g"));
    const warm = (await graph.getState(cfg("g"))).values.messages as BaseMessage[];
    const cold = (await graph.withConfig({}).getState(cfg("g"))).values.messages as BaseMessage[];
    const coldSaver = await loaded(new LmdbCheckpointSaver(storage), "g");
    expect(warm).toHaveLength(40);
    expect(toJsonText(warm)).toBe(toJsonText(coldSaver));
    expect(toJsonText(cold)).toBe(toJsonText(coldSaver));
    expect(coldSaver.at(-1)?.content).toBe("echo m19");
  });
});

describe("wire JSON cache", () => {
  /** The replacer value-json.ts used before the fast path (the reference output). */
  function reference(value: unknown): string {
    return (
      JSON.stringify(value, function (this: Record<string, unknown>, key: string, v: unknown) {
        const original = this[key] as { lc_kwargs?: unknown; toDict?: () => { type: string; data: Record<string, unknown> } } | undefined;
        if (typeof original === "object" && original !== null && "lc_kwargs" in original && typeof original.toDict === "function") {
          const d = original.toDict();
          return { ...d.data, type: d.type };
        }
        return typeof v === "bigint" ? v.toString() : v;
      }) ?? "null"
    );
  }

  it("emits exactly the replacer's output for states and message lists, cached or not", () => {
    const messages = conversation();
    const state = { messages, count: 3n, other: { nested: [new AIMessage("inner")], when: new Date(0) }, skip: undefined, fn: () => 1, list: [1, "a"] };
    for (let round = 0; round < 2; round++) {
      expect(toJsonText(state)).toBe(reference(state));
      expect(toJsonText(messages)).toBe(reference(messages));
      expect(toJsonText({ messages })).toBe(reference({ messages }));
    }
    expect(toJsonText([messages[0]])).toBe(reference([messages[0]]));
    const longer = messagesStateReducer(messages, [new AIMessage("appended")]);
    expect(toJsonText({ messages: longer })).toBe(reference({ messages: longer }));
    const replaced = messagesStateReducer(longer, [new AIMessage({ content: "replaced", id: longer[1].id })]);
    expect(toJsonText({ messages: replaced })).toBe(reference({ messages: replaced }));
    expect(toJsonText({ messages: longer })).toBe(reference({ messages: longer }));
    expect(toJsonText(replaced.slice(0, 3))).toBe(reference(replaced.slice(0, 3)));
    messages[0].content = "edited";
    expect(toJsonText({ messages })).toBe(reference({ messages }));
    expect(toJsonText({ messages })).toContain("edited");
  });

  it("cuts long lists into segments that concatenate to exactly the same text, across appends, forks and edits", () => {
    let messages: BaseMessage[] = [];
    for (let i = 0; i < SEGMENT_ITEMS * 3 + 5; i++)
      messages = messagesStateReducer(messages, [i % 2 ? new AIMessage(`a${i} \u2028 é`) : new HumanMessage(`h${i}`)]);
    const check = (value: unknown) => {
      const segments = toJsonSegments(value);
      expect(segments.join("")).toBe(reference(value));
      expect(segments.join("")).toBe(toJsonText(value));
      return segments;
    };
    const first = check({ messages, count: 1n, title: "t" });
    // one segment per sealed group of messages: no segment holds more than SEGMENT_ITEMS of them
    expect(first.length).toBeGreaterThan(3);
    for (const segment of first) expect(segment.length).toBeLessThan(SEGMENT_ITEMS * 200); // ~145 chars per message here
    check(messages);
    const grown = messagesStateReducer(messages, [new AIMessage("appended")]);
    check({ messages: grown });
    const fork = messagesStateReducer(messages.slice(0, SEGMENT_ITEMS + 2), [new HumanMessage("fork")]);
    for (const v of [fork, grown, fork, messages.slice(0, 10), grown]) check({ messages: v });
    const kept = grown[SEGMENT_ITEMS + 1];
    kept.content = "edited in place";
    expect(check({ messages: grown }).join("")).toContain("edited in place");
    check({ other: [1, 2], plain: "no lists" });
  });

  it("checks lists that start with a message as it caches them: one that holds something else after all takes the general path", () => {
    let messages: BaseMessage[] = [];
    for (let i = 0; i < SEGMENT_ITEMS * 2 + 3; i++) messages = messagesStateReducer(messages, [new HumanMessage(`m${i}`)]);
    const cases: unknown[] = [[messages[0], { plain: 1 }, messages[1]], [messages[0], messages[1], null, 2n], { messages, mixed: [messages[0], "text"] }];
    // messages whose fields the replacer changes (bigint, Date, a nested message) or leaves (undefined, NaN)
    const odd = [
      new AIMessage({ content: "odd", additional_kwargs: { n: 5n, when: new Date(0), inner: new HumanMessage("h"), gone: undefined, nan: Number.NaN } }),
      new AIMessage({ content: [{ type: "text", text: "parts" }], response_metadata: { list: [1, { deep: [null, "x"] }] } }),
      ...messages.slice(0, 3),
    ];
    cases.push(odd, { messages: odd });
    for (const value of cases) expect(toJsonText(value)).toBe(reference(value));
    expect(toJsonSegments({ messages }).join("")).toBe(reference({ messages })); // cached now
    // a list that extends the cached one with a non-message: its prefix is known, its tail is checked
    for (const extended of [
      [...messages, { role: "human", content: "raw" }],
      [...messages, null],
    ]) {
      expect(toJsonText({ messages: extended })).toBe(reference({ messages: extended }));
      expect(toJsonSegments({ messages: extended }).join("")).toBe(reference({ messages: extended }));
      expect(toJsonText(extended)).toBe(reference(extended));
    }
    expect(toJsonSegments({ messages }).join("")).toBe(reference({ messages }));
  });

  it("encodes segments to the UTF-8 of their text, in an ArrayBuffer of their own", () => {
    const segments = ["{", '"a":"é \u2028 ✓"', ',"b":[1,2]', "}"];
    const text = segments.join("");
    const bytes = jsonBytes(segments);
    expect(jsonText(bytes)).toBe(text);
    expect(bytes.byteOffset).toBe(0);
    expect(bytes.buffer.byteLength).toBe(Buffer.byteLength(text));
    const copied = structuredClone(bytes); // what postMessage does: the whole buffer, which is just the text
    expect(copied.buffer.byteLength).toBe(bytes.byteLength);
    expect(jsonText(copied)).toBe(text);
    expect(jsonText(jsonBytes([]))).toBe("");
  });
});

describe("thread values stored from segments", () => {
  const fx = useTempStorage("troupe-values-");

  it("read back as the same text, beside values written as strings, after their buffer was reused", async () => {
    const segments = ["{", '"messages":[', '{"content":"é ✓ \u2028"}', "]}"];
    const bytes = jsonBytes(segments);
    await fx.storage.root.transaction(() => putThreadValues(fx.storage, "t1", bytes));
    bytes.fill(0x20); // lmdb-js copied them during the put
    await fx.storage.threadValues.put("t2", '{"plain":"é"}');
    expect(threadValuesJson(fx.storage, "t1")).toBe(segments.join(""));
    expect(JSON.parse(threadValuesJson(fx.storage, "t1")!)).toEqual({ messages: [{ content: "é ✓ \u2028" }] });
    expect(threadValuesJson(fx.storage, "t2")).toBe('{"plain":"é"}');
  });
});
