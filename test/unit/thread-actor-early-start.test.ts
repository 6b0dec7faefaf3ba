// A run nobody streams from its start (/wait, background) on an idle thread starts when its
// create is issued, not when it commits (thread-actor.ts, startBeforeCommit). What must still
// hold: the HTTP thread hears nothing of the run before the commit (reply, run.start, events), its
// checkpoints are not written before it, and a create that fails leaves nothing of the run.
// In-process actors on real LMDB (test/helpers/actor-harness.ts), the create's commit held by the test.
import { describe, expect, it } from "vitest";
import { gateOf } from "../fixtures/actor/gate.ts";
import { ActorHarness } from "../helpers/actor-harness.ts";
import { useTempStorage } from "../helpers/storage.ts";
import { waitUntil } from "../helpers/wait.ts";

let n = 0;
const ids = () => {
  const k = ++n;
  return { t: `early-${k}-${Date.now()}`, r1: `early-run-${k}-a`, r2: `early-run-${k}-b` };
};

function held(): { promise: Promise<void>; release(): void; fail(err: Error): void } {
  let release!: () => void;
  let fail!: (err: Error) => void;
  const promise = new Promise<void>((resolve, reject) => ((release = resolve), (fail = reject)));
  return { promise, release, fail };
}

describe("ThreadActor: a run started before its create commits", () => {
  const tmp = useTempStorage("troupe-actor-early-");

  it("runs while its create is in flight; the reply, run.start and its end follow the commit", async () => {
    const h = new ActorHarness(tmp.storage, tmp.dir);
    h.ctx.startBeforeCommit = true; // a shard turns it on for PostgreSQL; the ordering rules are the same here
    const { t, r1 } = ids();
    const commit = held();
    h.createGate = (runId) => (runId === r1 ? commit.promise : undefined);
    let replied = false;
    const created = h.create(t, r1).then((run) => ((replied = true), run));
    // it reached its node (started) with its create not yet written
    await waitUntil(() => gateOf(r1).arrivals === 1, { what: "the run at its gate before its create committed" });
    gateOf(r1).open();
    await new Promise((r) => setTimeout(r, 50));
    // nothing of it is out, stored or announced before the commit
    expect(replied).toBe(false);
    expect(h.sent).toEqual([]);
    expect(h.run(t, r1)).toBeUndefined();
    // (its checkpoints wait in the saver behind the create: a checkpoint read would wait for them)
    commit.release();
    expect(await created).toMatchObject({ run_id: r1, status: "pending" }); // the reply: the run as created
    await h.sentLine(`done ${r1} success idle`);
    expect(h.sent).toEqual([`start ${r1}`, `done ${r1} success idle`]);
    expect(h.run(t, r1)).toMatchObject({ status: "success", attempt: 1 });
    expect(h.messages(t)).toEqual([`human:${r1}`, `ai:echo ${r1}`]);
    expect(await h.ctx.saver.hasCheckpointOfRun(t, r1)).toBe(true);
  });

  it("a create that fails leaves no record, checkpoint or announcement of its run, and the thread's next run runs", async () => {
    const h = new ActorHarness(tmp.storage, tmp.dir);
    h.ctx.startBeforeCommit = true; // a shard turns it on for PostgreSQL; the ordering rules are the same here
    const { t, r1, r2 } = ids();
    const commit = held();
    h.createGate = (runId) => (runId === r1 ? commit.promise : undefined);
    const created = h.create(t, r1);
    created.catch(() => undefined);
    await waitUntil(() => gateOf(r1).arrivals === 1, { what: "the run at its gate before its create committed" });
    gateOf(r1).open(); // it reaches its end (its checkpoints queued) while the create is in flight
    await new Promise((r) => setTimeout(r, 50));
    commit.fail(new Error("the create's commit failed"));
    await expect(created).rejects.toThrow("the create's commit failed");
    await new Promise((r) => setTimeout(r, 50));
    expect(h.sent).toEqual([]);
    expect(h.run(t, r1)).toBeUndefined();
    expect(await h.ctx.saver.hasCheckpointOfRun(t, r1)).toBe(false);
    expect(h.messages(t)).toEqual([]);
    // the thread goes on: its next run is neither refused nor told of the dropped writes
    gateOf(r2).open();
    await h.create(t, r2);
    await h.sentLine(`done ${r2} success idle`);
    expect(h.sent).toEqual([`start ${r2}`, `done ${r2} success idle`]);
    expect(h.messages(t)).toEqual([`human:${r2}`, `ai:echo ${r2}`]);
  });
});
