// What a run queued on a busy thread costs PostgreSQL (enqueue-1000): the thread actor in-process
// over the Postgres port a shard uses (test/helpers/actor-harness.ts), the real saver and the gate
// graph, every statement the driver sends recorded (the driver's side of the timeline trace,
// src/storage/postgres/driver-trace.ts) — counts, not timings.
import { describe, expect, it } from "vitest";
import { runCheckpointMetadata } from "../../src/actors/run-checkpoint-saver.ts";
import { acquireLease } from "../../src/cluster/leases.ts";
import { databaseStamp } from "../../src/cluster/time.ts";
import { traceDriver } from "../../src/storage/postgres/driver-trace.ts";
import { gateOf } from "../fixtures/actor/gate.ts";
import { ActorHarness } from "../helpers/actor-harness.ts";
import { usePostgresStorage } from "../helpers/postgres.ts";
import { waitUntil } from "../helpers/wait.ts";

const fx = usePostgresStorage();

/** the names (or first words) of the statements sent while `recording` */
const sent: string[] = [];
let recording = false;
traceDriver((what) => {
  const m = /^pg\.send #\d+ c\d+ (.*)$/.exec(what);
  if (recording && m) sent.push(m[1]);
});

let n = 0;
const ids = () => {
  const k = ++n;
  const hex = (i: number) => `00000000-0000-7000-8000-${String(k * 10 + i).padStart(12, "0")}`;
  return { t: `00000000-0000-4000-8000-${String(k).padStart(12, "0")}`, r1: hex(1), r2: hex(2) };
};

async function harness(): Promise<ActorHarness> {
  const saver = (await fx.storage.checkpoints.open()).saver({ putMetadata: runCheckpointMetadata });
  return ActorHarness.onPort({ port: fx.storage, saver });
}

describe("a queued run on PostgreSQL", () => {
  it("whose graph ended before the previous run's final commit writes no `running` record: its finish is its next write", async () => {
    const h = await harness();
    const { t, r1, r2 } = ids();
    // r1's final commit is slow (as seen by its actor): r2 runs meanwhile, and its graph ends first
    const commitFirst = await h.endBehindHeldFinish(t, r1, r2);
    await waitUntil(async () => (await fx.storage.runs.get(t, r1))?.status === "success", { what: "r1's finish committed" });
    recording = true;
    commitFirst();
    await h.sentLine(`done ${r2} success idle`);
    recording = false;
    // r2's writes from here: its checkpoints (held behind r1's commit) and its finish, no run save
    // (was: troupe_run_save too, overwritten by the finish, usually in the same transaction)
    expect(sent.filter((s) => s.startsWith("troupe_run_save"))).toEqual([]);
    expect(sent.filter((s) => s.startsWith("troupe_run_finish"))).toHaveLength(1); // (r2's: r1's was sent before)
    expect(await fx.storage.runs.get(t, r2)).toMatchObject({ status: "success", attempt: 1 });
    expect((await fx.storage.runs.get(t, r2))?.started_at).toBeDefined();
    expect(h.saves).toEqual([]); // (r1 started before its create committed, stored running by it)
  });

  it("leaves its checkpoints and its finish in one transaction after the previous run's final commit (a cluster node's fenced thread)", async () => {
    const h = await harness();
    const { t, r1, r2 } = ids();
    // as a shard's thread.recover: the lease taken, the thread's writes fenced, its record known
    const lease = await acquireLease(fx.storage.db, t, "node-a", { ttlMs: 15_000, stamp: databaseStamp });
    fx.storage.fences!.fence(t, lease!.epoch);
    const commitFirst = await h.endBehindHeldFinish(t, r1, r2);
    // r1's own writes committed (its finish is gated only as its actor sees it), before recording
    await waitUntil(async () => (await fx.storage.runs.get(t, r1))?.status === "success", { what: "r1's finish committed" });
    sent.length = 0;
    recording = true;
    commitFirst();
    await h.sentLine(`done ${r2} success idle`);
    recording = false;
    // r2's checkpoints were held behind r1's commit; its finish is issued a few microtasks after
    // that commit is read: they leave together (was: the checkpoints' batch, then the finish alone)
    // (as sent now: one statement, the puts, putWrites and the finish merged by kind — a batch of
    // mergeable writes only needs no BEGIN/COMMIT, docs/STORAGE.md "Statements per batch")
    expect(sent).toEqual(["troupe_batch(put_checkpoints,put_writes_many,run_finish_many)"]);
    expect(h.reads).toEqual({ threads: 1, runs: 0 }); // (the first create's read: the record is known from there)
  });

  it("leaves its thread's values stored as they are, not compressed (a long thread's finish rewrote and pglz-compressed them)", async () => {
    const h = await harness();
    const { t, r1 } = ids();
    gateOf(r1).open();
    await h.create(t, r1, { input: "a long and very compressible message. ".repeat(1_000) });
    await h.sentLine(`done ${r1} success idle`);
    const r = await fx.storage.db.pool.query<{ stored: number; bytes: number }>(
      "SELECT pg_column_size(values_json) AS stored, octet_length(values_json) AS bytes FROM threads WHERE thread_id = $1",
      [t],
    );
    const { stored, bytes } = r.rows[0];
    expect(bytes).toBeGreaterThan(76_000); // the input and its echo
    expect(stored).toBeGreaterThanOrEqual(bytes); // (was ~1/20 of it: pglz)
  });
});
