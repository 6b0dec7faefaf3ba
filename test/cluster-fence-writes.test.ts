// The lease fence reaching the writes (docs/CLUSTER.md "Wiring" 3), on a real PostgreSQL through the
// storage port a cluster node's shard uses: while a thread's holding is set (`fences.fence`), its
// run writes and checkpoint writes commit; once another node took the lease over (a new epoch),
// every write of the old holding is refused — nothing of it lands, the refusal listener is told
// (the shard abandons the thread's actor on it) — and the new holder's writes commit.
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { acquireLease, handOverLease, type Lease } from "../src/cluster/leases.ts";
import { databaseStamp } from "../src/cluster/time.ts";
import { openPostgresStorage, type PostgresStorage } from "../src/storage/postgres/adapter.ts";
import { threadRowValues, upsertThreadSql } from "../src/storage/postgres/threads.ts";
import type { ThreadWriteChains } from "../src/storage/postgres/write-chains.ts";
import type { RunRecord, ThreadRecord, WebhookDeliveryRecord } from "../src/storage/records.ts";
import { newWebhookDelivery } from "../src/webhooks/outbox.ts";
import { cfg, checkpoint, meta } from "./helpers/checkpoints.ts";
import { usePostgresDatabase } from "./helpers/postgres.ts";
import { runRecord, threadRecord } from "./helpers/records.ts";

const database = usePostgresDatabase();
let oldNode: PostgresStorage;
let newNode: PostgresStorage;
const timing = { ttlMs: 15_000, stamp: databaseStamp };

beforeAll(async () => {
  oldNode = await openPostgresStorage({ uri: database.uri, maxConnections: 4 });
  newNode = await openPostgresStorage({ uri: database.uri, maxConnections: 4, migrate: false });
});

afterAll(async () => {
  await oldNode?.close();
  await newNode?.close();
});

const thread = (id: string, status: ThreadRecord["status"], over: Partial<ThreadRecord> = {}): ThreadRecord => threadRecord(id, { status, ...over });
const run = (threadId: string, runId: string): RunRecord => runRecord(threadId, runId);
const delivery = (r: RunRecord): WebhookDeliveryRecord =>
  newWebhookDelivery({ ...r, kwargs: { ...r.kwargs, webhook: "http://127.0.0.1:9/hook" } }, undefined, true);

/** `node` takes the thread's lease and fences its writes with the holding (as a shard's thread.recover). */
async function hold(node: PostgresStorage, threadId: string, nodeId: string): Promise<Lease> {
  const lease = (await acquireLease(node.db, threadId, nodeId, timing))!;
  node.fences!.fence(threadId, lease.epoch);
  return lease;
}

/** The holder of `held` is paused past its lease: `next` takes the thread over (a new epoch). */
async function takeOver(held: Lease, next: PostgresStorage, nodeId: string): Promise<Lease> {
  await handOverLease(next.db, held);
  return hold(next, held.threadId, nodeId);
}

/** The threads whose writes `node` has refused from now on (its refused listener, as the shard's). */
function refusals(node: PostgresStorage): string[] {
  const refused: string[] = [];
  node.fences!.onRefused((t) => refused.push(t));
  return refused;
}

