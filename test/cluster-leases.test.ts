// Thread leases and fenced writes on a real PostgreSQL: racing nodes (separate pools, so separate
// sessions), steals after expiry with growing epochs, and writes of a holding that moved refused
// in the same statement, also while the steal is in flight.
import type { PostgresDb } from "../src/storage/postgres/pool.ts";
import { fenceSql, fenceValues, FENCE_CTE, type Fence } from "../src/cluster/fence.ts";
import {
  acquireLease,
  expiredLeases,
  handOverLease,
  handOverLeases,
  leaseOf,
  releaseLease,
  releaseLeases,
  renewLease,
  type AcquiredLease,
} from "../src/cluster/leases.ts";
import { clockStamp } from "../src/cluster/time.ts";
import { ManualClock } from "../src/util/clock.ts";
import { useClusterDatabase } from "./helpers/cluster.ts";
import { waitUntil } from "./helpers/wait.ts";

const cluster = useClusterDatabase();
const TTL = 15_000;
let threads = 0;
const newThread = () => `thread-${process.pid}-${++threads}`;

/** `count` nodes, each with its own pool, connected before the race starts. */
async function nodes(count: number): Promise<PostgresDb[]> {
  const dbs = Array.from({ length: count }, () => cluster.open(2));
  await Promise.all(dbs.map((db) => db.pool.query("SELECT 1")));
  return dbs;
}

/**
 * A write of the executor under `fence`: a pending write of a checkpoint (migration 1's table), one
 * statement; answers whether the holding stood and whether the row was written.
 */
function fencedInsert(fence: Fence, taskId: string): { text: string; values: unknown[] } {
  const f = fenceSql(3);
  const text = `
WITH ${f.cte}, w AS (
  INSERT INTO checkpoint_writes (thread_id, checkpoint_id, task_id, idx, channel, type, blob)
  SELECT $1, 'cp-1', $2, 0, 'messages', 'json', '\\x7b7d'::bytea WHERE ${f.holds}
  RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM ${FENCE_CTE}) AS held, (SELECT count(*)::int FROM w) AS written`;
  return { text, values: [fence.threadId, taskId, ...fenceValues(fence)] };
}

async function fencedWrite(db: PostgresDb, fence: Fence, taskId: string): Promise<{ held: boolean; written: number }> {
  return (await db.pool.query<{ held: boolean; written: number }>(fencedInsert(fence, taskId))).rows[0];
}

const writesOf = async (db: PostgresDb, threadId: string) =>
  (await db.pool.query<{ task_id: string }>("SELECT task_id FROM checkpoint_writes WHERE thread_id = $1 ORDER BY task_id", [threadId])).rows.map(
    (r) => r.task_id,
  );

test("nodes racing for a free thread: exactly one acquires it, every time", async () => {
  const racers = await nodes(10);
  const clock = new ManualClock();
  for (let round = 0; round < 15; round++) {
    const thread = newThread();
    const results = await Promise.all(racers.map((db, i) => acquireLease(db, thread, `node-${i}`, { ttlMs: TTL, stamp: clockStamp(clock) })));
    const winners = results.filter((r): r is AcquiredLease => r !== undefined);
    expect(winners).toHaveLength(1);
    const row = await leaseOf(racers[0], thread, clockStamp(clock));
    expect(row).toMatchObject({ nodeId: winners[0].nodeId, epoch: winners[0].epoch, expired: false });
    expect(row?.expiresAt.getTime()).toBe(clock.now() + TTL);
  }
});

test("a held lease is refused to others until it expires; then exactly one racer steals it, with a higher epoch", async () => {
  const [a, ...racers] = await nodes(9);
  const clock = new ManualClock();
  const timing = { ttlMs: TTL, stamp: clockStamp(clock) };
  const thread = newThread();
  const first = await acquireLease(a, thread, "node-a", timing);
  expect(first).toBeDefined();
  expect(await acquireLease(a, thread, "node-a", timing)).toBeUndefined(); // held: not re-taken, even by its holder
  await clock.advance(TTL - 1);
  expect(await Promise.all(racers.map((db, i) => acquireLease(db, thread, `node-${i}`, timing)))).toEqual(racers.map(() => undefined));
  await clock.advance(1); // expires_at <= now: expired
  const results = await Promise.all(racers.map((db, i) => acquireLease(db, thread, `node-${i}`, timing)));
  const winners = results.filter((r): r is AcquiredLease => r !== undefined);
  expect(winners).toHaveLength(1);
  expect(winners[0].epoch).toBeGreaterThan(first!.epoch);
  // the old holder can neither renew nor release the holding it lost
  expect(await renewLease(a, first!, timing)).toBeUndefined();
  expect(await releaseLease(a, first!)).toBe(false);
  expect(await leaseOf(a, thread, timing.stamp)).toMatchObject({ nodeId: winners[0].nodeId, epoch: winners[0].epoch });
});

