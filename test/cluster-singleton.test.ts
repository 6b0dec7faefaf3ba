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
  const proc = spawn(process.execPath, ["--import", "tsx", join(REPO, "test/fixtures/cluster/singleton-node.ts"), cluster.uri, name], { cwd: REPO, stdio: ["ignore", "pipe", "inherit"] });
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
  const result = await cluster.open(1).pool.query<{ pid: number }>(
    "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())");
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
      const lockPid = Number(holder.lines.filter((l) => l.startsWith("holding")).at(-1)!.split(" ")[1]);
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

test("a holder whose session is terminated stops its job at once; another node takes it; a job that returns gives the lock up", async () => {
  const name = newName();
  const events: string[] = [];
  const jobOf = (label: string, returnAfterMs?: number) => new SingletonJob(cluster.open(2), {
    name,
    retryMs: 100,
    checkMs: 200,
    run: async (signal) => {
      events.push(`${label} start`);
      await new Promise<void>((resolve) => {
        signal.addEventListener("abort", () => resolve(), { once: true });
        if (returnAfterMs !== undefined) setTimeout(resolve, returnAfterMs);
      });
      events.push(`${label} stop${signal.aborted ? " (aborted)" : ""}`);
    },
  });
  const a = jobOf("a");
  a.start();
  await waitUntil(() => a.isHolding, { what: "a holding" });
  const b = jobOf("b", 300);
  b.start();
  try {
    await new Promise((r) => setTimeout(r, 500));
    expect(b.isHolding).toBe(false);
    const [pid] = await lockHolders();
    await cluster.open(1).pool.query("SELECT pg_terminate_backend($1)", [pid]);
    await waitUntil(() => events.includes("b start"), { what: "b took the job over" });
    // b's job returns by itself after 300 ms: the lock goes back to a (or b again), never to both
    await waitUntil(() => events.filter((e) => e.endsWith("start")).length >= 3, { what: "the job taken again after b's returned" });
    // a's stop and b's start race (the server frees the lock as a's session ends, a learns it from
    // the same socket): both happen, b's own stop after
    expect(events[0]).toBe("a start");
    expect(new Set(events.slice(1, 3))).toEqual(new Set(["a stop (aborted)", "b start"]));
    expect(events[3]).toBe("b stop");
    expect(await lockHolders()).toHaveLength(1);
  } finally {
    await a.stop();
    await b.stop();
  }
  expect(await lockHolders()).toEqual([]);
});