describe("fenced writes (cluster mode, Postgres)", () => {
  it("a holding's writes commit until the lease moves; then they are refused and the listener told", async () => {
    const threadId = "00000000-0000-4000-8000-00000000fe01";
    const refused = refusals(oldNode);
    const first = await hold(oldNode, threadId, "node-old");
    await oldNode.threads.create(thread(threadId, "idle"));
    const r = run(threadId, "00000000-0000-7000-8000-0000000000a1");
    await oldNode.runs.create({ run: r, thread: thread(threadId, "busy"), prev: undefined }).committed;
    await oldNode.runs.save({ ...r, status: "running", attempt: 1 }).committed;
    const oldSaver = (await oldNode.checkpoints.open()).saver();
    await oldSaver.put(cfg(threadId), checkpoint({ v: 1 }, { v: 1 }), meta(0, { run_id: r.run_id }), { v: 1 });
    // committed before the lease moves (a put resolves once issued: under load it could still be waiting for a connection)
    expect((await oldSaver.getTuple(cfg(threadId)))?.checkpoint.channel_values).toEqual({ v: 1 });
    expect(refused).toEqual([]);

    // the old holder is paused past its lease: another node takes the thread over (new epoch)
    const second = await takeOver(first, newNode, "node-new");
    expect(second.epoch).toBeGreaterThan(first.epoch);

    // every write of the old holding is refused, nothing of it lands
    await expect(oldNode.runs.save({ ...r, status: "running", attempt: 2 }).committed).rejects.toMatchObject({ code: "UNAVAILABLE" });
    const end = {
      run: { ...r, status: "success" as const, attempt: 1 },
      thread: thread(threadId, "idle"),
      prev: thread(threadId, "busy"),
      valuesJson: Buffer.from("[1]"),
    };
    await expect(oldNode.runs.finish(end).committed).rejects.toMatchObject({ code: "UNAVAILABLE" });
    // a put resolves once issued (issued-writes.ts): its refusal is reported by the thread's next checkpoint read
    await oldSaver.put(cfg(threadId), checkpoint({ v: 2 }, { v: 2 }), meta(1, { run_id: r.run_id }), { v: 2 });
    await expect(oldSaver.getTuple(cfg(threadId))).rejects.toMatchObject({ code: "UNAVAILABLE" });
    const r2 = run(threadId, "00000000-0000-7000-8000-0000000000a2");
    await expect(oldNode.runs.create({ run: r2, thread: thread(threadId, "busy"), prev: undefined }).committed).rejects.toMatchObject({ code: "UNAVAILABLE" });
    expect(refused.length).toBeGreaterThanOrEqual(1);
    expect(new Set(refused)).toEqual(new Set([threadId]));
    expect(await newNode.runs.get(threadId, r.run_id)).toMatchObject({ status: "running", attempt: 1 });
    expect(await newNode.runs.get(threadId, r2.run_id)).toBeUndefined();
    expect((await newNode.threads.get(threadId))?.status).toBe("busy");
    expect(await newNode.threads.valuesJson(threadId)).toBeUndefined();

    // the new holder's writes commit
    await newNode.runs.save({ ...r, status: "running", attempt: 2 }).committed;
    await newNode.runs.finish({ ...end, run: { ...r, status: "success", attempt: 2 } }).committed;
    expect(await newNode.runs.get(threadId, r.run_id)).toMatchObject({ status: "success", attempt: 2 });
    expect((await newNode.threads.get(threadId))?.status).toBe("idle");
  });

  it("a refused write in a pipelined batch rejects alone: the batch's writes of the new holding commit with it", async () => {
    const threadId = "00000000-0000-4000-8000-00000000fe02";
    const first = await hold(oldNode, threadId, "node-a");
    await oldNode.threads.create(thread(threadId, "idle"));
    const r = run(threadId, "00000000-0000-7000-8000-0000000000b1");
    await oldNode.runs.create({ run: r, thread: thread(threadId, "busy"), prev: undefined }).committed;
    const saver = (await oldNode.checkpoints.open()).saver();

    // the thread's writes queue behind a hold, so they leave together as one batch (write-chains.ts)
    let release!: () => void;
    saver.holdWritesUntil(threadId, new Promise<void>((resolve) => (release = resolve)));
    const refusedSave = oldNode.runs.save({ ...r, status: "running", attempt: 1 }).committed;
    const refusedPut = saver.put(cfg(threadId), checkpoint({ v: 1 }, { v: 1 }), meta(0, { run_id: r.run_id }), { v: 1 });
    // meanwhile the lease moved (expired, then taken again: by this same node, under a new epoch)
    await takeOver(first, oldNode, "node-a");
    const heldSave = oldNode.runs.save({ ...r, status: "running", attempt: 2 }).committed;
    const heldPut = saver.put(cfg(threadId), checkpoint({ v: 2 }, { v: 2 }), meta(1, { run_id: r.run_id }), { v: 2 });
    release();

    await expect(refusedSave).rejects.toMatchObject({ code: "UNAVAILABLE" });
    // puts resolve once issued (issued-writes.ts): the refused one is reported by the thread's next checkpoint read, once
    await refusedPut;
    await heldSave;
    await heldPut;
    await expect(saver.getTuple(cfg(threadId))).rejects.toMatchObject({ code: "UNAVAILABLE" });
    expect(await newNode.runs.get(threadId, r.run_id)).toMatchObject({ status: "running", attempt: 2 });
    const checkpoints = [];
    for await (const c of saver.list(cfg(threadId))) checkpoints.push(c.checkpoint.channel_values);
    expect(checkpoints).toEqual([{ v: 2 }]);
  });

  it("the thread's writes outside a run are fenced too: an old holding's state update, cancel, deletes and checkpoint edits are refused, the new holding's commit", async () => {
    const threadId = "00000000-0000-4000-8000-00000000fe03";
    const refused = refusals(oldNode);
    const first = await hold(oldNode, threadId, "node-old");
    const oldSaver = (await oldNode.checkpoints.open()).saver();
    // while the holding stands, each of these writes commits (the unfenced case is the storage-port conformance)
    expect(await oldNode.threads.create(thread(threadId, "idle"))).not.toBe("exists");
    const ended = run(threadId, "00000000-0000-7000-8000-0000000000c1");
    const queued = run(threadId, "00000000-0000-7000-8000-0000000000c2");
    await oldNode.runs.create({ run: ended, thread: thread(threadId, "busy") }).committed;
    await oldNode.runs.finish({ run: { ...ended, status: "success" }, thread: thread(threadId, "idle"), valuesJson: undefined }).committed;
    await oldNode.runs.create({ run: queued, thread: thread(threadId, "busy") }).committed;
    await oldSaver.put(cfg(threadId), checkpoint({ v: 1 }, { v: 1 }), meta(0, { run_id: ended.run_id }), { v: 1 });
    await oldSaver.put(cfg(threadId), checkpoint({ v: 2 }, { v: 2 }), meta(1, { run_id: ended.run_id }), { v: 2 });
    await oldNode.threads.save(thread(threadId, "busy", { metadata: { by: "old" } }), "[1]");
    expect(await oldSaver.patchMetadata(threadId, { by: "old" })).toBe(true);
    expect(refused).toEqual([]);

    // another node takes the thread over (new epoch)
    await takeOver(first, newNode, "node-new");

    const unavailable = { code: "UNAVAILABLE" };
    const now = "2026-01-01T00:01:00.000Z";
    const stop = { final: { ...queued, status: "interrupted" as const, cancel_reason: "interrupt" as const, ended_at: now } };
    // the thread record (update_state, supersteps, PATCH), with and without its values
    await expect(oldNode.threads.save(thread(threadId, "idle", { metadata: { by: "stale" } }), "[2]")).rejects.toMatchObject(unavailable);
    await expect(oldNode.threads.save(thread(threadId, "idle", { metadata: { by: "stale" } }))).rejects.toMatchObject(unavailable);
    // a queued run's cancel (a transaction: the fence goes with its BEGIN)
    await expect(oldNode.runs.stopQueued(threadId, stop, "idle", now)).rejects.toMatchObject(unavailable);
    // a run's delete, the checkpoint edits outside a run, the thread's delete
    await expect(oldNode.runs.delete(threadId, ended.run_id)).rejects.toMatchObject(unavailable);
    await expect(oldSaver.patchMetadata(threadId, { by: "stale" })).rejects.toMatchObject(unavailable);
    await expect(oldSaver.pruneToLatest(threadId)).rejects.toMatchObject(unavailable);
    await expect(oldSaver.deleteCheckpointsOfRun(threadId, ended.run_id)).rejects.toMatchObject(unavailable);
    const copyId = "00000000-0000-4000-8000-00000000fe04";
    await expect(oldSaver.copyThread(threadId, copyId)).rejects.toMatchObject(unavailable);
    await expect(oldSaver.deleteThread(threadId)).rejects.toMatchObject(unavailable);
    await expect(oldNode.threads.delete(threadId)).rejects.toMatchObject(unavailable);
    await expect(oldNode.threads.delete(threadId, { runId: queued.run_id, delivery: delivery(queued) })).rejects.toMatchObject(unavailable);
    expect(new Set(refused)).toEqual(new Set([threadId]));
    expect(refused.length).toBe(11);

    // nothing of them landed
    const newSaver = (await newNode.checkpoints.open()).saver();
    expect(await newNode.threads.get(threadId)).toMatchObject({ status: "busy", metadata: { by: "old" } });
    expect(await newNode.threads.valuesJson(threadId)).toBe("[1]");
    expect(await newNode.runs.get(threadId, ended.run_id)).toMatchObject({ status: "success" });
    expect(await newNode.runs.get(threadId, queued.run_id)).toMatchObject({ status: "pending" });
    expect(await newNode.webhooks.get({ threadId, runId: queued.run_id })).toBeUndefined();
    const history = [];
    for await (const c of newSaver.list(cfg(threadId))) history.push({ values: c.checkpoint.channel_values, by: (c.metadata as { by?: string }).by });
    expect(history).toEqual([
      { values: { v: 2 }, by: "old" },
      { values: { v: 1 }, by: undefined },
    ]);
    expect(await newSaver.getTuple(cfg(copyId))).toBeUndefined();

    // the new holding's writes commit
    await newNode.threads.save(thread(threadId, "busy", { metadata: { by: "new" } }), "[3]");
    await newNode.runs.stopQueued(threadId, stop, "idle", now);
    expect(await newNode.runs.get(threadId, queued.run_id)).toMatchObject({ status: "interrupted" });
    expect(await newNode.threads.get(threadId)).toMatchObject({ status: "idle", metadata: { by: "new" } });
    expect(await newSaver.patchMetadata(threadId, { by: "new" })).toBe(true);
    expect(await newSaver.pruneToLatest(threadId)).toBe(1);
    await newSaver.copyThread(threadId, copyId);
    expect((await newSaver.getTuple(cfg(copyId)))?.checkpoint.channel_values).toEqual({ v: 2 });
    expect(await newSaver.deleteCheckpointsOfRun(threadId, ended.run_id)).toBe(1);
    await newNode.runs.delete(threadId, ended.run_id);
    expect(await newNode.runs.get(threadId, ended.run_id)).toBeUndefined();
    await newSaver.deleteThread(threadId);
    await newNode.threads.delete(threadId);
    expect(await newNode.threads.get(threadId)).toBeUndefined();
    expect(await newNode.runs.get(threadId, queued.run_id)).toBeUndefined();
  });

  it("a thread create under an old holding is refused; under the current one it creates (or finds) the thread", async () => {
    const threadId = "00000000-0000-4000-8000-00000000fe05";
    await takeOver(await hold(oldNode, threadId, "node-old"), newNode, "node-new");
    await expect(oldNode.threads.create(thread(threadId, "idle"))).rejects.toMatchObject({ code: "UNAVAILABLE" });
    expect(await newNode.threads.get(threadId)).toBeUndefined();
    expect(await newNode.threads.create(thread(threadId, "idle"))).toMatchObject({ thread_id: threadId });
    expect(await newNode.threads.create(thread(threadId, "idle"))).toBe("exists");
  });

  it("a fenced transaction is checked at its commit: a steal while it runs does not wait for it, and it then rolls back whole", async () => {
    const threadId = "00000000-0000-4000-8000-00000000fe06";
    const refused = refusals(oldNode);
    const first = await hold(oldNode, threadId, "node-old");
    await oldNode.threads.create(thread(threadId, "idle"));
    const save = (c: pg.PoolClient, by: string) => c.query(upsertThreadSql(1), threadRowValues(thread(threadId, "idle", { metadata: { by } })));
    let began!: () => void;
    const inside = new Promise<void>((resolve) => (began = resolve));
    let proceed!: () => void;
    const gate = new Promise<void>((resolve) => (proceed = resolve));
    const tx = (oldNode.fences as ThreadWriteChains).transaction(oldNode.db.pool, threadId, async (c) => {
      await save(c, "stale");
      began();
      await gate; // the node pauses mid-transaction
      await c.query("INSERT INTO thread_ttls (thread_id, minutes) VALUES ($1, 5)", [threadId]);
    });
    await inside;
    // the steal does not wait for the paused transaction: it holds no lock on the lease row
    await takeOver(first, newNode, "node-new");
    proceed();
    await expect(tx).rejects.toMatchObject({ code: "UNAVAILABLE" });
    expect(refused).toEqual([threadId]);
    expect((await newNode.threads.get(threadId))?.metadata).toEqual({});
    expect(await newNode.threads.ttl(threadId)).toBeUndefined();
    // the new holding's transaction commits
    await (newNode.fences as ThreadWriteChains).transaction(newNode.db.pool, threadId, (c) => save(c, "new"));
    expect((await newNode.threads.get(threadId))?.metadata).toEqual({ by: "new" });
  });
});
