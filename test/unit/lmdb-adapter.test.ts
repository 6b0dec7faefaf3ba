// The LMDB adapter of the storage port (src/storage/lmdb/): what each family promises callers
// beyond the LMDB calls it wraps — conditional writes that say what they did, read-modify-writes
// that see the committed record, results that round-trip. Real LMDB in a temp dir.
import { describe, expect, it } from "vitest";
import { lmdbStoragePort } from "../../src/storage/lmdb/adapter.ts";
import type { AssistantRecord, CronRecord, RunRecord, ThreadRecord, WebhookDeliveryRecord, WebhookOutcomeRecord } from "../../src/storage/records.ts";
import { newCronRecord } from "../../src/crons/cron-record.ts";
import { useTempStorage } from "../helpers/storage.ts";

const T0 = "2026-01-01T00:00:00.000Z";
const assistant = (id: string, over: Partial<AssistantRecord> = {}): AssistantRecord => ({
  assistant_id: id,
  version: 1,
  graph_id: "g",
  config: {},
  context: {},
  created_at: T0,
  updated_at: T0,
  metadata: { owner: "a" },
  name: "n",
  description: null,
  ...over,
});

describe("LMDB adapter: assistants", () => {
  const tmp = useTempStorage("troupe-lmdb-port-");

  it("creates once: a taken id answers 'exists' and writes nothing", async () => {
    const { assistants } = lmdbStoragePort(tmp.storage);
    expect(await assistants.create(assistant("a1"))).toMatchObject({ assistant_id: "a1", version: 1 });
    expect(await assistants.create(assistant("a1", { name: "other" }))).toBe("exists");
    expect((await assistants.get("a1"))?.name).toBe("n");
    expect(await assistants.versions("a1", { offset: 0, limit: 10 })).toHaveLength(1);
  });

  it("patches into version max+1, merging metadata; setLatest tells a missing version from a missing assistant", async () => {
    const { assistants } = lmdbStoragePort(tmp.storage);
    await assistants.create(assistant("a1"));
    const v2 = await assistants.patch("a1", { metadata: { tag: "x" }, name: "two" }, "2026-01-02T00:00:00.000Z");
    expect(v2).toMatchObject({ version: 2, name: "two", metadata: { owner: "a", tag: "x" }, updated_at: "2026-01-02T00:00:00.000Z" });
    const back = await assistants.setLatest("a1", 1, "2026-01-03T00:00:00.000Z");
    expect(back).toMatchObject({ version: 1, name: "n", metadata: { owner: "a" } });
    // the next patch still numbers after the highest version, not after the latest
    expect((await assistants.patch("a1", {}, "2026-01-04T00:00:00.000Z"))?.version).toBe(3);
    expect(await assistants.setLatest("a1", 9, T0)).toBe("no-version");
    expect(await assistants.setLatest("nope", 1, T0)).toBeUndefined();
    expect(await assistants.patch("nope", {}, T0)).toBeUndefined();
    expect((await assistants.versions("a1", { offset: 0, limit: 10 })).map((v) => v.version)).toEqual([3, 2, 1]);
  });

  it("deletes an assistant with its versions, and says when there was none; ensureDefaults keeps an edited default", async () => {
    const { assistants } = lmdbStoragePort(tmp.storage);
    await assistants.create(assistant("a1"));
    await assistants.patch("a1", {}, T0);
    expect(await assistants.delete("a1")).toBe(true);
    expect(await assistants.delete("a1")).toBe(false);
    expect(await assistants.versions("a1", { offset: 0, limit: 10 })).toEqual([]);
    await assistants.ensureDefaults([assistant("d1")]);
    await assistants.patch("d1", { name: "edited" }, T0);
    await assistants.ensureDefaults([assistant("d1"), assistant("d2")]);
    expect((await assistants.get("d1"))?.name).toBe("edited");
    expect((await assistants.search({ sortBy: "assistant_id", order: "asc", offset: 0, limit: 10 })).items.map((a) => a.assistant_id)).toEqual(["d1", "d2"]);
    expect(await assistants.count({ metadata: { owner: "a" } })).toBe(2);
  });
});

describe("LMDB adapter: crons", () => {
  const tmp = useTempStorage("troupe-lmdb-port-");
  const cron = (id: string): CronRecord =>
    newCronRecord({ assistant_id: "a", schedule: "* * * * *" }, { cronId: id, assistantId: "a", threadId: null, userId: null });

  it("update applies the change to the committed record, keeps it on undefined, and answers undefined for a missing cron", async () => {
    const { crons } = lmdbStoragePort(tmp.storage);
    await crons.put(cron("c1"));
    const seen: (string | null)[] = [];
    const updated = await crons.update("c1", (cur) => {
      seen.push(cur.next_run_date);
      return { ...cur, next_run_date: "2030-01-01T00:00:00.000Z" };
    });
    expect(updated?.next_run_date).toBe("2030-01-01T00:00:00.000Z");
    expect(await crons.update("c1", () => undefined)).toMatchObject({ next_run_date: "2030-01-01T00:00:00.000Z" });
    expect(await crons.update("missing", (cur) => cur)).toBeUndefined();
    expect((await crons.all()).map((c) => c.cron_id)).toEqual(["c1"]);
    expect(await crons.remove("c1")).toBe(true);
    expect(await crons.remove("c1")).toBe(false);
    expect(await crons.get("c1")).toBeUndefined();
    expect(await crons.count({})).toBe(0);
  });
});

