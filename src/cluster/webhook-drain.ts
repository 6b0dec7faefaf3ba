// Webhook deliveries whose node died: a run's delivery is made by the node that finished it (its
// outbox row carries that node's id); when that node is no longer alive, the node running the
// webhook-drain singleton takes the row over in one statement and hands it to its own worker.
/*
 * Rows of a node that is alive (or expired less than DEAD_FOR_MS ago) are never taken, so a
 * delivery is made by one node at a time; a node cut off for longer may still make an attempt it
 * had started (webhooks are at least once; receivers dedupe by `webhook-id`). Rows without a node
 * (written outside a cluster) count as a dead node's.
 */
import type { PostgresDb } from "../storage/postgres/pool.ts";
import { nowSql, type Stamp, databaseStamp } from "./time.ts";

export interface TakenDelivery {
  threadId: string;
  runId: string;
  /** when its next attempt is due (ISO) */
  nextAttemptAt: string;
}

/** Rows taken per statement; the job repeats while a batch comes back full. */
export const DRAIN_BATCH = 500;

/**
 * A node's deliveries are taken once its registration expired this long ago (a TTL more): a node
 * whose beats were only late (a starved event loop) is back before then and has made them itself.
 */
export const DEAD_FOR_MS = 15_000;

/** Moves up to `limit` deliveries of dead nodes to `nodeId`; returns them. */
export async function takeDeadNodesDeliveries(
  db: PostgresDb,
  nodeId: string,
  opts: { limit?: number; deadForMs?: number; stamp?: Stamp } = {},
): Promise<TakenDelivery[]> {
  const result = await db.pool.query<{ thread_id: string; run_id: string; next_attempt_at: string }>(
    `
UPDATE webhook_outbox o SET node_id = $1
FROM (
  SELECT thread_id, run_id FROM webhook_outbox w
  WHERE w.node_id IS DISTINCT FROM $1
    AND NOT EXISTS (SELECT 1 FROM cluster_nodes n WHERE n.node_id = w.node_id AND n.expires_at + $4::float8 * interval '1 millisecond' > ${nowSql("$3")})
  ORDER BY next_attempt_at
  LIMIT $2
  FOR UPDATE SKIP LOCKED
) dead
WHERE o.thread_id = dead.thread_id AND o.run_id = dead.run_id
RETURNING o.thread_id, o.run_id, o.next_attempt_at`,
    [nodeId, opts.limit ?? DRAIN_BATCH, (opts.stamp ?? databaseStamp)(), opts.deadForMs ?? DEAD_FOR_MS],
  );
  return result.rows.map((r) => ({ threadId: r.thread_id, runId: r.run_id, nextAttemptAt: r.next_attempt_at }));
}
