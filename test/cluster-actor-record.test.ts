// The thread record a thread actor keeps (docs/STORAGE.md "The thread actor's record") on a
// cluster node: real PostgreSQL, the actor in-process over the port a shard uses, fenced with
// its lease holding (as thread.recover does). The record is good only under the holding it was
// learnt in: after the lease went to another node (which wrote the thread) and came back, the
// actor reads it again; a write the fence refused forgets it; an unfenced thread is always read.
import { describe, expect, it } from "vitest";
import { acquireLease, handOverLease, releaseLease, type Lease } from "../src/cluster/leases.ts";
import { databaseStamp } from "../src/cluster/time.ts";
import { runCheckpointMetadata } from "../src/actors/run-checkpoint-saver.ts";
import type { PostgresStorage } from "../src/storage/postgres/adapter.ts";
import { nowIso } from "../src/storage/records.ts";
import { gateOf } from "./fixtures/actor/gate.ts";
import { ActorHarness } from "./helpers/actor-harness.ts";
import { usePostgresNodePair } from "./helpers/postgres.ts";
import { waitUntil } from "./helpers/wait.ts";

const nodes = usePostgresNodePair();
const timing = { ttlMs: 15_000, stamp: databaseStamp };

/** `node` takes the thread's lease and fences its writes with the holding (a shard's thread.recover). */
async function hold(node: PostgresStorage, threadId: string, nodeId: string): Promise<Lease> {
  const lease = await acquireLease(node.db, threadId, nodeId, timing);
  if (lease === undefined) throw new Error(`${nodeId} could not take ${threadId}`);
  node.fences!.fence(threadId, lease.epoch);
  return lease;
}

/** The holder of `held` lost it (paused past its lease, not told): `next` takes the thread (a new epoch). */
async function moveTo(held: Lease, next: PostgresStorage, nodeId: string): Promise<Lease> {
  await handOverLease(next.db, held);
  return hold(next, held.threadId, nodeId);
}

async function actorsOn(node: PostgresStorage): Promise<ActorHarness> {
  const saver = (await node.checkpoints.open()).saver({ putMetadata: runCheckpointMetadata });
  return ActorHarness.onPort({ port: node, saver });
}

