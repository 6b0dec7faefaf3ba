// Thread leases: a thread's actor runs on the node holding its lease. Each operation is one
// statement, so concurrent nodes are ordered by the row lock alone: of N nodes acquiring one
// thread, exactly one gets it; a lease is stolen only once expired, and every acquisition draws a
// new epoch from one sequence (so epochs only grow, and a (thread, epoch) pair names one holding).
import type pg from "pg";
import type { PostgresDb } from "../storage/postgres/pool.ts";
import type { ThreadRecord } from "../storage/records.ts";
import { laterSql, nowSql, type Stamp } from "./time.ts";

export interface Lease {
  threadId: string;
  nodeId: string;
  /** fencing token: writes of this holding carry it (fence.ts) */
  epoch: number;
  expiresAt: Date;
}

export interface LeaseState extends Lease {
  expired: boolean;
}

interface LeaseRow {
  thread_id: string;
  node_id: string;
  epoch: string;
  expires_at: Date;
}

// int8 comes back as text; epochs stay far below 2^53 (one per acquisition)
const toLease = (r: LeaseRow): Lease => ({ threadId: r.thread_id, nodeId: r.node_id, epoch: Number(r.epoch), expiresAt: r.expires_at });

export interface LeaseTiming {
  ttlMs: number;
  stamp: Stamp;
}

/** A holding just taken, and whether the thread may have runs for its new holder to recover. */
export interface AcquiredLease extends Lease {
  /**
   * false only when the statement inserted the row (no holder before it: a new thread, or one
   * whose last holder released it idle) and saw no pending or running run of the thread: then
   * there is nothing to recover (docs/CLUSTER.md, "Skipping the recovery read"). A steal (an
   * expired row: its holder died, was partitioned or handed the thread over) always recovers.
   */
  recover: boolean;
  /**
   * with `readThread`: the thread's record as stored right after the acquire (null: no such
   * thread), read in the same round trip (see acquireLease)
   */
  thread?: ThreadRecord | null;
  /**
   * with `readThread`: the thread had no root checkpoint as read in that same statement (its
   * snapshot is the record's): the holding's first read of its latest checkpoint needs no statement
   */
  noCheckpoints?: boolean;
}

/**
 * The thread's runs recovery would read (RunsPort.active; the runs_active partial index of
 * schema-records.ts): looked at in the acquire's own statement, so an inserted lease costs no
 * second round trip to learn there is nothing to recover.
 */
const ACTIVE_RUN_OF_THREAD = "SELECT 1 FROM runs WHERE thread_id = $1 AND status IN ('pending', 'running')";

/**
 * The thread's record (null: none) and whether it has no root checkpoint, in one snapshot (the
 * checkpoints primary key's first two columns: one index probe). The checkpoint the graph's first
 * read would look for (the latest of namespace ""): with none, the new holder's savers answer that
 * read without a statement until they write the thread (PostgresCheckpointSaver.learnNoCheckpoints).
 */
const LEASE_THREAD = {
  name: "troupe_lease_thread",
  text: `SELECT (SELECT record FROM threads WHERE thread_id = $1) AS record,
  NOT EXISTS (SELECT 1 FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = '') AS no_checkpoints`,
};

/**
 * Takes the thread's lease for `nodeId` if nobody holds it or its holding expired (a steal: new
 * epoch). A lease this node still holds is not re-taken (undefined): the node knows its leases.
 *
 * Why `recover: false` is safe. The statement inserts only when no committed row stands (ON
 * CONFLICT arbitrates on the latest version, waiting for a delete in flight), i.e. the thread's
 * last holder, if any, deleted its row: a release, which a holder issues only once its actor is
 * idle (no run queued, running or being written: every run write it issued has committed, so
 * before the delete, and before this statement's snapshot when the delete committed first). A
 * run the snapshot could miss would have to be written after it by a holder whose row was gone
 * by the time of the insert; every run write of a holder carries its fence (fence.ts: the row
 * with its epoch, locked FOR SHARE in the write's statement), so such a write is refused. Runs
 * that never had a lease row (data copied by `troupe migrate`, written before cluster mode, a
 * release after a failed write) are in the snapshot and make `recover` true.
 */
