// Crons end to end through the real SDK Client against a spawned server: schedules fire real
// runs (thread and stateless), search/count/update/delete, validation, and survival of a restart.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client, type Cron } from "@langchain/langgraph-sdk";
import { startTestServer, type TestServer } from "./helpers/server.ts";
import { waitUntil } from "./helpers/wait.ts";

let server: TestServer;
let client: Client;
const EVERY_SECOND = "* * * * * *";
const human = (content: string) => ({ messages: [{ role: "human", content }] });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  server = await startTestServer({ workers: 1 });
  client = new Client({ apiUrl: server.url, apiKey: null });
}, 30_000);
afterAll(async () => {
  await server?.stop();
  server?.cleanup();
});

async function raw(path: string, init: { method: string; body?: unknown }): Promise<{ status: number; body: unknown }> {
  const res = await fetch(server.url + path, {
    method: init.method,
    headers: { "content-type": "application/json" },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as unknown) : null };
}

/** Polls until `check` returns a value that is not undefined, or fails after `ms`. */
async function until<T>(what: string, ms: number, check: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

const finishedRuns = async (threadId: string) =>
  (await client.runs.list(threadId, { limit: 100 })).filter((r) => r.status !== "pending" && r.status !== "running");

describe("thread crons", () => {
  it("fire every second on the thread, then stop when disabled and go away when deleted", async () => {
    const thread = await client.threads.create();
    const cron = await client.crons.createForThread(thread.thread_id, "echo", { schedule: EVERY_SECOND, input: human("tick"), metadata: { suite: "thread" } });
    expect(cron).toMatchObject({
      thread_id: thread.thread_id,
      schedule: EVERY_SECOND,
      enabled: true,
      metadata: { suite: "thread" },
      timezone: null,
      end_time: null,
    });
    expect(cron.assistant_id).toMatch(/^[0-9a-f-]{36}$/); // graph id resolved to the default assistant
    expect(Date.parse(cron.next_run_date!)).toBeGreaterThan(Date.now() - 1_000);

    const runs = await until("2 finished cron runs", 15_000, async () => {
      const done = await finishedRuns(thread.thread_id);
      return done.length >= 2 ? done : undefined;
    });
    for (const r of runs) {
      expect(r.status).toBe("success");
      expect(r.metadata).toMatchObject({ cron_id: cron.cron_id, suite: "thread" });
      expect(r.multitask_strategy).toBe("enqueue");
    }
    const state = await client.threads.getState<{ messages: { content: string }[] }>(thread.thread_id);
    expect(state.values.messages.filter((m) => m.content === "tick").length).toBeGreaterThanOrEqual(4); // human + echo per run

    const [found] = await client.crons.search({ threadId: thread.thread_id });
    expect(found.cron_id).toBe(cron.cron_id);
    expect(Date.parse(found.next_run_date!)).toBeGreaterThan(Date.parse(cron.next_run_date!)); // persisted after ticks
    expect(await client.crons.count({ threadId: thread.thread_id })).toBe(1);

    const disabled = (await client.crons.update(cron.cron_id, { enabled: false })) as Cron;
    expect(disabled).toMatchObject({ enabled: false, next_run_date: null });
    await sleep(500); // let a tick already in flight land
    const settled = (await client.runs.list(thread.thread_id, { limit: 100 })).length;
    await sleep(1_500);
    expect((await client.runs.list(thread.thread_id, { limit: 100 })).length).toBe(settled);

    await client.crons.delete(cron.cron_id);
    expect(await client.crons.count({ threadId: thread.thread_id })).toBe(0);
    expect((await raw(`/runs/crons/${cron.cron_id}`, { method: "DELETE" })).status).toBe(404);
  }, 40_000);

  it("answer 404 for an unknown thread and 422 for a bad schedule or timezone", async () => {
    const missing = "00000000-0000-4000-8000-000000000000";
    const r404 = await raw(`/threads/${missing}/runs/crons`, { method: "POST", body: { assistant_id: "echo", schedule: EVERY_SECOND } });
    expect(r404.status).toBe(404);
    expect(JSON.stringify(r404.body)).toContain(`Thread with ID ${missing} not found`);

    const bad = await raw("/runs/crons", { method: "POST", body: { assistant_id: "echo", schedule: "61 * * * *" } });
    expect(bad.status).toBe(422);
    const issue = (bad.body as { detail: { loc: string[]; msg: string }[] }).detail[0];
    expect(issue.loc).toEqual(["body", "schedule"]);
    expect(issue.msg).toContain("Invalid value for minute: 61");

    const tz = await raw("/runs/crons", { method: "POST", body: { assistant_id: "echo", schedule: "0 * * * *", timezone: "Mars/Phobos" } });
    expect(tz.status).toBe(422);
    expect((tz.body as { detail: { loc: string[] }[] }).detail[0].loc).toEqual(["body", "timezone"]);

    expect((await raw("/runs/crons", { method: "POST", body: { schedule: "0 * * * *" } })).status).toBe(422);
    expect((await raw("/runs/crons", { method: "POST", body: { assistant_id: "nope", schedule: "0 * * * *" } })).status).toBe(404);
    expect((await raw(`/runs/crons/${missing}`, { method: "PATCH", body: { enabled: false } })).status).toBe(404);
    expect(await client.crons.count()).toBe(0); // nothing was created by the failures
  });
});

describe("stateless crons", () => {
  it("create a kept thread per run, and delete the thread by default", async () => {
    const kept = await client.crons.create("echo", { schedule: EVERY_SECOND, input: human("kept"), onRunCompleted: "keep", metadata: { suite: "kept" } });
    const deleted = await client.crons.create("echo", { schedule: EVERY_SECOND, input: human("gone"), metadata: { suite: "deleted" } });
    expect(kept).toMatchObject({ thread_id: null, on_run_completed: "keep" });
    expect(deleted).toMatchObject({ thread_id: null, on_run_completed: "delete" });

    const threads = await until("2 kept threads", 12_000, async () => {
      const ts = await client.threads.search({ metadata: { cron_id: kept.cron_id }, limit: 100 });
      return ts.length >= 2 && ts.every((t) => t.status === "idle") ? ts : undefined;
    });
    for (const t of threads) {
      const [run] = await client.runs.list(t.thread_id);
      expect(run).toMatchObject({ status: "success", metadata: { cron_id: kept.cron_id, suite: "kept" } });
    }
    const stats = await client.crons.search({ metadata: { suite: "deleted" } });
    expect(stats).toHaveLength(1);
    expect(Date.parse(stats[0].next_run_date!)).toBeGreaterThan(Date.parse(deleted.next_run_date!)); // it ticked
    // each run's temporary thread goes when the run ends: with the cron paused, none is left
    await client.crons.update(deleted.cron_id, { enabled: false });
    await waitUntil(async () => (await client.threads.search({ metadata: { cron_id: deleted.cron_id } })).length === 0, {
      what: "the deleted cron's threads to go",
    });
    expect(server.output()).not.toContain(`cron ${deleted.cron_id}`); // no tick failed

    // search: filters, sorting, paging, select
    expect(await client.crons.count({ assistantId: "echo" })).toBe(2);
    const page = await client.crons.search({ limit: 1, offset: 1, sortBy: "created_at", sortOrder: "asc", select: ["cron_id", "enabled"] });
    expect(page).toEqual([{ cron_id: deleted.cron_id, enabled: false }]);
    expect((await client.crons.search({ enabled: true })).map((c) => c.cron_id)).toEqual([kept.cron_id]);

    await client.crons.delete(kept.cron_id);
    await client.crons.delete(deleted.cron_id);
  }, 30_000);

  it("stop at end_time, and patching end_time to null restarts the schedule", async () => {
    const thread = await client.threads.create();
    // at least one whole second before end_time, so a tick is due even when ticks run late on a loaded machine
    const endTime = new Date(Date.now() + 2_200).toISOString();
    const cron = await client.crons.createForThread(thread.thread_id, "echo", { schedule: EVERY_SECOND, input: human("x"), endTime });
    expect(cron.end_time).toBe(endTime);
    // past end_time the scheduler ends the schedule (late on a loaded machine: wait for it)
    await waitUntil(async () => (await client.crons.search({ threadId: thread.thread_id }))[0]?.next_run_date === null, {
      timeoutMs: 20_000,
      what: "the schedule ended at end_time",
    });
    const count = (await client.runs.list(thread.thread_id, { limit: 100 })).length;
    expect(count).toBeGreaterThanOrEqual(1);
    expect(count).toBeLessThanOrEqual(3);
    await sleep(1_200);
    expect((await client.runs.list(thread.thread_id, { limit: 100 })).length).toBe(count); // none after end_time

    const reopened = (await client.crons.update(cron.cron_id, { endTime: null, schedule: "*/1 * * * * *" })) as Cron;
    expect(reopened).toMatchObject({ end_time: null, schedule: "*/1 * * * * *" });
    expect(reopened.next_run_date).not.toBeNull();
    await until("a run after reopening", 10_000, async () => ((await client.runs.list(thread.thread_id, { limit: 100 })).length > count ? true : undefined));
    await client.crons.delete(cron.cron_id);
  }, 30_000);
});

describe("restart", () => {
  it("crons survive a graceful restart and keep firing", async () => {
    const thread = await client.threads.create();
    const cron = await client.crons.createForThread(thread.thread_id, "echo", { schedule: EVERY_SECOND, input: human("again") });
    await until("a first run", 12_000, async () => ((await finishedRuns(thread.thread_id)).length >= 1 ? true : undefined));
    await server.stop();
    const restartedAt = Date.now(); // the old process is gone: any later run is the new server's
    server = await startTestServer({ dataDir: server.dataDir, workers: 1 });
    client = new Client({ apiUrl: server.url, apiKey: null });
    const [persisted] = await client.crons.search({ threadId: thread.thread_id });
    expect(persisted.cron_id).toBe(cron.cron_id);
    // recomputed at startup (missed ticks are not replayed), so not the stale pre-shutdown value
    expect(Date.parse(persisted.next_run_date!)).toBeGreaterThan(Date.now() - 1_000);
    // a run created (any status) after the restart proves the cron fired in the new process
    await until("a run created after the restart", 15_000, async () =>
      (await client.runs.list(thread.thread_id, { limit: 100 })).some((r) => Date.parse(r.created_at) > restartedAt) ? true : undefined,
    );
  }, 60_000);
});
