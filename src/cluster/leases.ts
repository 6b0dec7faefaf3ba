// Thread leases: a thread's actor runs on the node holding its lease. Each operation is one
// statement, so concurrent nodes are ordered by the row lock alone: of N nodes acquiring one
// thread, exactly one gets it; a lease is stolen only once expired, and every acquisition draws a
// new epoch from one sequence (so epochs only grow, and a (thread, epoch) pair names one holding).
import type { PostgresDb } from "../storage/postgres/pool.ts";
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

/**
 * Takes the thread's lease for `nodeId` if nobody holds it or its holding expired (a steal: new
 * epoch). A lease this node still holds is not re-taken (undefined): the node knows its leases.
 */
export async function acquireLease(db: PostgresDb, threadId: string, nodeId: string, timing: LeaseTiming): Promise<Lease | undefined> {
  const result = await db.pool.query<LeaseRow>(
    `
INSERT INTO thread_leases AS l (thread_id, node_id, epoch, expires_at)
VALUES ($1, $2, nextval('thread_lease_epochs'), ${laterSql("$3", "$4")})
ON CONFLICT (thread_id) DO UPDATE SET node_id = EXCLUDED.node_id, epoch = EXCLUDED.epoch, expires_at = EXCLUDED.expires_at
WHERE l.expires_at <= ${nowSql("$3")}
RETURNING thread_id, node_id, epoch, expires_at`,
    [threadId, nodeId, timing.stamp(), timing.ttlMs],
  );
  const row = result.rows[0];
  return row === undefined ? undefined : toLease(row);
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

/**
 * Gives a thread up with work still in flight (a draining node): the row stays, expired, so any
 * node's takeover scan (expiredLeases) picks the thread up now rather than after the TTL.
 */
export async function handOverLease(db: PostgresDb, lease: Pick<Lease, "threadId" | "epoch">): Promise<boolean> {
  const result = await db.pool.query("UPDATE thread_leases SET expires_at = '-infinity' WHERE thread_id = $1 AND epoch = $2", [lease.threadId, lease.epoch]);
  return result.rowCount === 1;
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