describe("LMDB adapter: webhooks", () => {
  const tmp = useTempStorage("troupe-lmdb-port-");
  const delivery = (id: string): WebhookDeliveryRecord => ({
    delivery_id: id,
    url: "http://127.0.0.1:9/hook",
    payload: {} as WebhookDeliveryRecord["payload"],
    created_at: T0,
    attempts: 0,
    next_attempt_at: T0,
  });

  it("lists waiting deliveries, records retries, and ends one keeping the outcome only while its run exists", async () => {
    const s = tmp.storage;
    const { webhooks } = lmdbStoragePort(s);
    expect(await webhooks.anyPending()).toBe(false);
    const withRun = { threadId: "t1", runId: "r1" };
    const runGone = { threadId: "t1", runId: "r2" };
    await s.root.batch(() => {
      s.runs.put(["t1", "r1"], { run_id: "r1", thread_id: "t1" } as RunRecord);
      s.webhookOutbox.put(["t1", "r1"], delivery("d1"));
      s.webhookOutbox.put(["t1", "r2"], delivery("d2"));
    });
    expect(await webhooks.anyPending()).toBe(true);
    expect(await webhooks.pending()).toEqual([
      { key: withRun, nextAttemptAt: T0 },
      { key: runGone, nextAttemptAt: T0 },
    ]);
    await webhooks.retry(withRun, { ...delivery("d1"), attempts: 1, next_attempt_at: "2026-01-01T00:00:02.000Z", last_attempt: { at: T0, status_code: 500 } });
    expect(await webhooks.get(withRun)).toMatchObject({ attempts: 1, next_attempt_at: "2026-01-01T00:00:02.000Z" });
    const outcome = (id: string): WebhookOutcomeRecord => ({
      delivery_id: id,
      state: "delivered",
      attempts: 2,
      created_at: T0,
      last_attempt: { at: T0, status_code: 200 },
    });
    await webhooks.end(withRun, outcome("d1"));
    await webhooks.end(runGone, outcome("d2"));
    expect(await webhooks.get(withRun)).toBeUndefined();
    expect(await webhooks.outcome(withRun)).toMatchObject({ delivery_id: "d1", state: "delivered" });
    expect(await webhooks.outcome(runGone)).toBeUndefined(); // a stateless run's record is gone: nothing to read it with
    expect(await webhooks.anyPending()).toBe(false);
  });
});

