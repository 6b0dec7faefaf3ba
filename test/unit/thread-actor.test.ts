// The thread actor in-process (test/helpers/actor-harness.ts): the orderings its commit overlap
// must get right — a run created while the previous one's final commit is in flight, a cancel
// arriving during that commit or while a run executes, a crash between an answered stop and the
// run's end — plus after_seconds on a manual clock. Real LMDB, real LangGraph (the gate graph).
import { describe, expect, it } from "vitest";
import { gateOf } from "../fixtures/actor/gate.ts";
import { ActorHarness } from "../helpers/actor-harness.ts";
import { useTempStorage } from "../helpers/storage.ts";
import { waitUntil } from "../helpers/wait.ts";
import { lmdbStoragePort } from "../../src/storage/lmdb/adapter.ts";
import type { ThreadFilter } from "../../src/storage/port.ts";
import { threadEntries } from "../../src/storage/indexes/threads.ts";
import type { Storage } from "../../src/storage/env.ts";

let n = 0;
/** fresh thread and run ids per test (gates are per run id, process-wide) */
const ids = () => {
  const k = ++n;
  return { t: `thread-${k}-${Date.now()}`, r1: `run-${k}-a`, r2: `run-${k}-b`, r3: `run-${k}-c` };
};

/** The thread index holds exactly the entries of the stored threads (each write diffed against the record it replaced). */
function expectThreadIndexExact(storage: Storage): void {
  storage.root.resetReadTxn();
  const actual: string[] = [];
  for (const key of storage.threadIndex.getKeys({})) {
    for (const dup of storage.threadIndex.getValues(key)) actual.push(JSON.stringify([Array.isArray(key) ? key : [key], dup]));
  }
  const expected = Array.from(storage.threads.getRange({}), ({ value }) => threadEntries(value))
    .flat()
    .map((e) => JSON.stringify([e.key, e.dup]));
  expect(actual.sort()).toEqual(expected.sort());
}

