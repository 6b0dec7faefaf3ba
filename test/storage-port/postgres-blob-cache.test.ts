// The Postgres saver's blob cache (src/storage/postgres/checkpointer.ts): a long message list a
// put wrote is read back by the thread's next run as the same message objects (no reviving every
// message again), and never once its blob row was rewritten by anyone.
import { AIMessage, HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { describe, expect, it } from "vitest";
import { PostgresCheckpointSaver } from "../../src/storage/postgres/checkpointer.ts";
import { cfg, checkpoint, meta } from "../helpers/checkpoints.ts";
import { usePostgresStorage } from "../helpers/postgres.ts";

const fx = usePostgresStorage();

const conversation = (n: number, tag = "") =>
  Array.from({ length: n }, (_, i) =>
    i % 2 === 0 ? new HumanMessage({ content: `question ${i}${tag}`, id: `m${i}` }) : new AIMessage({ content: `answer ${i}${tag}`, id: `m${i}` }),
  );
const messagesOf = async (saver: PostgresCheckpointSaver, thread: string, id?: string) =>
  (await saver.getTuple(cfg(thread, id)))?.checkpoint.channel_values.messages as BaseMessage[];

describe("blob cache (Postgres saver)", () => {
  it("the next read of a long list the saver put returns the very messages put (nothing revived)", async () => {
    const saver = (await fx.storage.checkpoints.open()).saver() as PostgresCheckpointSaver;
    const list = conversation(300);
    const c1 = checkpoint({ messages: list }, { messages: 1 });
    await saver.put(cfg("t1"), c1, meta(0), { messages: 1 });
    const read = await messagesOf(saver, "t1");
    expect(read.map((m) => m.id)).toEqual(list.map((m) => m.id));
    expect(read).not.toBe(list); // a copy of the list: the caller may change it
    expect(read.every((m, i) => m === list[i])).toBe(true);
    read.push(new HumanMessage("not stored"));
    expect((await messagesOf(saver, "t1")).length).toBe(300);
  });

  it("a blob row rewritten by another saver is read again, not served from the cache", async () => {
    const saver = (await fx.storage.checkpoints.open()).saver() as PostgresCheckpointSaver;
    const other = new PostgresCheckpointSaver(fx.storage.db);
    const c1 = checkpoint({ messages: conversation(200) }, { messages: 1 });
    await saver.put(cfg("t2"), c1, meta(0), { messages: 1 });
    expect((await messagesOf(saver, "t2"))[0].content).toBe("question 0");
    // the same checkpoint put again elsewhere: the same blob key, another value
    await other.put(cfg("t2"), { ...c1, channel_values: { messages: conversation(200, " (rewritten)") } }, meta(0), { messages: 1 });
    await other.flush("t2"); // (another storage's saver: its writes are not ordered before this one's reads)
    expect((await messagesOf(saver, "t2"))[0].content).toBe("question 0 (rewritten)");
  });
});
