// Takeover across real processes on a real PostgreSQL: a node paused (SIGSTOP) past its leases'
// expiry loses its threads to another node, and when it comes back its writes are refused — no
// write of the old holding lands after the new holder's first; a node killed with -9 has each of
// its threads taken over by exactly one survivor; a node stopped with SIGTERM hands its threads
// over at once.
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { openPostgres } from "../src/storage/postgres/pool.ts";
import { listNodes } from "../src/cluster/nodes.ts";
import { databaseStamp } from "../src/cluster/time.ts";
import { useClusterDatabase } from "./helpers/cluster.ts";
import { REPO } from "./helpers/server.ts";
import { waitUntil } from "./helpers/wait.ts";

const cluster = useClusterDatabase();
// short for a test, long enough that a loaded machine does not stall a live node past it
const TTL_MS = 5_000;
let ids = 0;
const uniqueId = (name: string) => `${name}-${process.pid}-${++ids}`;

interface Event {
  event: string;
  thread?: string;
  threads?: string[];
  epoch?: number;
}

interface Node {
  id: string;
  proc: ChildProcess;
  events: Event[];
}

const started: Node[] = [];
afterEach(() => {
  for (const n of started.splice(0)) {
    n.proc.kill("SIGCONT");
    n.proc.kill("SIGKILL");
  }
});

beforeAll(async () => {
  const db = openPostgres({ uri: cluster.uri, maxConnections: 1 });
  await db.pool.query("CREATE TABLE probe (id bigserial PRIMARY KEY, thread_id text NOT NULL, node text NOT NULL, epoch bigint NOT NULL)");
  await db.close();
});

async function startNode(name: string, threads: string[] = []): Promise<Node> {
  const id = uniqueId(name);
  const proc = spawn(process.execPath, ["--import", "tsx", join(REPO, "test/fixtures/cluster/cluster-node.ts"), cluster.uri, id, String(TTL_MS), ...threads], {
    cwd: REPO,
    stdio: ["ignore", "pipe", "inherit"],
  });
  const events: Event[] = [];
  createInterface({ input: proc.stdout! }).on("line", (l) => events.push(JSON.parse(l) as Event));
  const node = { id, proc, events };
  started.push(node);
  await waitUntil(() => events.some((e) => e.event === "ready"), { timeoutMs: 60_000, what: `${id} ready` });
  return node;
}

/** Threads (of this test: an earlier test's killed nodes leave expired leases too) taken over by `n`. */
const takenOverOf = (n: Node, prefix: string) => n.events.filter((e) => e.event === "takeover" && e.thread!.startsWith(prefix)).map((e) => e.thread!);

test("a paused node's threads are taken over after the TTL; back, it learns it lost them and none of its writes lands after the new holder's", async () => {
  const threads = Array.from({ length: 4 }, () => uniqueId("paused"));
  const takenOver = (n: Node) => takenOverOf(n, "paused-");
  const a = await startNode("a", threads);
  expect(a.events.filter((e) => e.event === "held").map((e) => e.thread)).toEqual(threads);
  const b = await startNode("b");
  await waitUntil(async () => (await probeRows()).filter((r) => r.node === a.id).length >= 8, { what: "a writing" });
  expect(takenOver(b)).toEqual([]); // a beats: nothing to take

  a.proc.kill("SIGSTOP");
  await waitUntil(() => takenOver(b).length === threads.length, { timeoutMs: 30_000, what: "b took every thread over" });
  expect(takenOver(b).sort()).toEqual([...threads].sort());
  const epochOf = (n: Node, t: string) => n.events.find((e) => (e.event === "held" || e.event === "takeover") && e.thread === t)!.epoch!;
  for (const t of threads) expect(epochOf(b, t)).toBeGreaterThan(epochOf(a, t));
  await waitUntil(
    async () => {
      const rows = await probeRows();
      return threads.every((t) => rows.some((r) => r.node === b.id && r.thread_id === t));
    },
    { what: "b writing" },
  );

  a.proc.kill("SIGCONT");
  // a keeps writing with its old epochs (an executor not yet stopped): every one refused
  await waitUntil(() => threads.every((t) => a.events.some((e) => e.event === "refused" && e.thread === t)), { timeoutMs: 30_000, what: "a's writes refused" });
  await waitUntil(() => a.events.filter((e) => e.event === "lost").flatMap((e) => e.threads!).length === threads.length, {
    timeoutMs: 30_000,
    what: "a told it lost its leases",
  });
  const rows = await probeRows();
  for (const t of threads) {
    const ofThread = rows.filter((r) => r.thread_id === t);
    const firstOfB = ofThread.findIndex((r) => r.node === b.id);
    expect(firstOfB).toBeGreaterThan(0);
    expect(ofThread.slice(firstOfB).filter((r) => r.node === a.id)).toEqual([]);
    expect(new Set(ofThread.slice(firstOfB).map((r) => Number(r.epoch)))).toEqual(new Set([epochOf(b, t)]));
  }
  expect(b.events.filter((e) => e.event === "refused")).toEqual([]);
}, 120_000);

async function probeRows(): Promise<{ id: string; thread_id: string; node: string; epoch: string }[]> {
  return (await cluster.open(1).pool.query<{ id: string; thread_id: string; node: string; epoch: string }>("SELECT * FROM probe ORDER BY id")).rows;
}

test("a node killed with -9: each of its threads is taken over by exactly one survivor; a survivor stopped with SIGTERM hands its threads over at once", async () => {
  const threads = Array.from({ length: 6 }, () => uniqueId("killed"));
  const takenOver = (n: Node) => takenOverOf(n, "killed-");
  const a = await startNode("a", threads);
  const b = await startNode("b");
  const c = await startNode("c");
  a.proc.kill("SIGKILL");
  await waitUntil(() => takenOver(b).length + takenOver(c).length >= threads.length, { timeoutMs: 30_000, what: "the threads taken over" });
  // no thread twice (a little longer: a second taker would show up by now)
  await new Promise((r) => setTimeout(r, TTL_MS));
  const all = [...takenOver(b), ...takenOver(c)];
  expect(all.sort()).toEqual([...threads].sort());

  // b leaves cleanly: its threads are handed over, c takes them without waiting for a TTL to pass
  const fromB = takenOver(b);
  const cBefore = takenOver(c).length;
  b.proc.kill("SIGTERM");
  await waitUntil(() => b.events.some((e) => e.event === "drained"), { timeoutMs: 30_000, what: "b drained" });
  // handed over: each of b's leases expired at once (or already c's), not left to run out
  const handed = await cluster
    .open(1)
    .pool.query<{ node_id: string; handed: boolean }>("SELECT node_id, expires_at = '-infinity' AS handed FROM thread_leases WHERE thread_id = ANY($1)", [
      fromB,
    ]);
  expect(handed.rows).toHaveLength(fromB.length);
  for (const row of handed.rows) expect(row.node_id === c.id || (row.node_id === b.id && row.handed)).toBe(true);
  await waitUntil(() => takenOver(c).length === cBefore + fromB.length, { timeoutMs: 30_000, what: "c took b's threads" });
  expect(takenOver(c).sort()).toEqual([...threads].sort());
  const db = cluster.open(1);
  const nodes = await listNodes(db, databaseStamp);
  expect(nodes.find((n) => n.nodeId === b.id)).toBeUndefined(); // deregistered
  expect(nodes.find((n) => n.nodeId === c.id)?.alive).toBe(true);
}, 120_000);
