// The webhooks family and the stop writes on Postgres (WebhooksPort: anyPending, pending, get,
// outcome, retry, end; runs: a create superseding running and queued runs, save, stopQueued,
// discard; threads.delete with a stateless run's delivery): a delivery enqueued with its run's end
// commits with it, survives as written (values bytes included), is retried in place, and ends
// leaving its outcome only while the run exists.
import { describe, expect, it } from "vitest";
import type { RunRecord, ThreadRecord, WebhookDeliveryRecord } from "../../src/storage/records.ts";
import { usePostgresStorage } from "../helpers/postgres.ts";
import { runRecord, T0, threadRecord } from "../helpers/records.ts";

const fx = usePostgresStorage();

const thread = (id: string): ThreadRecord => threadRecord(id);
const run = (threadId: string, runId: string): RunRecord => runRecord(threadId, runId);

function delivery(r: RunRecord, over: Partial<WebhookDeliveryRecord> = {}): WebhookDeliveryRecord {
  return {
    delivery_id: `d-${r.run_id}`,
    url: "http://127.0.0.1:9/hook",
    payload: {
      run_id: r.run_id,
      thread_id: r.thread_id,
      assistant_id: r.assistant_id,
      metadata: {},
      status: "success",
      kwargs: r.kwargs,
      multitask_strategy: r.multitask_strategy,
      created_at: T0,
      updated_at: T0,
      run_started_at: T0,
    },
    values: new TextEncoder().encode('{"n":"\\u0000é"}'),
    created_at: T0,
    attempts: 0,
    next_attempt_at: T0,
    ...over,
  };
}