describe("ThreadActor", () => {
  const tmp = useTempStorage("troupe-actor-");

  it("runs queued runs one at a time in acceptance order, each after the previous one's end was sent", async () => {
    const h = new ActorHarness(tmp.storage, tmp.dir);
    const { t, r1, r2 } = ids();
    await h.create(t, r1);
    await h.create(t, r2);
    await waitUntil(() => gateOf(r1).arrivals === 1, { what: "the first run at its gate" });
    expect(gateOf(r2).arrivals).toBe(0); // one run at a time
    expect(h.thread(t)?.status).toBe("busy");
    gateOf(r2).open();
    gateOf(r1).open();
    await h.sentLine(`done ${r2} success idle`);
    expect(h.sent).toEqual([`start ${r1}`, `done ${r1} success busy`, `start ${r2}`, `done ${r2} success idle`]);
    // the second run started before the first one's final commit landed (commit overlap), from its checkpoint
    expect(h.messages(t)).toEqual([`human:${r1}`, `ai:echo ${r1}`, `human:${r2}`, `ai:echo ${r2}`]);
  });

  it("a run created while the previous run's final commit is in flight is handled after that commit, from its state", async () => {
    const h = new ActorHarness(tmp.storage, tmp.dir);
    const { t, r1, r2 } = ids();
    let created: Promise<unknown> | undefined;
    h.onFinishQueued = (threadId) => {
      if (threadId === t && created === undefined) created = h.create(t, r2); // inside the finish, before its commit
    };
    await h.create(t, r1);
    gateOf(r1).open();
    gateOf(r2).open();
    await waitUntil(() => created, { what: "the create issued during the finish" });
    await created;
    await h.sentLine(`done ${r2} success idle`);
    // the end was decided with nothing queued (idle); the create came after it in the mailbox
    expect(h.sent).toEqual([`start ${r1}`, `done ${r1} success idle`, `start ${r2}`, `done ${r2} success idle`]);
    expect(h.messages(t)).toEqual([`human:${r1}`, `ai:echo ${r1}`, `human:${r2}`, `ai:echo ${r2}`]);
    expect(h.run(t, r2)?.status).toBe("success");
  });

  it("a cancel that arrives while the run's end is committing is answered and changes nothing", async () => {
    const h = new ActorHarness(tmp.storage, tmp.dir);
    const { t, r1 } = ids();
    let cancelled: Promise<{ found: boolean }> | undefined;
    h.onFinishQueued = (threadId) => {
      if (threadId === t && cancelled === undefined) cancelled = h.cancel(t, r1);
    };
    await h.create(t, r1);
    gateOf(r1).open();
    await h.sentLine(`done ${r1} success idle`);
    expect(await cancelled).toEqual({ found: true });
    expect(h.run(t, r1)).toMatchObject({ status: "success" });
    expect(h.run(t, r1)?.cancel_reason ?? null).toBeNull();
  });

  it("a cancel of a running run is committed before its reply; the run then ends interrupted", async () => {
    const h = new ActorHarness(tmp.storage, tmp.dir);
    const { t, r1 } = ids();
    await h.create(t, r1);
    await waitUntil(() => gateOf(r1).arrivals === 1, { what: "the run at its gate" });
    expect(await h.cancel(t, r1)).toEqual({ found: true });
    // what a reader sees right after the 202: the stop, on a run that has not ended yet or just did
    expect(h.run(t, r1)?.cancel_reason).toBe("interrupt");
    await h.sentLine(`done ${r1} interrupted idle`);
    expect(h.run(t, r1)).toMatchObject({ status: "interrupted", cancel_reason: "interrupt" });
  });

  it("after a crash between an answered cancel and the run's end, recovery ends the run interrupted without running it, then runs the next", async () => {
    const first = new ActorHarness(tmp.storage, tmp.dir);
    const { t, r1, r2 } = ids();
    await first.create(t, r1);
    await first.create(t, r2);
    await waitUntil(() => gateOf(r1).arrivals === 1, { what: "the run at its gate" });
    // the process dies the moment the stop's write is issued: the stop commits (the cancel is
    // answered), the run's end never does
    const runs = tmp.storage.runs;
    const put = runs.put;
    runs.put = function (this: typeof runs, ...args: Parameters<typeof put>) {
      const written = put.apply(this, args);
      if (args[1]?.cancel_reason) first.kill();
      return written;
    } as typeof put;
    try {
      expect(await first.cancel(t, r1)).toEqual({ found: true });
    } finally {
      runs.put = put;
    }

    const second = await first.restarted();
    gateOf(r2).open();
    await second.sentLine(`done ${r2} success idle`);
    expect(second.sent).toEqual([`done ${r1} interrupted busy`, `start ${r2}`, `done ${r2} success idle`]);
    expect(gateOf(r1).arrivals).toBe(1); // the cancelled run never ran again
    expect(second.run(t, r1)).toMatchObject({ status: "interrupted", cancel_reason: "interrupt" });
    // an interrupted run keeps its progress: its input stays, the next run goes on from there
    expect(second.messages(t)).toEqual([`human:${r1}`, `human:${r2}`, `ai:echo ${r2}`]);
    await second.close();
  });

  it("after a crash mid-run, recovery resumes the run (once) and the queue keeps its order", async () => {
    const first = new ActorHarness(tmp.storage, tmp.dir);
    const { t, r1, r2 } = ids();
    await first.create(t, r1);
    await first.create(t, r2);
    await waitUntil(() => gateOf(r1).arrivals === 1, { what: "the run at its gate" });
    first.kill();
    const second = await first.restarted();
    await waitUntil(() => gateOf(r1).arrivals === 2, { what: "the run resumed at its gate" });
    expect(gateOf(r2).arrivals).toBe(0);
    gateOf(r1).open();
    gateOf(r2).open();
    await second.sentLine(`done ${r2} success idle`);
    expect(second.sent).toEqual([`start ${r1}`, `done ${r1} success busy`, `start ${r2}`, `done ${r2} success idle`]);
    expect(second.run(t, r1)).toMatchObject({ status: "success", attempt: 2 });
    await second.close();
  });

  it("a queued run whose graph ends before the previous run's final commit is not stored running: its finish is its next write", async () => {
    const h = new ActorHarness(tmp.storage, tmp.dir);
    const { t, r1, r2 } = ids();
    // r1's final commit is slow: r2 starts meanwhile and its graph ends before that commit is in
    const commitFirst = await h.endBehindHeldFinish(t, r1, r2);
    expect(h.saves).toEqual([r1]); // r1's running record (it started alone); r2's is held until r1's commit
    commitFirst();
    await h.sentLine(`done ${r2} success idle`);
    expect(h.saves).toEqual([r1]); // (was [r1, r2]: a running record its finish overwrote, on PostgreSQL in the same transaction)
    expect(h.sent).toEqual([`start ${r1}`, `done ${r1} success busy`, `start ${r2}`, `done ${r2} success idle`]);
    expect(h.run(t, r2)).toMatchObject({ status: "success", attempt: 1 });
    expect(h.run(t, r2)?.started_at).toBeDefined();
    expect(h.messages(t)).toEqual([`human:${r1}`, `ai:echo ${r1}`, `human:${r2}`, `ai:echo ${r2}`]);
  });

  it("after a crash that left a run pending with checkpoints of its own (its finish lost), it resumes instead of replaying its input", async () => {
    const first = new ActorHarness(tmp.storage, tmp.dir);
    const { t, r1 } = ids();
    gateOf(r1).open();
    await first.create(t, r1);
    await first.sentLine(`done ${r1} success idle`);
    // the state a crash leaves when a run's checkpoints committed before its record left pending
    // (a queued run whose `running` record was never written, or a batch that committed alone):
    // requeued, it runs with its input, which LangGraph ignores, resuming instead, as the latest
    // checkpoint carries the run's id
    const ended = first.run(t, r1)!;
    const thread = first.thread(t)!;
    await first.ctx.storage.runs.create({ run: { ...ended, status: "pending" }, thread: { ...thread, status: "busy" }, prev: thread }).committed;
    first.kill();
    const second = await first.restarted();
    await second.sentLine(`done ${r1} success idle`);
    expect(gateOf(r1).arrivals).toBe(1); // its graph did not run again
    expect(second.messages(t)).toEqual([`human:${r1}`, `ai:echo ${r1}`]); // not the input once more, nor its echo
    expect(second.run(t, r1)).toMatchObject({ status: "success", attempt: 2 });
    await second.close();
  });

  it("a run with multitask_strategy rollback stops the running one in the same commit as its own create", async () => {
    const h = new ActorHarness(tmp.storage, tmp.dir);
    const { t, r1, r2 } = ids();
    await h.create(t, r1);
    await waitUntil(() => gateOf(r1).arrivals === 1, { what: "the run at its gate" });
    await h.create(t, r2, { strategy: "rollback" });
    expect(h.run(t, r1)?.cancel_reason).toBe("rollback"); // committed with the create's reply
    gateOf(r2).open();
    await h.sentLine(`done ${r2} success idle`);
    expect(h.run(t, r1)).toBeUndefined(); // rolled back: the run and its checkpoints are gone
    expect(h.messages(t)).toEqual([`human:${r2}`, `ai:echo ${r2}`]);
  });

  it("a TTL sweep's delete (ifExpired) keeps a thread whose run started after the sweep read it, or that was updated since", async () => {
    const h = new ActorHarness(tmp.storage, tmp.dir);
    const { t, r1, r2 } = ids();
    await h.create(t, r1);
    gateOf(r1).open();
    await h.sentLine(`done ${r1} success idle`);
    const judged = h.thread(t)!.updated_at; // what a sweep saw: idle and (say) expired
    await h.create(t, r2); // then a run starts before the sweep's delete arrives
    await waitUntil(() => gateOf(r2).arrivals === 1, { what: "the second run at its gate" });
    const del = (updatedAt: string) => h.actor(t).handle({ type: "thread.delete", threadId: t, ifExpired: { updatedAt } });
    expect(await del(judged)).toEqual({ deleted: false }); // running: kept, the run goes on
    gateOf(r2).open();
    await h.sentLine(`done ${r2} success idle`);
    expect(h.run(t, r2)?.status).toBe("success");
    expect(await del(judged)).toEqual({ deleted: false }); // idle again, but updated since the sweep's read
    expect(h.thread(t)).toBeDefined();
    expect(await del(h.thread(t)!.updated_at)).toEqual({ deleted: true }); // unchanged since: deleted
    expect(h.thread(t)).toBeUndefined();
  });

  it("a run's end reads neither its thread nor its run from storage: the actor knows both (a thread's next run reads nothing either)", async () => {
    const h = new ActorHarness(tmp.storage, tmp.dir);
    const { t, r1, r2 } = ids();
    await h.create(t, r1); // a fresh actor reads whether the thread exists: the one read
    expect(h.reads).toEqual({ threads: 1, runs: 0 });
    gateOf(r1).open();
    await h.sentLine(`done ${r1} success idle`);
    expect(h.reads).toEqual({ threads: 1, runs: 0 }); // was 2 and 1: threads.get and runs.exists at the end
    gateOf(r2).open();
    await h.create(t, r2);
    await h.sentLine(`done ${r2} success idle`);
    expect(h.reads).toEqual({ threads: 1, runs: 0 });
    expect(h.thread(t)).toMatchObject({ status: "idle" });
    expect(h.messages(t)).toEqual([`human:${r1}`, `ai:echo ${r1}`, `human:${r2}`, `ai:echo ${r2}`]);
  });

  it("metadata patched between runs: the run's end keeps it, and the LMDB indexes find the thread by its stored status and metadata only", async () => {
    const h = new ActorHarness(tmp.storage, tmp.dir);
    const { t, r1, r2 } = ids();
    const port = lmdbStoragePort(tmp.storage);
    const found = async (f: ThreadFilter): Promise<boolean> => {
      tmp.storage.root.resetReadTxn();
      const page = await port.threads.search({ ...f, ids: [t], sortBy: "created_at", order: "desc", offset: 0, limit: 10 });
      const counted = await port.threads.count({ ...f, ids: [t] });
      const bySort = await port.threads.search({ ...f, sortBy: "updated_at", order: "desc", offset: 0, limit: 1000 });
      expect(counted).toBe(page.items.length);
      expect(bySort.items.some((x) => x.thread_id === t)).toBe(page.items.length > 0);
      return page.items.length > 0;
    };
    gateOf(r1).open();
    await h.create(t, r1);
    await h.sentLine(`done ${r1} success idle`);
    const patched = await h.actor(t).handle({ type: "thread.patch", threadId: t, metadata: { owner: "ann", tier: 1 } });
    expect(patched.metadata).toMatchObject({ owner: "ann", tier: 1, graph_id: "gate" });
    await h.create(t, r2);
    await waitUntil(() => gateOf(r2).arrivals === 1, { what: "the second run at its gate" });
    expect(await found({ status: "busy", metadata: { owner: "ann" } })).toBe(true);
    // patched again while the run runs: its end must write this metadata back, not the one it started with
    await h.actor(t).handle({ type: "thread.patch", threadId: t, metadata: { owner: "bob" } });
    gateOf(r2).open();
    await h.sentLine(`done ${r2} success idle`);
    const stored = h.thread(t);
    expect(stored).toMatchObject({ status: "idle", metadata: { owner: "bob", tier: 1, graph_id: "gate" } });
    // the run's end replaced exactly the stored record (its index entries diffed against it): no stale entry
    expect(await found({ status: "idle", metadata: { owner: "bob", tier: 1 } })).toBe(true);
    expect(await found({ status: "idle" })).toBe(true);
    expect(await found({ status: "busy" })).toBe(false);
    expect(await found({ metadata: { owner: "ann" } })).toBe(false);
    expect(await found({ metadata: { owner: "bob" } })).toBe(true);
    expectThreadIndexExact(tmp.storage);
    const state = await h.actor(t).handle({ type: "thread.state", threadId: t, subgraphs: false });
    expect((state as { metadata?: unknown }).metadata).toBeDefined();
    expect(h.reads.threads).toBe(1); // the first create's; the patches, runs and state read none
  });

  it("a thread deleted while its run runs: the run's end leaves nothing (also when the thread is created again meanwhile)", async () => {
    const h = new ActorHarness(tmp.storage, tmp.dir);
    const { t, r1, r2 } = ids();
    await h.create(t, r1);
    await waitUntil(() => gateOf(r1).arrivals === 1, { what: "the run at its gate" });
    expect(await h.actor(t).handle({ type: "thread.delete", threadId: t })).toEqual({ deleted: true });
    gateOf(r1).open();
    await h.sentLine(`done ${r1} interrupted deleted`);
    expect(h.thread(t)).toBeUndefined();
    expect(h.run(t, r1)).toBeUndefined();
    await expect(h.actor(t).handle({ type: "thread.patch", threadId: t, metadata: {} })).rejects.toMatchObject({ code: "NOT_FOUND" });

    // the same id again, with a run deleted under it while the thread is re-created
    await h.create(t, r2);
    await waitUntil(() => gateOf(r2).arrivals === 1, { what: "the run at its gate" });
    await h.actor(t).handle({ type: "thread.delete", threadId: t });
    const again = await h.actor(t).handle({ type: "thread.create", threadId: t, metadata: { again: true }, ifExists: "raise" });
    gateOf(r2).open();
    await h.sentLine(`done ${r2} interrupted deleted`);
    expect(h.run(t, r2)).toBeUndefined();
    expect(h.thread(t)).toEqual(again); // the new thread, untouched by the old run's end
    expectThreadIndexExact(tmp.storage);
    expect(h.reads).toEqual({ threads: 1, runs: 0 });
  });

  it("a queued run cancelled on its own (its commit writes the thread's status): the running run's end replaces the record it wrote exactly", async () => {
    const h = new ActorHarness(tmp.storage, tmp.dir);
    const { t, r1, r2 } = ids();
    await h.create(t, r1);
    await h.create(t, r2);
    await waitUntil(() => gateOf(r1).arrivals === 1, { what: "the first run at its gate" });
    expect(await h.cancel(t, r2)).toEqual({ found: true });
    expect(h.run(t, r2)?.status).toBe("interrupted");
    expect(h.reads.threads).toBe(1);
    gateOf(r1).open();
    await h.sentLine(`done ${r1} success idle`);
    expect(h.reads).toEqual({ threads: 1, runs: 0 }); // the actor knows what stopQueued wrote: the stored record, its status and updated_at
    expect(h.thread(t)?.status).toBe("idle");
    expectThreadIndexExact(tmp.storage);
  });

  it("starts a run with after_seconds when the clock reaches it, not before", async () => {
    const h = new ActorHarness(tmp.storage, tmp.dir);
    const { t, r1 } = ids();
    gateOf(r1).open();
    await h.create(t, r1, { afterSeconds: 60 });
    await h.clock.advance(59_000);
    expect(h.sent).toEqual([]);
    expect(h.thread(t)?.status).toBe("busy");
    await h.clock.advance(1_000);
    await h.sentLine(`done ${r1} success idle`);
    expect(h.sent).toEqual([`start ${r1}`, `done ${r1} success idle`]);
  });
});
