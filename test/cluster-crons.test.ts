// Cron ticks claimed across real processes on a real PostgreSQL: three nodes race over the same
// ticks of the same crons (and retry old ticks, as a node with a stale view would): every tick of
// every cron is fired by exactly one node.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { claimCronTick, forgetCronTicks, lastCronTick } from "../src/cluster/cron-claims.ts";
import { useClusterDatabase } from "./helpers/cluster.ts";
import { REPO } from "./helpers/server.ts";

const cluster = useClusterDatabase();

test("three processes racing over 150 ticks of 6 crons: each tick fired exactly once, no old tick fired again", async () => {
  const crons = 6;
  const ticks = 150;
  const prefix = `cron-${process.pid}`;
  const startAt = Date.now() + 4_000; // every process connected and waiting by then
  const run = promisify(execFile);
  const outputs = await Promise.all(["node-1", "node-2", "node-3"].map((node) =>
    run(process.execPath, ["--import", "tsx", join(REPO, "test/fixtures/cluster/cron-racer.ts"), cluster.uri, node, prefix, String(crons), String(ticks), String(startAt)], { cwd: REPO })));
  const results = outputs.map((o) => JSON.parse(o.stdout.trim()) as { won: string[]; staleWins: number });
  const all = results.flatMap((r) => r.won);
  const expected = Array.from({ length: crons }, (_, c) => Array.from({ length: ticks }, (_, t) => `${prefix}-${c}@${t + 1}`)).flat();
  expect(all.length).toBe(expected.length); // none twice
  expect(new Set(all)).toEqual(new Set(expected)); // none missed
  expect(results.map((r) => r.staleWins)).toEqual([0, 0, 0]);
  // the work was shared: more than one process won ticks (they really raced)
  expect(results.filter((r) => r.won.length > 0).length).toBeGreaterThan(1);
}, 120_000);

test("a claim moves the last tick forward only; forgetting a deleted cron's row lets a new cron of that id start over", async () => {
  const db = cluster.open();
  const cron = `cron-${process.pid}-single`;
  const t = (minutes: number) => new Date(Date.UTC(2026, 0, 1) + minutes * 60_000);
  expect(await lastCronTick(db, cron)).toBeUndefined();
  expect(await claimCronTick(db, cron, t(5), "a")).toBe(true);
  expect(await claimCronTick(db, cron, t(5), "b")).toBe(false);
  expect(await claimCronTick(db, cron, t(4), "b")).toBe(false);
  expect(await claimCronTick(db, cron, t(7), "b")).toBe(true); // a later tick (6 was missed by every node)
  expect(await lastCronTick(db, cron)).toEqual({ tickAt: t(7), nodeId: "b" });
  await forgetCronTicks(db, cron);
  expect(await claimCronTick(db, cron, t(1), "c")).toBe(true);
});