describe("webhooks on Postgres", () => {
  it("a run's end enqueues its delivery in the same commit; retry and end as the worker does", async () => {
    const webhooks = fx.storage.webhooks;
    expect(await webhooks.anyPending()).toBe(false);
    await fx.storage.threads.create(thread("t1"));
    const r = run("t1", "r1");
    await fx.storage.runs.create({ run: r, thread: thread("t1"), prev: undefined }).committed;
    const d = delivery(r);
    await fx.storage.runs.finish({ run: { ...r, status: "success" }, thread: thread("t1"), prev: thread("t1"), valuesJson: undefined, webhook: d }).committed;
    expect(await webhooks.anyPending()).toBe(true);
    expect(await webhooks.pending()).toEqual([{ key: { threadId: "t1", runId: "r1" }, nextAttemptAt: T0 }]);
    expect(await webhooks.get({ threadId: "t1", runId: "r1" })).toEqual(d);
    const retried = { ...d, attempts: 1, next_attempt_at: "2026-01-01T00:00:05.000Z", last_attempt: { at: T0, error: "connect ECONNREFUSED" } };
    await webhooks.retry({ threadId: "t1", runId: "r1" }, retried);
    expect(await webhooks.get({ threadId: "t1", runId: "r1" })).toEqual(retried);
    await webhooks.end({ threadId: "t1", runId: "r1" }, { delivery_id: d.delivery_id, state: "delivered", attempts: 2, created_at: T0 });
    expect(await webhooks.get({ threadId: "t1", runId: "r1" })).toBeUndefined();
    expect(await webhooks.outcome({ threadId: "t1", runId: "r1" })).toMatchObject({ state: "delivered", attempts: 2 });
    expect(await webhooks.anyPending()).toBe(false);
    // the outcome goes with its run
    await fx.storage.runs.delete("t1", "r1");
    expect(await webhooks.outcome({ threadId: "t1", runId: "r1" })).toBeUndefined();
  });

  it("a delivery whose run is gone ends without an outcome", async () => {
    const r = run("t-gone", "r-gone");
    await fx.storage.webhooks.retry({ threadId: "t-gone", runId: "r-gone" }, delivery(r));
    await fx.storage.webhooks.end({ threadId: "t-gone", runId: "r-gone" }, { delivery_id: "x", state: "failed", attempts: 5, created_at: T0 });
    expect(await fx.storage.webhooks.get({ threadId: "t-gone", runId: "r-gone" })).toBeUndefined();
    expect(await fx.storage.webhooks.outcome({ threadId: "t-gone", runId: "r-gone" })).toBeUndefined();
  });

  it("a finish without a webhook enqueues nothing; a rollback enqueues nothing", async () => {
    await fx.storage.threads.create(thread("t2"));
    const r = run("t2", "r2");
    await fx.storage.runs.create({ run: r, thread: thread("t2"), prev: undefined }).committed;
    await fx.storage.runs.finish({ run: { rolledBack: { threadId: "t2", runId: "r2" } }, thread: thread("t2"), prev: thread("t2"), valuesJson: undefined })
      .committed;
    expect(await fx.storage.webhooks.anyPending()).toBe(false);
  });

  it("a run superseding others: the running run's stop and the queued runs' ends commit with the create", async () => {
    await fx.storage.threads.create(thread("t3"));
    const running = run("t3", "r3-1-running");
    const queuedA = run("t3", "r3-2-queued");
    const queuedB = run("t3", "r3-3-queued");
    for (const r of [running, queuedA, queuedB]) await fx.storage.runs.create({ run: r, thread: thread("t3"), prev: undefined }).committed;
    await fx.storage.runs.save({ ...running, status: "running", attempt: 1 }).committed;
    const next = run("t3", "r3-4-next");
    const interrupted = { ...queuedA, status: "interrupted" as const };
    await fx.storage.runs.create({
      prev: undefined,
      run: next,
      thread: { ...thread("t3"), status: "busy" },
      running: { ...running, status: "running", attempt: 1, cancel_reason: "interrupt" },
      stopped: [{ final: interrupted, webhook: delivery(queuedA) }, { rolledBack: { threadId: "t3", runId: queuedB.run_id } }],
    }).committed;
    expect(await fx.storage.runs.get("t3", running.run_id)).toMatchObject({ status: "running", cancel_reason: "interrupt" });
    expect(await fx.storage.runs.get("t3", queuedA.run_id)).toMatchObject({ status: "interrupted" });
    expect(await fx.storage.runs.get("t3", queuedB.run_id)).toBeUndefined();
    expect(await fx.storage.runs.get("t3", next.run_id)).toMatchObject({ status: "pending" });
    expect(await fx.storage.webhooks.get({ threadId: "t3", runId: queuedA.run_id })).toEqual(delivery(queuedA));
    expect(await fx.storage.threads.get("t3")).toMatchObject({ status: "busy" });
    const active = [];
    for await (const a of fx.storage.runs.active("t3")) active.push(a.runId);
    expect(active).toEqual([running.run_id, next.run_id]);
  });

  it("stopQueued ends a queued run and sets the thread's status; discard and a thread delete enqueue their delivery", async () => {
    await fx.storage.threads.create(thread("t4"));
    const q = run("t4", "r4");
    await fx.storage.runs.create({ run: q, thread: { ...thread("t4"), status: "busy" }, prev: undefined }).committed;
    await fx.storage.runs.stopQueued("t4", { final: { ...q, status: "interrupted" }, webhook: delivery(q) }, "idle", "2026-01-02T00:00:00.000Z");
    expect(await fx.storage.runs.get("t4", q.run_id)).toMatchObject({ status: "interrupted" });
    expect(await fx.storage.threads.get("t4")).toMatchObject({ status: "idle", updated_at: "2026-01-02T00:00:00.000Z" });
    expect(await fx.storage.webhooks.get({ threadId: "t4", runId: q.run_id })).toBeDefined();
    // rolled back, on a thread that is gone: the run goes, nothing else is written
    const q2 = run("t-none", "r-none");
    await fx.storage.runs.create({ run: q2, thread: thread("t-none"), prev: undefined }).committed;
    await fx.storage.threads.delete("t-none");
    await fx.storage.runs.create({ run: q2, thread: thread("t-none"), prev: undefined }).committed;
    await fx.storage.runs.stopQueued("t-none", { rolledBack: { threadId: "t-none", runId: q2.run_id } }, "idle", T0);
    expect(await fx.storage.runs.get("t-none", q2.run_id)).toBeUndefined();

    await fx.storage.threads.create(thread("t5"));
    const r5 = run("t5", "r5");
    await fx.storage.runs.create({ run: r5, thread: thread("t5"), prev: undefined }).committed;
    await fx.storage.runs.discard({ threadId: "t5", runId: r5.run_id }, delivery(r5));
    expect(await fx.storage.runs.get("t5", r5.run_id)).toBeUndefined();
    expect(await fx.storage.webhooks.get({ threadId: "t5", runId: r5.run_id })).toEqual(delivery(r5));
    await fx.storage.runs.discard({ threadId: "t5", runId: "r5-none" });
    expect(await fx.storage.webhooks.get({ threadId: "t5", runId: "r5-none" })).toBeUndefined();

    await fx.storage.threads.create(thread("t6"));
    const r6 = run("t6", "r6");
    await fx.storage.runs.create({ run: r6, thread: thread("t6"), prev: undefined }).committed;
    await fx.storage.threads.delete("t6", { runId: r6.run_id, delivery: delivery(r6) });
    expect(await fx.storage.threads.get("t6")).toBeUndefined();
    expect(await fx.storage.runs.get("t6", r6.run_id)).toBeUndefined();
    expect(await fx.storage.webhooks.get({ threadId: "t6", runId: r6.run_id })).toEqual(delivery(r6));
  });
});
