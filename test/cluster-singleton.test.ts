// Singleton jobs on a real PostgreSQL: of several nodes, one runs the job at a time; when its
// session is lost (killed process, terminated backend) the job stops there and moves to another.
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { SingletonJob } from "../src/cluster/singleton.ts";
import { useClusterDatabase } from "./helpers/cluster.ts";
import { REPO } from "./helpers/server.ts";
import { waitUntil } from "./helpers/wait.ts";

const cluster = useClusterDatabase();
let names = 0;
const newName = () => `job-${process.pid}-${++names}`;

interface Child {
  proc: ChildProcess;
  lines: string[];
}

function node(name: string): Child {
  const proc = spawn(process.execPath, ["--import", "tsx", join(REPO, "test/fixtures/cluster/singleton-node.ts"), cluster.uri, name], {
    cwd: REPO,
    stdio: ["ignore", "pipe", "inherit"],
  });
  const lines: string[] = [];
  createInterface({ input: proc.stdout! }).on("line", (l) => lines.push(l));
  return { proc, lines };
}

const holding = (c: Child) => {
  const last = c.lines.filter((l) => l.startsWith("holding") || l === "released").at(-1);
  return last?.startsWith("holding") === true;
};

/** Backend pids holding an advisory lock in this database. */
async function lockHolders(): Promise<number[]> {
  const result = await cluster
    .open(1)
    .pool.query<{ pid: number }>(
      "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
    );
  return result.rows.map((r) => r.pid);
}

test("three processes: the job runs on exactly one; killed -9, it moves to exactly one of the others, and again", async () => {
  const name = newName();
  const nodes = [node(name), node(name), node(name)];
  try {
    await waitUntil(() => nodes.every((n) => n.lines.includes("started")), { timeoutMs: 60_000, what: "the processes started" });
    const alive = new Set(nodes);
    for (let round = 0; round < 2; round++) {
      const holder = await waitUntil(() => [...alive].find(holding), { timeoutMs: 30_000, what: `a holder (round ${round})` });
      // the others keep trying (every 200 ms) and must not get it: give them a few tries
      await new Promise((r) => setTimeout(r, 1_500));
      expect([...alive].filter(holding)).toEqual([holder]);
      expect(await lockHolders()).toHaveLength(1);
      const lockPid = Number(
        holder.lines
          .filter((l) => l.startsWith("holding"))
          .at(-1)!
          .split(" ")[1],
      );
      expect(await lockHolders()).toEqual([lockPid]);
      holder.proc.kill("SIGKILL");
      alive.delete(holder);
      const next = await waitUntil(() => [...alive].find(holding), { timeoutMs: 30_000, what: `the job moved (round ${round})` });
      expect(next).not.toBe(holder);
      expect(await lockHolders()).toHaveLength(1);
    }
    expect([...alive].filter(holding)).toHaveLength(1);
  } finally {
    for (const n of nodes) n.proc.kill("SIGKILL");
  }
}, 120_000);

function contender(name: string, label: string, log: string[], returnAfterMs?: number): SingletonJob {
  return new SingletonJob(cluster.open(2), {
    name,
    retryMs: 100,
    checkMs: 200,
    run: async (signal) => {
      log.push(`${label} start`);
      await new Promise<void>((resolve) => {
        signal.addEventListener("abort", () => resolve(), { once: true });
        if (returnAfterMs !== undefined) setTimeout(resolve, returnAfterMs);
      });
      log.push(`${label} stop${signal.aborted ? " (aborted)" : ""}`);
    },
  });
}

test("a holder whose session is terminated stops its job at once; the job then runs on one node again", async () => {
  const name = newName();
  const events: string[] = [];
  const a = contender(name, "a", events);
  a.start();
  await waitUntil(() => a.isHolding, { what: "a holding" });
  const b = contender(name, "b", events);
  b.start();
  try {
    await new Promise((r) => setTimeout(r, 500));
    expect(b.isHolding).toBe(false);
    const [pid] = await lockHolders();
    await cluster.open(1).pool.query("SELECT pg_terminate_backend($1)", [pid]);
    await waitUntil(() => events.includes("a stop (aborted)"), { what: "a's job aborted" });
    // either node may take it next (a reconnects and contends too): one does
    await waitUntil(() => events.filter((e) => e.endsWith("start")).length === 2, { what: "the job running again" });
    await new Promise((r) => setTimeout(r, 500));
    expect([a.isHolding, b.isHolding].filter(Boolean)).toHaveLength(1);
    expect(await lockHolders()).toHaveLength(1);
    expect(events.filter((e) => e.endsWith("start"))).toHaveLength(2);
  } finally {
    await a.stop();
    await b.stop();
  }
  expect(await lockHolders()).toEqual([]);
});

test("jobs that return give the lock up: the job moves between nodes and never runs on two at once", async () => {
  const name = newName();
  const events: string[] = [];
  const jobs = [contender(name, "a", events, 150), contender(name, "b", events, 150), contender(name, "c", events, 150)];
  for (const j of jobs) j.start();
  try {
    await waitUntil(() => events.filter((e) => e.endsWith("start")).length >= 8, { timeoutMs: 30_000, what: "eight runs of the job" });
  } finally {
    await Promise.all(jobs.map((j) => j.stop()));
  }
  // strictly one after another: every start follows the previous run's stop
  for (const [i, e] of events.entries()) expect(e, events.join(", ")).toMatch(i % 2 === 0 ? / start$/ : / stop( \(aborted\))?$/);
  expect(events.filter((e) => e.endsWith("(aborted)")).length).toBeLessThanOrEqual(1); // only the one stop() cut short
  expect(await lockHolders()).toEqual([]);
});