describe("LMDB adapter: runs and threads written by an actor", () => {
  const tmp = useTempStorage("troupe-lmdb-port-");
  const thread = (over: Partial<ThreadRecord> = {}): ThreadRecord => ({
    thread_id: "t1",
    created_at: T0,
    updated_at: T0,
    metadata: { k: "v" },
    status: "idle",
    config: {},
    ...over,
  });
  const run = (id: string, over: Partial<RunRecord> = {}): RunRecord =>
    ({
      run_id: id,
      thread_id: "t1",
      assistant_id: "a",
      metadata: {},
      status: "pending",
      multitask_strategy: "enqueue",
      created_at: T0,
      updated_at: T0,
      graph_id: "g",
      attempt: 0,
      kwargs: { input: null, config: {}, stream_mode: ["values"], temporary: false, subgraphs: false, resumable: false },
      ...over,
    }) as RunRecord;
  const webhook = {
    delivery_id: "d",
    url: "http://127.0.0.1:9/h",
    payload: {},
    created_at: T0,
    attempts: 0,
    next_attempt_at: T0,
  } as unknown as WebhookDeliveryRecord;
  const activeIds = async (port: ReturnType<typeof lmdbStoragePort>) => {
    const out: string[] = [];
    for await (const a of port.runs.active()) out.push(`${a.runId}${a.run ? "" : "?"}`);
    return out;
  };

  it("commits issued writes in issue order, and finish ends the run with the thread, its values and its webhook in one unit", async () => {
    const port = lmdbStoragePort(tmp.storage);
    expect(await port.threads.create(thread())).toMatchObject({ thread_id: "t1" });
    expect(await port.threads.create(thread())).toBe("exists");
    const t0 = (await port.threads.get("t1"))!;
    const busy = thread({ status: "busy", updated_at: "2026-01-01T00:00:01.000Z" });
    // issued back to back without awaiting: the second sees the first's thread as its prev
    const a = port.runs.create({ run: run("r1"), thread: busy, prev: t0 });
    const b = port.runs.create({ run: run("r2"), thread: busy, prev: busy });
    await Promise.all([a.committed, b.committed]);
    expect(await activeIds(port)).toEqual(["r1", "r2"]);
    expect(await port.runs.threadOf("r2")).toBe("t1");
    expect(await port.threads.count({ status: "busy" })).toBe(1);
    await port.runs.save(run("r1", { status: "running", attempt: 1 })).committed;
    const idle = thread({ status: "idle", updated_at: "2026-01-01T00:00:02.000Z" });
    await port.runs.finish({ run: run("r1", { status: "success", attempt: 1 }), thread: idle, prev: busy, valuesJson: Buffer.from('{"n":1}'), webhook })
      .committed;
    expect(await activeIds(port)).toEqual(["r2"]);
    expect(await port.runs.get("t1", "r1")).toMatchObject({ status: "success" });
    expect(await port.threads.valuesJson("t1")).toBe('{"n":1}');
    expect(await port.threads.count({ status: "idle" })).toBe(1); // the index moved with the record
    expect(await port.webhooks.get({ threadId: "t1", runId: "r1" })).toMatchObject({ delivery_id: "d" });
    // a rollback removes the run; undefined values remove the thread's values
    await port.runs.finish({ run: { rolledBack: { threadId: "t1", runId: "r2" } }, thread: idle, prev: idle, valuesJson: undefined }).committed;
    expect(await port.runs.get("t1", "r2")).toBeUndefined();
    expect(await port.runs.threadOf("r2")).toBeUndefined();
    expect(await port.threads.valuesJson("t1")).toBeUndefined();
    expect(await port.runs.latest("t1")).toMatchObject({ run_id: "r1" });
  });

  it("stopQueued ends a queued run with the thread's new status; a superseding create stops others in its own commit", async () => {
    const port = lmdbStoragePort(tmp.storage);
    const busy = thread({ status: "busy" });
    await port.runs.create({ run: run("r1"), thread: busy, prev: undefined }).committed;
    await port.runs.create({ run: run("r2"), thread: busy, prev: busy }).committed;
    const final = run("r2", { status: "interrupted", cancel_reason: "interrupt" });
    await port.runs.stopQueued("t1", { final, webhook }, "idle", "2026-01-01T00:00:03.000Z");
    expect(await port.runs.get("t1", "r2")).toMatchObject({ status: "interrupted" });
    expect((await port.threads.get("t1"))?.status).toBe("idle");
    expect(await port.webhooks.anyPending()).toBe(true);
    const running = run("r1", { status: "running", cancel_reason: "rollback" });
    await port.runs.create({
      run: run("r3"),
      thread: busy,
      prev: await port.threads.get("t1"),
      running,
      stopped: [{ rolledBack: { threadId: "t1", runId: "r2" } }],
    }).committed;
    expect(await port.runs.get("t1", "r1")).toMatchObject({ cancel_reason: "rollback" });
    expect(await port.runs.get("t1", "r2")).toBeUndefined();
    expect(await activeIds(port)).toEqual(["r1", "r3"]);
    // recovery sees an active entry whose record is gone, and drops it
    await tmp.storage.runs.remove(["t1", "r1"]);
    expect(await activeIds(port)).toEqual(["r1?", "r3"]);
    await port.runs.dropActive({ threadId: "t1", runId: "r1" });
    expect(await activeIds(port)).toEqual(["r3"]);
    // a run whose thread went while it ran leaves nothing but its webhook delivery
    await port.runs.discard({ threadId: "t1", runId: "r3" }, { ...webhook, delivery_id: "d3" });
    expect(await activeIds(port)).toEqual([]);
    expect(await port.runs.get("t1", "r3")).toBeUndefined();
    expect(await port.webhooks.get({ threadId: "t1", runId: "r3" })).toMatchObject({ delivery_id: "d3" });
  });

  it("deletes a thread with its runs, values, TTL and webhook outcomes, enqueuing a stateless run's delivery in the same commit", async () => {
    const port = lmdbStoragePort(tmp.storage);
    await port.threads.create(thread(), '{"n":1}');
    await port.threads.setTtl("t1", 5);
    expect(await port.threads.ttl("t1")).toBe(5);
    expect(await port.threads.sweepCandidates({ all: false, limit: 10 })).toEqual(["t1"]);
    await port.runs.create({ run: run("r1"), thread: thread({ status: "busy" }), prev: await port.threads.get("t1") }).committed;
    await port.threads.delete("t1", { runId: "r1", delivery: webhook });
    expect(await port.threads.get("t1")).toBeUndefined();
    expect(await port.threads.valuesJson("t1")).toBeUndefined();
    expect(await port.threads.ttl("t1")).toBeUndefined();
    expect(await port.runs.get("t1", "r1")).toBeUndefined();
    expect(await activeIds(port)).toEqual([]);
    expect(await port.threads.count({})).toBe(0);
    expect(await port.webhooks.get({ threadId: "t1", runId: "r1" })).toMatchObject({ delivery_id: "d" });
  });
});
