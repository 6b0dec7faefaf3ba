// The Postgres saver's in-flight view (src/storage/postgres/inflight-checkpoints.ts): the latest
// root checkpoint is read while its writes are still held back, exactly as the read after the
// commit returns it; and never when it could differ (an older put, other writes, another holding).
import { AIMessage, HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { ERROR } from "@langchain/langgraph-checkpoint";
import { describe, expect, it } from "vitest";
import type { PostgresCheckpointSaver } from "../../src/storage/postgres/checkpointer.ts";
import { cfg, checkpoint, meta, putChild } from "../helpers/checkpoints.ts";
import { usePostgresStorage } from "../helpers/postgres.ts";

const fx = usePostgresStorage();
let serial = 0;
const nextThread = (tag: string) => `${tag}-${process.pid}-${++serial}`;
const openSaver = async () => (await fx.storage.checkpoints.open()).saver() as PostgresCheckpointSaver;

/** Holds the thread's writes back until `release()`: nothing issued from now on commits before. */
function barrier(saver: PostgresCheckpointSaver, thread: string): () => void {
  let release!: () => void;
  saver.holdWritesUntil(thread, new Promise<void>((resolve) => (release = resolve)));
  return release;
}

/** Answers `read` if it resolves while the writes are held, else "waited for the commit". */
async function whileHeld<T>(read: Promise<T>): Promise<T | "waited for the commit"> {
  // the view answers without any round trip; a read waiting for held writes never would
  return Promise.race([read, new Promise<"waited for the commit">((resolve) => setTimeout(() => resolve("waited for the commit"), 3_000))]);
}

const longList = (tag: string): BaseMessage[] =>
  Array.from({ length: 80 }, (_, i) => new AIMessage({ content: `${tag} ${i} ${"x".repeat(100)}`, id: `${tag}${i}` })); // chunked (64 per chunk)

describe("reads of the latest checkpoint while its writes are in flight (Postgres)", () => {
  it("answers from the puts and writes in flight exactly as after the commit, without waiting for it", async () => {
    const saver = await openSaver();
    const t = nextThread("p");
    expect(await saver.getTuple(cfg(t))).toBeUndefined(); // read: the thread has no checkpoint yet
    let release = barrier(saver, t);
    const messages = longList("m");
    const c1 = await putChild(
      saver,
      t,
      undefined,
      { messages, foo: "a", small: [1, 2] },
      { messages: 1, foo: 1, small: 1 },
      { messages: 1, foo: 1, small: 1 },
      meta(-1, { source: "input" }),
    );
    await saver.putWrites(
      cfg(t, c1),
      [
        ["foo", "first"],
        ["foo", "second"],
      ],
      "task-1",
    );
    await saver.putWrites(cfg(t, c1), [["foo", "ignored: a regular write is first-wins"]], "task-1");
    await saver.putWrites(cfg(t, c1), [[ERROR, { message: "one" }]], "task-2");
    await saver.putWrites(cfg(t, c1), [[ERROR, { message: "two: special writes overwrite" }]], "task-2");
    const first = await whileHeld(saver.getTuple(cfg(t)));
    expect(first).not.toBe("waited for the commit");
    release();
    await saver.flush(t);
    expect(await saver.getTuple(cfg(t))).toEqual(first);

    // the next run: puts on top of the committed latest (read above), none committed in between
    release = barrier(saver, t);
    const c2 = await putChild(saver, t, c1, { messages, foo: "b", small: [1, 2] }, { messages: 1, foo: 2, small: 1 }, { foo: 2 }, meta(0, { run_id: "r1" }));
    const more = [...messages, new HumanMessage({ content: "more", id: "h1" })];
    const c3 = await putChild(
      saver,
      t,
      c2,
      { messages: more, foo: "b", small: [1, 2] },
      { messages: 2, foo: 2, small: 1, gone: 1 },
      { messages: 2, gone: 1 },
      meta(1, { run_id: "r1" }),
    );
    await saver.putWrites(cfg(t, c3), [["messages", [new AIMessage({ content: "pending", id: "a1" })]]], "task-3");
    const latest = await whileHeld(saver.getTuple(cfg(t)));
    const byId = await whileHeld(saver.getTuple(cfg(t, c3)));
    expect(latest).not.toBe("waited for the commit");
    expect(byId).toEqual(latest);
    // a served tuple shares nothing with the next one (the graph may change what it got)
    const served = latest as Exclude<typeof latest, "waited for the commit" | undefined>;
    (served.checkpoint.channel_values.messages as unknown[]).push("changed by the reader");
    release();
    await saver.flush(t);
    const committed = await saver.getTuple(cfg(t));
    expect(committed?.checkpoint.channel_values.messages).toHaveLength(81);
    expect(committed).toEqual(byId);
    expect(committed?.parentConfig?.configurable?.checkpoint_id).toBe(c2);
    expect(Object.keys(committed!.checkpoint.channel_values).sort()).toEqual(["foo", "messages", "small"]); // gone@1 has no value
  });

  it("is not used for a put older than the latest, after other writes to the thread, or under another lease holding", async () => {
    const saver = await openSaver();
    const t = nextThread("o");
    await saver.getTuple(cfg(t));
    const older = checkpoint({ step: 0 }, { step: 1 }); // its id is made first: it sorts before c1
    const c1 = await putChild(saver, t, undefined, { step: 1 }, { step: 1 }, { step: 1 }, meta(0));
    let release = barrier(saver, t);
    await saver.put(cfg(t), older, meta(0), { step: 1 });
    // not served: the read waits for the commit and finds c1 still the latest
    expect(await whileHeld(saver.getTuple(cfg(t)))).toBe("waited for the commit");
    release();
    expect((await saver.getTuple(cfg(t)))?.checkpoint.id).toBe(c1);

    // a put, then a rollback of its run (a transaction): the read after it does not see the put
    const c2 = await putChild(saver, t, c1, { step: 2 }, { step: 2 }, { step: 2 }, meta(1, { run_id: "gone" }));
    expect(await saver.deleteCheckpointsOfRun(t, "gone")).toBe(1);
    expect((await saver.getTuple(cfg(t)))?.checkpoint.id).toBe(c1);
    expect(c2).not.toBe(c1);

    // metadata patched by a transaction after a put: read from the database, patched
    await putChild(saver, t, c1, { step: 3 }, { step: 3 }, { step: 3 }, meta(1));
    await saver.patchMetadata(t, { patched: true });
    expect((await saver.getTuple(cfg(t)))?.metadata).toMatchObject({ patched: true });

    // a put made under another holding of the thread's lease (cluster mode) is not served to this one
    const read = (await saver.getTuple(cfg(t)))!;
    const fences = fx.storage.fences!;
    fences.fence(t, 7);
    release = barrier(saver, t);
    const fenced = saver.put(cfg(t, read.checkpoint.id), checkpoint({ step: 4 }, { step: 4 }), meta(2), { step: 4 });
    await fenced;
    fences.fence(t, 8); // the lease moved and came back
    expect(await whileHeld(saver.getTuple(cfg(t)))).toBe("waited for the commit");
    fences.unfence(t);
    release();
    await saver.flush(t).catch(() => undefined); // (no lease row: the fenced put is refused)

    await saver.deleteThread(t);
    expect(await saver.getTuple(cfg(t))).toBeUndefined();
  });
});