test("renewal extends a standing holding only; release and hand-over end it, and epochs keep growing", async () => {
  const [db] = await nodes(1);
  const clock = new ManualClock();
  const timing = { ttlMs: TTL, stamp: clockStamp(clock) };
  const thread = newThread();
  const lease = (await acquireLease(db, thread, "node-a", timing))!;
  await clock.advance(10_000);
  expect((await renewLease(db, lease, timing))?.getTime()).toBe(clock.now() + TTL);
  await clock.advance(TTL); // not renewed for a TTL: expired, and renewal does not revive it
  expect(await renewLease(db, lease, timing)).toBeUndefined();
  const again = (await acquireLease(db, thread, "node-a", timing))!;
  expect(again.epoch).toBeGreaterThan(lease.epoch);

  // released: the row goes; the next holding still gets a higher epoch (one sequence for all)
  expect(await releaseLease(db, again)).toBe(true);
  expect(await leaseOf(db, thread, timing.stamp)).toBeUndefined();
  const third = (await acquireLease(db, thread, "node-b", timing))!;
  expect(third.epoch).toBeGreaterThan(again.epoch);

  // handed over: expired at once, listed for takeover, taken without waiting for the TTL
  expect(await handOverLease(db, third)).toBe(true);
  expect((await expiredLeases(db, { limit: 1000, stamp: timing.stamp })).map((l) => l.threadId)).toContain(thread);
  const fourth = (await acquireLease(db, thread, "node-c", timing))!;
  expect(fourth).toMatchObject({ nodeId: "node-c" });
  expect(fourth.epoch).toBeGreaterThan(third.epoch);
  expect((await expiredLeases(db, { limit: 1000, stamp: timing.stamp })).map((l) => l.threadId)).not.toContain(thread);
});

/** A run row of the thread in `status` (the acquire looks at the runs table's status only). */
async function putRun(db: PostgresDb, threadId: string, runId: string, status: string): Promise<void> {
  await db.pool.query(
    `INSERT INTO runs (run_id, thread_id, assistant_id, status, record, kwargs) VALUES ($1, $2, 'asst', $3, '{}', '{}')
     ON CONFLICT (run_id) DO UPDATE SET status = EXCLUDED.status`,
    [runId, threadId, status],
  );
}

test("acquire says whether to recover: not for a row it inserted with no run active, always after a steal or with runs waiting", async () => {
  const [db] = await nodes(1);
  const clock = new ManualClock();
  const timing = { ttlMs: TTL, stamp: clockStamp(clock) };
  // a new thread: nothing to recover
  const fresh = newThread();
  const first = (await acquireLease(db, fresh, "node-a", timing))!;
  expect(first.recover).toBe(false);
  // released idle, taken again: a new row, still nothing
  await releaseLease(db, first);
  expect((await acquireLease(db, fresh, "node-b", timing))!.recover).toBe(false);
  // handed over (or expired): a steal recovers, whatever the runs
  await handOverLease(db, (await leaseOf(db, fresh, timing.stamp))!);
  expect((await acquireLease(db, fresh, "node-c", timing))!.recover).toBe(true);

  // runs waiting with no lease row (copied by troupe migrate, written before cluster mode): recovered
  for (const status of ["pending", "running"]) {
    const waiting = newThread();
    await putRun(db, waiting, `${waiting}-run`, status);
    const lease = (await acquireLease(db, waiting, "node-a", timing))!;
    expect(lease.recover).toBe(true);
    // once it ended and the lease was released: nothing again (another thread's runs do not count)
    await putRun(db, waiting, `${waiting}-run`, "success");
    await putRun(db, newThread(), `${waiting}-other`, "pending");
    await releaseLease(db, lease);
    expect((await acquireLease(db, waiting, "node-b", timing))!.recover).toBe(false);
  }
});

