// The cron scheduler in cluster mode on a ManualClock: three schedulers ("nodes") over one crons
// store (real LMDB) claim ticks through the real cron_ticks table on the test PostgreSQL. A cron
// scheduled through one node is picked up by the others' resync, each tick fires exactly once,
// and a deleted cron leaves every node and its claim row.
import { claimCronTick, forgetCronTicks, lastCronTick } from "../src/cluster/cron-claims.ts";
import { newCronRecord } from "../src/crons/cron-record.ts";
import { CronScheduler, type CronRunner } from "../src/crons/scheduler.ts";
import { lmdbStoragePort } from "../src/storage/lmdb/adapter.ts";
import type { CronRecord } from "../src/storage/records.ts";
import { ManualClock } from "../src/util/clock.ts";
import { useClusterDatabase } from "./helpers/cluster.ts";
import { useTempStorage } from "./helpers/storage.ts";

const cluster = useClusterDatabase();
const tmp = useTempStorage("troupe-cluster-crons-");

class RecordingRunner implements CronRunner {
  readonly runs: string[] = [];
  async createRun(rec: CronRecord): Promise<{ gone?: string }> {
    this.runs.push(rec.cron_id);
    return {};
  }
}

test("three nodes: a cron scheduled on one is resynced to the others, each tick fires once, a delete reaches every node", async () => {
  const db = cluster.open();
  const clock = new ManualClock(Math.floor(Date.now() / 1000) * 1000 + 500);
  const store = lmdbStoragePort(tmp.storage).crons;
  const nodes = ["a", "b", "c"].map((nodeId) => {
    const runner = new RecordingRunner();
    const scheduler = new CronScheduler(store, runner, clock, {
      claim: (cronId, tickAt) => claimCronTick(db, cronId, tickAt, nodeId),
      forget: (cronId) => forgetCronTicks(db, cronId),
      resyncMs: 3_000,
    });
    return { runner, scheduler };
  });
  for (const n of nodes) await n.scheduler.start();
  const step = async (seconds: number) => {
    for (let i = 0; i < seconds; i++) {
      await clock.advance(1_000);
      for (const n of nodes) await n.scheduler.settled();
    }
  };
  const runs = () => nodes.flatMap((n) => n.runner.runs);

  // created through node a (the route stores it and schedules it there only)
  const rec = newCronRecord(
    { assistant_id: "asst", schedule: "* * * * * *" },
    { cronId: `cron-${process.pid}-${Date.now()}`, assistantId: "asst", threadId: null, userId: null },
  );
  await store.put(rec);
  nodes[0].scheduler.schedule(rec);
  expect(nodes.map((n) => n.scheduler.isScheduled(rec.cron_id))).toEqual([true, false, false]);
  await step(3); // the resync (every 3 s) schedules it on b and c
  expect(nodes.map((n) => n.scheduler.isScheduled(rec.cron_id))).toEqual([true, true, true]);
  await step(20);
  expect(runs()).toHaveLength(23); // one run per tick, though three nodes schedule it
  expect((await lastCronTick(db, rec.cron_id))?.tickAt.getTime()).toBe(clock.now() - 500);

  // deleted through node b: b unschedules it and drops its claim row; a and c at their next resync
  await store.remove(rec.cron_id);
  await nodes[1].scheduler.deleted(rec.cron_id);
  expect(await lastCronTick(db, rec.cron_id)).toBeUndefined();
  await step(4);
  expect(nodes.map((n) => n.scheduler.isScheduled(rec.cron_id))).toEqual([false, false, false]);
  expect(runs()).toHaveLength(23); // the ticks in between re-read the cron: gone, nothing fired
  expect(await lastCronTick(db, rec.cron_id)).toBeUndefined();
  for (const n of nodes) await n.scheduler.stop();
});
