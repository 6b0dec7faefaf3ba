// Cron ticks fire once cluster-wide: every node schedules every cron, and a node fires a tick
// only if it moved the cron's last fired tick forward to it. The row lock orders the racers;
// the losers find the tick already claimed (or a later one) and skip it.
/*
 * Kept apart from the cron record (its own small table) so a claim never races a user's PATCH of
 * the cron, and a node whose view of the cron is stale cannot fire an old tick again.
 */
import type { PostgresDb } from "../storage/postgres/pool.ts";

/** True when this call claimed `tickAt` for the cron: the caller (alone) fires it. */
export async function claimCronTick(db: PostgresDb, cronId: string, tickAt: Date, nodeId: string): Promise<boolean> {
  const result = await db.pool.query(
    `
INSERT INTO cron_ticks AS c (cron_id, tick_at, node_id) VALUES ($1, $2, $3)
ON CONFLICT (cron_id) DO UPDATE SET tick_at = EXCLUDED.tick_at, node_id = EXCLUDED.node_id, claimed_at = clock_timestamp()
WHERE c.tick_at < EXCLUDED.tick_at
RETURNING 1`,
    [cronId, tickAt, nodeId],
  );
  return result.rowCount === 1;
}

/** The last tick fired for the cron (undefined: none yet). */
export async function lastCronTick(db: PostgresDb, cronId: string): Promise<{ tickAt: Date; nodeId: string } | undefined> {
  const result = await db.pool.query<{ tick_at: Date; node_id: string }>("SELECT tick_at, node_id FROM cron_ticks WHERE cron_id = $1", [cronId]);
  const row = result.rows[0];
  return row === undefined ? undefined : { tickAt: row.tick_at, nodeId: row.node_id };
}

/** Drops a deleted cron's claim row. */
export async function forgetCronTicks(db: PostgresDb, cronId: string): Promise<void> {
  await db.pool.query("DELETE FROM cron_ticks WHERE cron_id = $1", [cronId]);
}