test("idle leases are released, and a draining node's leases handed over, many in one statement; a moved holding is left alone", async () => {
  const [db] = await nodes(1);
  const clock = new ManualClock();
  const timing = { ttlMs: TTL, stamp: clockStamp(clock) };
  const held = [];
  for (let i = 0; i < 4; i++) held.push((await acquireLease(db, newThread(), "node-a", timing))!);
  // the last one moved meanwhile (expired and stolen): its old epoch matches nothing
  await clock.advance(TTL);
  for (const l of held.slice(0, 3)) await renewLease(db, l, timing);
  const stolen = (await acquireLease(db, held[3].threadId, "node-b", timing))!;
  expect(await releaseLeases(db, [held[0], held[1], held[3]])).toBe(2);
  expect(await leaseOf(db, held[0].threadId, timing.stamp)).toBeUndefined();
  expect(await leaseOf(db, held[1].threadId, timing.stamp)).toBeUndefined();
  expect(await leaseOf(db, held[3].threadId, timing.stamp)).toMatchObject({ nodeId: "node-b", epoch: stolen.epoch, expired: false });
  expect(await handOverLeases(db, [held[2], held[3]])).toBe(1);
  expect(await leaseOf(db, held[2].threadId, timing.stamp)).toMatchObject({ nodeId: "node-a", expired: true });
  expect(await leaseOf(db, held[3].threadId, timing.stamp)).toMatchObject({ nodeId: "node-b", expired: false });
  expect(await releaseLeases(db, [])).toBe(0);
  expect(await handOverLeases(db, [])).toBe(0);
});

test("a write carrying a holding's epoch lands while it stands and is refused once the lease moved", async () => {
  const [a, b] = await nodes(2);
  const clock = new ManualClock();
  const timing = { ttlMs: TTL, stamp: clockStamp(clock) };
  const thread = newThread();
  const old = (await acquireLease(a, thread, "node-a", timing))!;
  expect(await fencedWrite(a, old, "task-1")).toEqual({ held: true, written: 1 });
  await clock.advance(TTL);
  const stolen = (await acquireLease(b, thread, "node-b", timing))!;
  expect(await fencedWrite(a, old, "task-2")).toEqual({ held: false, written: 0 });
  expect(await fencedWrite(b, stolen, "task-3")).toEqual({ held: true, written: 1 });
  // a made-up epoch (or another thread's) never passes
  expect(await fencedWrite(a, { threadId: thread, epoch: stolen.epoch + 1000 }, "task-4")).toEqual({ held: false, written: 0 });
  expect(await writesOf(a, thread)).toEqual(["task-1", "task-3"]);
});

/** Resolves once session `pid` waits on a lock. */
const waitingOnLock = (db: PostgresDb, pid: number) =>
  waitUntil(
    async () => (await db.pool.query<{ w: string | null }>("SELECT wait_event_type AS w FROM pg_stat_activity WHERE pid = $1", [pid])).rows[0]?.w === "Lock",
    { what: `session ${pid} waiting on a lock` },
  );

test("a write racing a steal in flight waits for it and is then refused (no write slips past the new holder)", async () => {
  const [a, b] = await nodes(2);
  const clock = new ManualClock();
  const timing = { ttlMs: TTL, stamp: clockStamp(clock) };
  const thread = newThread();
  const old = (await acquireLease(a, thread, "node-a", timing))!;
  await clock.advance(TTL);
  // the new holder's steal, not yet committed
  const stealer = await b.pool.connect();
  const writer = await a.pool.connect();
  try {
    await stealer.query("BEGIN");
    const steal = await stealer.query<{ epoch: string }>(
      `UPDATE thread_leases SET node_id = 'node-b', epoch = nextval('thread_lease_epochs'), expires_at = $2
      WHERE thread_id = $1 RETURNING epoch`,
      [thread, new Date(clock.now() + TTL)],
    );
    expect(steal.rowCount).toBe(1);
    const writerPid = (await writer.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0].pid;
    const late = writer.query<{ written: number }>(fencedInsert(old, "late"));
    await waitingOnLock(a, writerPid);
    await stealer.query("COMMIT");
    expect((await late).rows[0].written).toBe(0);
  } finally {
    stealer.release();
    writer.release();
  }
  expect(await writesOf(a, thread)).toEqual([]);
});

test("a steal waits for a write in flight of the holding it replaces, and then sees that write", async () => {
  const [a, b] = await nodes(2);
  const clock = new ManualClock();
  const timing = { ttlMs: TTL, stamp: clockStamp(clock) };
  const thread = newThread();
  const old = (await acquireLease(a, thread, "node-a", timing))!;
  const writer = await a.pool.connect();
  try {
    await writer.query("BEGIN");
    const w = await writer.query<{ written: number }>(fencedInsert(old, "in-flight"));
    expect(w.rows[0].written).toBe(1);
    await clock.advance(TTL);
    const steal = acquireLease(b, thread, "node-b", timing);
    await waitUntil(
      async () =>
        (await a.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"))
          .rows[0].n > 0,
      { what: "the steal waiting on the write's lock" },
    );
    await writer.query("COMMIT");
    const stolen = await steal;
    expect(stolen).toMatchObject({ nodeId: "node-b" });
    expect(stolen!.epoch).toBeGreaterThan(old.epoch);
  } finally {
    writer.release();
  }
  expect(await writesOf(b, thread)).toEqual(["in-flight"]);
});