describe("the thread actor's record on a cluster node (Postgres)", () => {
  it("is read again after the lease moved away and came back; a refused write forgets it; unfenced it is always read", async () => {
    const t = "00000000-0000-4000-8000-0000000ac001";
    const [r1, r2] = ["00000000-0000-7000-8000-0000000ac0a1", "00000000-0000-7000-8000-0000000ac0a2"];
    const h = await actorsOn(nodes.a);
    const first = await hold(nodes.a, t, "node-a");
    gateOf(r1).open();
    await h.create(t, r1);
    await h.sentLine(`done ${r1} success idle`);
    // the create read whether the thread exists; its end read nothing (was: threads.get + runs.exists)
    expect(h.reads).toEqual({ threads: 1, runs: 0 });

    // the lease moves to B, whose actor writes the thread (a PATCH), and then comes back to A
    const second = await moveTo(first, nodes.b, "node-b");
    const seen = (await nodes.b.threads.get(t))!;
    expect(seen.status).toBe("idle");
    await nodes.b.threads.save({ ...seen, metadata: { ...seen.metadata, owner: "patched on B" }, updated_at: nowIso() });
    const third = await moveTo(second, nodes.a, "node-a");
    expect(third.epoch).toBeGreaterThan(first.epoch);

    // the same actor object on A (no abandon reached it): its record is of an older holding, read again
    gateOf(r2).open();
    await h.create(t, r2);
    await h.sentLine(`done ${r2} success idle`);
    expect(h.reads).toEqual({ threads: 2, runs: 0 });
    expect(await nodes.a.threads.get(t)).toMatchObject({ status: "idle", metadata: { owner: "patched on B", graph_id: "gate" } });
    expect((await nodes.a.runs.get(t, r2))?.status).toBe("success");

    // B takes the lease again without A hearing of it: A's next write is refused, and forgets the record
    await moveTo(third, nodes.b, "node-b");
    await expect(h.actor(t).handle({ type: "thread.patch", threadId: t, metadata: { owner: "lost on A" } })).rejects.toMatchObject({
      code: "UNAVAILABLE",
    });
    expect(h.reads.threads).toBe(2); // the patch itself used the known record
    await h.actor(t).handle({ type: "thread.state", threadId: t, subgraphs: false });
    expect(h.reads.threads).toBe(3); // read again: the refused write dropped it (same epoch on A's side)
    expect((await nodes.a.threads.get(t))?.metadata.owner).toBe("patched on B");

    // unfenced (no holding on this node): never served from memory
    nodes.a.fences!.unfence(t);
    await h.actor(t).handle({ type: "thread.state", threadId: t, subgraphs: false });
    await h.actor(t).handle({ type: "thread.state", threadId: t, subgraphs: false });
    expect(h.reads.threads).toBe(5);
  });

  it("a run's end under one holding reads nothing, and a thread deleted during the run leaves nothing", async () => {
    const t = "00000000-0000-4000-8000-0000000ac002";
    const [r1, r2] = ["00000000-0000-7000-8000-0000000ac0b1", "00000000-0000-7000-8000-0000000ac0b2"];
    const h = await actorsOn(nodes.a);
    await hold(nodes.a, t, "node-a");
    gateOf(r1).open();
    await h.create(t, r1);
    await h.sentLine(`done ${r1} success idle`);
    await h.actor(t).handle({ type: "thread.patch", threadId: t, metadata: { owner: "ann" } });
    await h.create(t, r2);
    await waitUntil(() => gateOf(r2).arrivals === 1, { what: "the second run at its gate" });
    expect(
      (await nodes.a.threads.search({ metadata: { owner: "ann" }, status: "busy", sortBy: "created_at", order: "desc", offset: 0, limit: 10 })).items,
    ).toHaveLength(1);
    expect(await h.actor(t).handle({ type: "thread.delete", threadId: t })).toEqual({ deleted: true });
    gateOf(r2).open();
    await h.sentLine(`done ${r2} interrupted deleted`);
    expect(await nodes.a.threads.get(t)).toBeUndefined();
    expect(await nodes.a.runs.get(t, r2)).toBeUndefined();
    expect(await nodes.a.runs.get(t, r1)).toBeUndefined();
    expect(h.reads).toEqual({ threads: 1, runs: 0 });
  });
  it("the record read with the lease take (as thread.recover carries it) starts the actor without a read, with what the last holder wrote before its release", async () => {
    const t = "00000000-0000-4000-8000-0000000ac003";
    const r1 = "00000000-0000-7000-8000-0000000ac0c1";
    // B held the thread and wrote it, then released the lease idle (the row deleted)
    const onB = await hold(nodes.b, t, "node-b");
    const now = nowIso();
    await nodes.b.threads.create({ thread_id: t, created_at: now, updated_at: now, metadata: { owner: "written on B" }, status: "idle", config: {} });
    expect(await releaseLease(nodes.b.db, onB)).toBe(true);
    nodes.b.fences!.unfence(t);
    // A takes it with the record read in the same round trip
    const taken = await acquireLease(nodes.a.db, t, "node-a", timing, true);
    expect(taken).toMatchObject({ recover: false, thread: { thread_id: t, metadata: { owner: "written on B" } } });
    expect(await acquireLease(nodes.a.db, "00000000-0000-4000-8000-0000000ac0ff", "node-a", timing, true)).toMatchObject({ thread: null });
    nodes.a.fences!.fence(t, taken!.epoch);
    const h = await actorsOn(nodes.a);
    h.actor(t).learnThread(taken!.thread ?? undefined, taken!.epoch);
    gateOf(r1).open();
    await h.create(t, r1);
    await h.sentLine(`done ${r1} success idle`);
    expect(h.reads).toEqual({ threads: 0, runs: 0 }); // was: the create's thread read
    expect(await nodes.a.threads.get(t)).toMatchObject({ status: "idle", metadata: { owner: "written on B", graph_id: "gate" } });
    // learnt under another holding: ignored (the next command reads)
    const other = "00000000-0000-4000-8000-0000000ac004";
    const held = await hold(nodes.a, other, "node-a");
    h.actor(other).learnThread({ thread_id: other, created_at: now, updated_at: now, metadata: { stale: true }, status: "idle", config: {} }, held.epoch - 1);
    gateOf("00000000-0000-7000-8000-0000000ac0c2").open();
    await h.create(other, "00000000-0000-7000-8000-0000000ac0c2");
    await h.sentLine("done 00000000-0000-7000-8000-0000000ac0c2 success idle");
    expect(h.reads).toEqual({ threads: 1, runs: 0 });
    expect((await nodes.a.threads.get(other))?.metadata).not.toHaveProperty("stale");
  });
});