export async function acquireLease(
  db: PostgresDb,
  threadId: string,
  nodeId: string,
  timing: LeaseTiming,
  readThread = false,
): Promise<AcquiredLease | undefined> {
  // named: prepared once per connection (it runs once per run on a thread nobody held)
  const acquire: pg.QueryConfig = {
    name: "troupe_lease_acquire",
    text: `
INSERT INTO thread_leases AS l (thread_id, node_id, epoch, expires_at)
VALUES ($1, $2, nextval('thread_lease_epochs'), ${laterSql("$3", "$4")})
ON CONFLICT (thread_id) DO UPDATE SET node_id = EXCLUDED.node_id, epoch = EXCLUDED.epoch, expires_at = EXCLUDED.expires_at
WHERE l.expires_at <= ${nowSql("$3")}
-- xmax is 0 on a row this statement inserted (an ON CONFLICT update locks the row it replaces)
RETURNING thread_id, node_id, epoch, expires_at, (l.xmax <> 0 OR EXISTS (${ACTIVE_RUN_OF_THREAD})) AS recover`,
    values: [threadId, nodeId, timing.stamp(), timing.ttlMs],
  };
  if (!readThread) {
    const row = (await db.pool.query<LeaseRow & { recover: boolean }>(acquire)).rows[0];
    return row === undefined ? undefined : { ...toLease(row), recover: row.recover };
  }
  // The thread's record, pipelined behind the acquire on one connection (one round trip). A
  // statement of its own, so its snapshot is taken after the acquire: every write of an earlier
  // holder committed before its release (or, for a steal, before the fence let the acquire through)
  // is in it, and later ones are refused by the fence. The new holder's actor starts from it
  // instead of reading it (thread.recover's `thread`).
  const client = await db.pool.connect();
  let failure: Error | undefined;
  try {
    const [a, t] = await Promise.all([
      client.query<LeaseRow & { recover: boolean }>(acquire),
      client.query<{ record: ThreadRecord | null; no_checkpoints: boolean }>({ ...LEASE_THREAD, values: [threadId] }),
    ]);
    const row = a.rows[0];
    if (row === undefined) return undefined;
    const { record, no_checkpoints } = t.rows[0];
    return { ...toLease(row), recover: row.recover, thread: record, noCheckpoints: no_checkpoints };
  } catch (err) {
    failure = err instanceof Error ? err : new Error(String(err));
    throw err;
  } finally {
    client.release(failure);
  }
}

/** Extends a holding (one thread); false once it expired or moved: the holder must stop. */
export async function renewLease(db: PostgresDb, lease: Pick<Lease, "threadId" | "epoch">, timing: LeaseTiming): Promise<Date | undefined> {
  const result = await db.pool.query<{ expires_at: Date }>(
    `
UPDATE thread_leases SET expires_at = ${laterSql("$3", "$4")}
WHERE thread_id = $1 AND epoch = $2 AND expires_at > ${nowSql("$3")}
RETURNING expires_at`,
    [lease.threadId, lease.epoch, timing.stamp(), timing.ttlMs],
  );
  return result.rows[0]?.expires_at;
}

/** Gives a thread up when it has nothing in flight: the row goes (the next acquirer starts fresh). */
export async function releaseLease(db: PostgresDb, lease: Pick<Lease, "threadId" | "epoch">): Promise<boolean> {
  const result = await db.pool.query("DELETE FROM thread_leases WHERE thread_id = $1 AND epoch = $2", [lease.threadId, lease.epoch]);
  return result.rowCount === 1;
}

/** releaseLease for many holdings in one statement (idle leases whose linger ran out); answers how many went. */
export async function releaseLeases(db: PostgresDb, leases: readonly Pick<Lease, "threadId" | "epoch">[]): Promise<number> {
  if (leases.length === 0) return 0;
  const result = await db.pool.query(
    "DELETE FROM thread_leases l USING unnest($1::text[], $2::bigint[]) h(thread_id, epoch) WHERE l.thread_id = h.thread_id AND l.epoch = h.epoch",
    [leases.map((l) => l.threadId), leases.map((l) => l.epoch)],
  );
  return result.rowCount ?? 0;
}

