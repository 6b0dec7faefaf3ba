// The cron scheduler on a ManualClock: exact tick counts, end_time, disabled crons, schedules
// replaced mid-tick, crons whose thread is gone, and next_run_date kept in the store. Real LMDB;
// the runner records the runs a tick would create (the e2e test creates real ones).
import { describe, expect, it } from "vitest";
import { CronScheduler, type CronRunner } from "../../src/crons/scheduler.ts";
import { lmdbStoragePort } from "../../src/storage/lmdb/adapter.ts";
import { newCronRecord, patchCronRecord, type CronCreate } from "../../src/crons/cron-record.ts";
import type { CronRecord } from "../../src/storage/records.ts";
import { ManualClock } from "../../src/util/clock.ts";
import { useTempStorage } from "../helpers/storage.ts";

const EVERY_SECOND = "* * * * * *";

class RecordingRunner implements CronRunner {
  readonly runs: string[] = [];
  gone = new Set<string>();
  /** a tick in progress waits for this before its run is "created" */
  hold: Promise<void> | undefined;
  async createRun(rec: CronRecord): Promise<{ gone?: string }> {
    if (this.gone.has(rec.cron_id)) return { gone: `thread ${String(rec.thread_id)}` };
    await this.hold;
    this.runs.push(rec.cron_id);
    return {};
  }
  count(cronId: string): number {
    return this.runs.filter((r) => r === cronId).length;
  }
}

describe("CronScheduler", () => {
  const tmp = useTempStorage("troupe-crons-");
  const setup = () => {
    // half a second past a whole second: every-second ticks fall at +0.5 s, +1.5 s, …
    const clock = new ManualClock(Math.floor(Date.now() / 1000) * 1000 + 500);
    const store = lmdbStoragePort(tmp.storage).crons;
    const runner = new RecordingRunner();
    const scheduler = new CronScheduler(store, runner, clock);
    let n = 0;
    const add = async (body: Partial<CronCreate> = {}): Promise<CronRecord> => {
      const rec = newCronRecord(
        { assistant_id: "a", schedule: EVERY_SECOND, ...body },
        { cronId: `cron-${n++}`, assistantId: "a", threadId: "t", userId: null },
      );
      await store.put(rec);
      scheduler.schedule(rec);
      return rec;
    };
    const advance = async (ms: number) => {
      await clock.advance(ms);
      await scheduler.settled();
    };
    return { clock, store, runner, scheduler, add, advance };
  };

  it("fires exactly once per due tick and stores each next run date", async () => {
    const { store, runner, scheduler, add, advance, clock } = setup();
    const cron = await add();
    await advance(5_000);
    expect(runner.count(cron.cron_id)).toBe(5);
    expect(Date.parse((await store.get(cron.cron_id))!.next_run_date!)).toBe(clock.now() + 500);
    await scheduler.stop();
    await advance(3_000);
    expect(runner.count(cron.cron_id)).toBe(5);
  });

  it("stops at end_time and does not schedule disabled crons", async () => {
    const { store, runner, scheduler, add, advance, clock } = setup();
    const ending = await add({ end_time: new Date(clock.now() + 2_200).toISOString() });
    const disabled = await add({ enabled: false });
    expect(scheduler.isScheduled(disabled.cron_id)).toBe(false);
    await advance(6_000);
    expect(runner.count(ending.cron_id)).toBe(2);
    expect(runner.count(disabled.cron_id)).toBe(0);
    expect(scheduler.isScheduled(ending.cron_id)).toBe(false);
    expect((await store.get(ending.cron_id))!.next_run_date).toBeNull();
  });

  it("a tick whose schedule was replaced while it ran does not overwrite the new next run date", async () => {
    const { store, runner, scheduler, add, advance, clock } = setup();
    const cron = await add();
    let release!: () => void;
    runner.hold = new Promise((r) => (release = r));
    await clock.advance(1_000); // the tick is now waiting in createRun
    const patched = patchCronRecord((await store.get(cron.cron_id))!, { schedule: "0 0 * * * *" }); // hourly
    await store.put(patched);
    scheduler.schedule(patched);
    release();
    await scheduler.settled();
    expect((await store.get(cron.cron_id))!.next_run_date).toBe(patched.next_run_date);
    runner.hold = undefined;
    await advance(5_000);
    expect(runner.count(cron.cron_id)).toBe(1); // the hourly schedule is not due yet
  });

  it("deletes a cron whose thread is gone", async () => {
    const { store, runner, scheduler, add, advance } = setup();
    const cron = await add();
    runner.gone.add(cron.cron_id);
    await advance(1_000);
    expect(await store.get(cron.cron_id)).toBeUndefined();
    expect(scheduler.isScheduled(cron.cron_id)).toBe(false);
  });

  it("start() schedules stored live crons and refreshes a stale next run date", async () => {
    const { store, runner, scheduler, add, clock } = setup();
    const first = await add();
    await scheduler.stop(); // the server stops
    await store.update(first.cron_id, (cur) => ({ ...cur, next_run_date: "2000-01-01T00:00:00.000Z" }));
    const restarted = new CronScheduler(store, runner, clock);
    await restarted.start();
    expect(Date.parse((await store.get(first.cron_id))!.next_run_date!)).toBe(clock.now() + 500);
    await clock.advance(2_000);
    await restarted.settled();
    expect(runner.count(first.cron_id)).toBe(2);
    await restarted.stop();
  });
});
