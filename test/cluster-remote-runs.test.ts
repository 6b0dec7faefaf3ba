// Run watches of a cluster node (src/hub/remote-runs.ts) on a real PostgreSQL, with a real
// ClusterNode, run hub and Postgres storage: which watched runs have their record read once a second.
// A run created on this node's shard while it holds the thread is not read while that holding
// lasts (its end reaches the hub from the shard, as on one node): before, every run a node created
// was read once a second for as long as it ran. Once the holding goes, the reads resume and a final
// record ends the run for its waiters.
import { ClusterNode } from "../src/cluster/node.ts";
import { newNodeIdentity } from "../src/cluster/nodes.ts";
import { RemoteRuns } from "../src/hub/remote-runs.ts";
import { RunHub } from "../src/hub/run-hub.ts";
import { openPostgresStorage, type PostgresStorage } from "../src/storage/postgres/adapter.ts";
import type { PostgresDb } from "../src/storage/postgres/pool.ts";
import type { RunsPort } from "../src/storage/port.ts";
import { useClusterDatabase } from "./helpers/cluster.ts";
import { runRecord, threadRecord } from "./helpers/records.ts";

const cluster = useClusterDatabase();
let storage: PostgresStorage | undefined;
let node: ClusterNode | undefined;
let remote: RemoteRuns | undefined;

afterEach(async () => {
  remote?.close();
  await node?.stop();
  await storage?.close();
});

