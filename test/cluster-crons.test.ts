// Cron ticks claimed across real processes on a real PostgreSQL: three nodes race over the same
// ticks of the same crons (and retry old ticks, as a node with a stale view would): every tick of
// every cron is fired by exactly one node.
import { spawn } from "node:child_process";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { claimCronTick, forgetCronTicks, lastCronTick } from "../src/cluster/cron-claims.ts";
import { useClusterDatabase } from "./helpers/cluster.ts";
import { REPO } from "./helpers/server.ts";
import { waitUntil } from "./helpers/wait.ts";

const cluster = useClusterDatabase();

test("three processes racing over 150 ticks of 6 crons: each tick fired exactly once, no old tick fired again", async () => {
  const crons = 6;
  const ticks = 150;
  const prefix = `cron-${process.pid}`;
  const racers = ["node-1", "node-2", "node-3"].map((node) => {
    const proc = spawn(
      process.execPath,
      ["--import", "tsx", join(REPO, "test/fixtures/cluster/cron-racer.ts"), cluster.uri, node, prefix, String(crons), String(ticks)],
      { cwd: REPO, stdio: ["pipe", "pipe", "inherit"] },
    );
    const lines: string[] = [];
    createInterface({ input: proc.stdout! }).on("line", (l) => lines.push(l));
    const exited = new Promise<number | null>((resolve) => proc.once("exit", (code) => resolve(code)));
    return { proc, lines, exited };
  });
  // all connected before any starts (a slow start under load must not leave one racer alone)
  await waitUntil(() => racers.every((r) => r.lines.includes("ready")), { timeoutMs: 60_000, what: "the racers connected" });
  const firstDue = Date.now() + 300;
  for (const r of racers) r.proc.stdin!.end(`go ${firstDue}\n`);
  expect(await Promise.all(racers.map((r) => r.exited))).toEqual([0, 0, 0]);
  const results = racers.map((r) => JSON.parse(r.lines[1]) as { won: string[]; staleWins: number; attempts: number; startedAt: number; endedAt: number });
  const all = results.flatMap((r) => r.won);
  const expected = Array.from({ length: crons }, (_, c) => Array.from({ length: ticks }, (_, t) => `${prefix}-${c}@${t + 1}`)).flat();
  expect(all.length).toBe(expected.length); // none twice
  expect(new Set(all)).toEqual(new Set(expected)); // none missed
  expect(results.map((r) => r.staleWins)).toEqual([0, 0, 0]);
  // they really raced: each tried every tick, all three at the same time (which one wins a tick is
  // the machine's scheduling: under load one racer may win them all, the others' claims then lose)
  expect(results.map((r) => r.attempts)).toEqual([crons * ticks, crons * ticks, crons * ticks]);
  expect(Math.max(...results.map((r) => r.startedAt))).toBeLessThan(Math.min(...results.map((r) => r.endedAt)));
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