/**
 * Gives a thread up with work still in flight (a draining node): the row stays, expired, so any
 * node's takeover scan (expiredLeases) picks the thread up now rather than after the TTL.
 */
export async function handOverLease(db: PostgresDb, lease: Pick<Lease, "threadId" | "epoch">): Promise<boolean> {
  const result = await db.pool.query("UPDATE thread_leases SET expires_at = '-infinity' WHERE thread_id = $1 AND epoch = $2", [lease.threadId, lease.epoch]);
  return result.rowCount === 1;
}

/** handOverLease for many holdings in one statement (a draining node's leases); answers how many moved. */
export async function handOverLeases(db: PostgresDb, leases: readonly Pick<Lease, "threadId" | "epoch">[]): Promise<number> {
  if (leases.length === 0) return 0;
  const result = await db.pool.query(
    `UPDATE thread_leases l SET expires_at = '-infinity' FROM unnest($1::text[], $2::bigint[]) h(thread_id, epoch)
WHERE l.thread_id = h.thread_id AND l.epoch = h.epoch`,
    [leases.map((l) => l.threadId), leases.map((l) => l.epoch)],
  );
  return result.rowCount ?? 0;
}

/** The thread's lease row as it stands (expired or not), if any. */
export async function leaseOf(db: PostgresDb, threadId: string, stamp: Stamp): Promise<LeaseState | undefined> {
  const result = await db.pool.query<LeaseRow & { expired: boolean }>(
    `SELECT thread_id, node_id, epoch, expires_at, expires_at <= ${nowSql("$2")} AS expired FROM thread_leases WHERE thread_id = $1`,
    [threadId, stamp()],
  );
  const row = result.rows[0];
  return row === undefined ? undefined : { ...toLease(row), expired: row.expired };
}

/**
 * Expired leases, oldest expiry first: threads whose holder died, was partitioned or handed them
 * over. A node takes each over with acquireLease and recovers its runs.
 */
export async function expiredLeases(db: PostgresDb, opts: { limit: number; stamp: Stamp }): Promise<Lease[]> {
  const result = await db.pool.query<LeaseRow>(
    `
SELECT thread_id, node_id, epoch, expires_at FROM thread_leases
WHERE expires_at <= ${nowSql("$1")} ORDER BY expires_at, thread_id LIMIT $2`,
    [opts.stamp(), opts.limit],
  );
  return result.rows.map(toLease);
}

/**
 * Hands over every lease row under `nodeId` (expired now, for any node's takeover scan): a node
 * restarted after a crash does it for the holdings of its dead previous process before it holds any.
 */
export async function handOverNodeLeases(db: PostgresDb, nodeId: string): Promise<number> {
  const result = await db.pool.query("UPDATE thread_leases SET expires_at = '-infinity' WHERE node_id = $1 AND expires_at > '-infinity'", [nodeId]);
  return result.rowCount ?? 0;
}

/**
 * Of the holdings given (thread, node, and epoch when known), the threads whose lease no longer
 * stands under them: the row went, expired, or names another node or epoch (one statement).
 */
export async function holdingsGone(
  db: PostgresDb,
  holdings: readonly { threadId: string; nodeId: string; epoch: number | undefined }[],
  stamp: Stamp,
): Promise<string[]> {
  if (holdings.length === 0) return [];
  const result = await db.pool.query<{ thread_id: string }>(
    `
SELECT h.thread_id FROM unnest($1::text[], $2::text[], $3::bigint[]) h(thread_id, node_id, epoch)
WHERE NOT EXISTS (
  SELECT 1 FROM thread_leases l WHERE l.thread_id = h.thread_id AND l.node_id = h.node_id
    AND (h.epoch IS NULL OR l.epoch = h.epoch) AND l.expires_at > ${nowSql("$4")})`,
    [holdings.map((h) => h.threadId), holdings.map((h) => h.nodeId), holdings.map((h) => h.epoch ?? null), stamp()],
  );
  return result.rows.map((r) => r.thread_id);
}