/** The storage's runs port, telling which runs' records were read with `get` (a watch's look). */
function countingReads(runs: RunsPort, reads: string[]): RunsPort {
  return new Proxy(runs, {
    get(target, key) {
      if (key === "get") return (threadId: string, runId: string) => (reads.push(runId), target.get(threadId, runId));
      const value: unknown = Reflect.get(target, key);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** This test's node following runs: the storage's run reads listed in `reads`. */
function followingRuns(
  hub: RunHub,
  reads: string[],
  observeAt: (owner: string, threadId: string, runId: string) => Promise<void> = async () => undefined,
): RemoteRuns {
  return new RemoteRuns({
    hub,
    node: node!,
    schema: "public",
    runs: countingReads(storage!.runs, reads),
    threads: storage!.threads,
    observeAt,
    outputOf: async () => undefined,
  });
}

/** A thread with a running run stored, its lease taken by `holder`. */
async function runningOn(holder: ClusterNode, thread: string, runId: string): Promise<{ thread: string; run: string }> {
  const run = runRecord(thread, runId, { status: "running" });
  await storage!.threads.create(threadRecord(thread));
  await storage!.runs.create({ run, thread: threadRecord(thread, { status: "busy" }), prev: undefined }).committed;
  expect(await holder.acquire(thread)).toBeDefined();
  return { thread, run: runId };
}

test("a run created on the node holding its thread is not read while that holding lasts; once it goes, the record ends the run", async () => {
  storage = await openPostgresStorage({ uri: cluster.uri, maxConnections: 4 });
  node = await ClusterNode.start(cluster.open(), {
    identity: newNodeIdentity(`remote-runs-${process.pid}`),
    takeoverScanMs: 60_000, // no takeovers here
    handle: async (body) => body,
    onTakeover: async () => undefined,
    onLeasesLost: () => undefined,
  });
  const held = "00000000-0000-4000-8000-0000000e0001";
  const notHeld = "00000000-0000-4000-8000-0000000e0002";
  const localRun = runRecord(held, "00000000-0000-7000-8000-0000000e00a1", { status: "running" });
  const otherRun = runRecord(notHeld, "00000000-0000-7000-8000-0000000e00a2", { status: "running" });
  for (const [thread, run] of [
    [held, localRun],
    [notHeld, otherRun],
  ] as const) {
    await storage.threads.create(threadRecord(thread));
    await storage.runs.create({ run, thread: threadRecord(thread, { status: "busy" }), prev: undefined }).committed;
  }
  const lease = (await node.acquire(held))!;
  const reads: string[] = [];
  const hub = new RunHub();
  remote = followingRuns(hub, reads);
  const streams = remote.view();

  // what ClusterShardPool.createRun does with each create's reply; a request then waits for the run
  remote.created(localRun.run_id, held);
  remote.created(otherRun.run_id, notHeld);
  const localDone = streams.waitFor(localRun.run_id);
  await sleep(2_600);
  expect(reads.filter((r) => r === localRun.run_id)).toEqual([]);
  // a run this node does not run is still looked at once a second
  expect(reads.filter((r) => r === otherRun.run_id).length).toBeGreaterThanOrEqual(2);

  // the holding goes (a write refused by the fence) and the run ends elsewhere: its record ends it here
  expect(node.lost(held, lease.epoch)).toBe(true);
  await storage.runs.save({ ...localRun, status: "success" }).committed;
  await expect(localDone).resolves.toMatchObject({ runId: localRun.run_id, status: "success" });
  expect(reads.filter((r) => r === localRun.run_id).length).toBeGreaterThanOrEqual(1);
}, 30_000);

/** A pool whose statements fail once `kill()` is called: its node's heartbeat stops as a killed process's would. */
function killable(db: PostgresDb): { db: PostgresDb; kill(): void } {
  let killed = false;
  const pool = new Proxy(db.pool, {
    get(target, key) {
      if (key === "query")
        return (...args: Parameters<typeof target.query>) =>
          killed ? Promise.reject(new Error("killed")) : (target.query as (...a: unknown[]) => unknown).apply(target, args);
      const value: unknown = Reflect.get(target, key);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return { db: { pool, schema: db.schema, close: () => db.close() }, kill: () => (killed = true) };
}

/** Counts the statements sent through a pool (all of them, and the lease lookups of ClusterNode.ownerOf). */
function countingStatements(db: PostgresDb): { all: number; leaseLookups: number } {
  const counts = { all: 0, leaseLookups: 0 };
  const query = db.pool.query.bind(db.pool) as (...a: unknown[]) => unknown;
  (db.pool as { query: unknown }).query = (...args: unknown[]) => {
    counts.all++;
    if (typeof args[0] === "string" && args[0].includes("AS expired FROM thread_leases WHERE thread_id = $1")) counts.leaseLookups++;
    return query(...args);
  };
  return counts;
}

/**
 * Counts the timers src/hub/remote-runs.ts arms (its code calls setTimeout) until `restore()`.
 * Before, each watched run armed its own timer once a second.
 */
function remoteRunsTimers(): { armed: number; restore(): void } {
  const original = globalThis.setTimeout;
  const counts = {
    armed: 0,
    restore: () => void (globalThis.setTimeout = original),
  };
  globalThis.setTimeout = ((...args: Parameters<typeof original>) => {
    const caller = (new Error().stack ?? "").split("\n")[2] ?? ""; // [0] "Error", [1] this function
    if (/[\\/]hub[\\/]remote-runs\.ts:/.test(caller)) counts.armed++;
    return original(...args);
  }) as typeof original;
  return counts;
}

test("runs followed at another live node cost no per-run reads and one timer; when its heartbeat stops, or a lease moves, they are read and end", async () => {
  const N = 20;
  storage = await openPostgresStorage({ uri: cluster.uri, maxConnections: 4 });
  const executing = killable(cluster.open());
  const nodeA = await ClusterNode.start(executing.db, {
    identity: newNodeIdentity(`remote-runs-a-${process.pid}`),
    ttlMs: 2_000,
    heartbeatMs: 400,
    takeoverScanMs: 60_000,
    handle: async (body) => body,
    onTakeover: async () => undefined,
    onLeasesLost: () => undefined,
  });
  const followerDb = cluster.open();
  node = await ClusterNode.start(followerDb, {
    identity: newNodeIdentity(`remote-runs-b-${process.pid}`),
    takeoverScanMs: 60_000,
    handle: async (body) => body,
    onTakeover: async () => undefined,
    onLeasesLost: () => undefined,
  });
  const statements = countingStatements(followerDb);
  const runs: { thread: string; run: string }[] = [];
  for (let i = 0; i < N + 1; i++) {
    const hex = (0xf00 + i).toString(16);
    runs.push(await runningOn(nodeA, `00000000-0000-4000-8000-000000000${hex}`, `00000000-0000-7000-8000-000000000${hex}`));
  }
  const moved = runs.pop()!; // its lease moves while node A lives
  const reads: string[] = [];
  const observed: string[] = [];
  remote = followingRuns(new RunHub(), reads, async (_owner, _thread, runId) => void observed.push(runId));
  const streams = remote.view();
  // half are creates this node forwarded to A, half runs a request here joins (looked up once)
  for (const [i, r] of [...runs, moved].entries()) {
    if (i % 2 === 0) await remote.expectFrom(nodeA.nodeId, r.thread, r.run, true);
    else remote.watch(r.run, r.thread);
  }
  const waits = runs.map((r) => streams.waitFor(r.run));
  const movedWait = streams.waitFor(moved.run);
  await sleep(2_500); // the joined runs' first look (one read each) and observe at A
  expect(observed.length).toBe(Math.floor((N + 1) / 2));
  const readsBefore = reads.length;
  const statementsBefore = { ...statements };
  const timers = remoteRunsTimers();
  try {
    await sleep(3_200);
  } finally {
    timers.restore();
  }
  // over 3 s: no record read and no lease lookup for any of the runs; the statements sent and the
  // timers armed do not grow with N (one look a second for all 21 runs, not a timer per run: 67)
  expect(reads.length - readsBefore).toBe(0);
  expect(statements.leaseLookups - statementsBefore.leaseLookups).toBe(0);
  expect(statements.all - statementsBefore.all).toBeLessThanOrEqual(8);
  expect(timers.armed).toBeGreaterThanOrEqual(2);
  expect(timers.armed).toBeLessThanOrEqual(5);

  // the lease of one run moves while A lives (its shard died: handed over): the run is read and its final record ends it
  await nodeA.handOver([moved.thread]);
  await storage.runs.save({ ...runRecord(moved.thread, moved.run), status: "success" }).committed;
  await expect(movedWait).resolves.toMatchObject({ runId: moved.run, status: "success" });

  // A is killed: no more beats; its registration expires and the runs are read; their final records end them
  executing.kill();
  for (const r of runs) await storage.runs.save({ ...runRecord(r.thread, r.run), status: "success" }).committed;
  const ended = await Promise.all(waits);
  expect(ended.map((d) => d.status)).toEqual(runs.map(() => "success"));
  expect(new Set(reads.slice(readsBefore)).size).toBeGreaterThanOrEqual(N);
  await nodeA.stop().catch(() => undefined);
}, 60_000);

/** The storage and two nodes: A, where runs execute, and B (`node`), following them. */
async function startStorageAndNodes(): Promise<{ db: PostgresStorage; nodeA: ClusterNode; nodeB: ClusterNode }> {
  storage = await openPostgresStorage({ uri: cluster.uri, maxConnections: 4 });
  const started: ClusterNode[] = [];
  for (const name of ["a", "b"]) {
    started.push(
      await ClusterNode.start(cluster.open(), {
        identity: newNodeIdentity(`remote-runs-${name}-${process.pid}`),
        takeoverScanMs: 60_000,
        handle: async (body) => body,
        onTakeover: async () => undefined,
        onLeasesLost: () => undefined,
      }),
    );
  }
  node = started[1];
  return { db: storage, nodeA: started[0], nodeB: started[1] };
}

test("a bus reconnect (NOTIFYs may have been lost) has each followed run's record read once: an end it missed comes from the record", async () => {
  const { db, nodeA, nodeB } = await startStorageAndNodes();
  const runs: { thread: string; run: string }[] = [];
  for (let i = 0; i < 4; i++) runs.push(await runningOn(nodeA, `00000000-0000-4000-8000-0000000d000${i}`, `00000000-0000-7000-8000-0000000d000${i}`));
  const reads: string[] = [];
  remote = followingRuns(new RunHub(), reads);
  for (const r of runs) await remote.expectFrom(nodeA.nodeId, r.thread, r.run, true);
  const ended = remote.view().waitFor(runs[0].run);
  await sleep(1_500);
  expect(reads).toEqual([]);
  // the first run ends on A while this node's LISTEN session is down: its end never arrives here
  await db.runs.save({ ...runRecord(runs[0].thread, runs[0].run), status: "success" }).committed;
  const pid = await nodeB.bus.listenerPid();
  const admin = cluster.open(1);
  await admin.pool.query("SELECT pg_terminate_backend($1)", [pid]);
  await expect(ended).resolves.toMatchObject({ runId: runs[0].run, status: "success" });
  for (const r of runs) expect(reads).toContain(r.run);
  // the others, still running at A, are followed there again: read no more
  await sleep(500);
  const after = reads.length;
  await sleep(2_200);
  expect(reads.length).toBe(after);
  await nodeA.stop();
}, 30_000);

test("a node that gives a thread up while alive tells the readers of the runs it publishes: they look at them without waiting for the lease look", async () => {
  const { db, nodeA } = await startStorageAndNodes();
  const r = await runningOn(nodeA, "00000000-0000-4000-8000-0000000c0001", "00000000-0000-7000-8000-0000000c0001");
  // A publishes the run for B (B forwarded its create to A); B waits for it
  const publisher = new RemoteRuns({
    hub: new RunHub(),
    node: nodeA,
    schema: "public",
    runs: db.runs,
    threads: db.threads,
    observeAt: async () => undefined,
    outputOf: async () => undefined,
  });
  const reads: string[] = [];
  remote = followingRuns(new RunHub(), reads);
  await remote.expectFrom(nodeA.nodeId, r.thread, r.run, true);
  publisher.publish(r.run, r.thread);
  const ended = remote.view().waitFor(r.run);
  await sleep(1_500);
  expect(reads).toEqual([]);
  // the run ends elsewhere (A's shard died: it was recovered and run by another node), its end not
  // on this channel; A tells its readers. A's lease row is left as it was: the lease look would not see it
  await db.runs.save({ ...runRecord(r.thread, r.run), status: "success" }).committed;
  publisher.movedAway([r.thread]);
  const notEnded = sleep(10_000).then(() => "not ended");
  await expect(Promise.race([ended, notEnded])).resolves.toMatchObject({ runId: r.run, status: "success" });
  expect(reads).toContain(r.run);
  publisher.close();
  await nodeA.stop();
}, 30_000);
