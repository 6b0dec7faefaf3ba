// The node registry: which `troupe serve` processes form the deployment. A node is alive while
// its row's expires_at (its last heartbeat + TTL) is ahead of the database's clock.
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import type { PostgresDb } from "../storage/postgres/pool.ts";
import { laterSql, nowSql, type Stamp } from "./time.ts";

export interface NodeIdentity {
  /** stable name (--node-id), shown by /info */
  nodeId: string;
  /** this process: a restart under the same node id is another instance */
  instance: string;
  /**
   * The instance of this node id's previous process when it is certainly dead (the data dir says
   * so: node-identity-file.ts): registration replaces it at once instead of waiting for it to expire.
   */
  succeeds?: string;
}

export interface NodeRecord extends NodeIdentity {
  startedAt: Date;
  heartbeatAt: Date;
  expiresAt: Date;
  draining: boolean;
  alive: boolean;
  info: Record<string, unknown>;
}

/** Node ids: what a lease row and a LISTEN channel can carry. */
export const NODE_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$/;

/** A fresh identity: the given node id (else host name + random suffix) and a random instance. */
export function newNodeIdentity(nodeId?: string): NodeIdentity {
  const id =
    nodeId ??
    `${
      hostname()
        .replace(/[^A-Za-z0-9._-]/g, "-")
        .slice(0, 30) || "node"
    }-${randomBytes(3).toString("hex")}`;
  if (!NODE_ID.test(id)) throw new Error(`node id must match ${NODE_ID.source}: ${JSON.stringify(id)}`);
  return { nodeId: id, instance: randomBytes(8).toString("hex") };
}

export type RegisterResult = { registered: true } | { registered: false; heldUntil: Date };

/**
 * Registers this instance under its node id. Refused (as a value) while another instance of the
 * same id is alive: two processes configured with one id must not both heartbeat it. The instance
 * it `succeeds` (certainly dead) is replaced even while its registration runs.
 */
export async function registerNode(
  db: PostgresDb,
  node: NodeIdentity,
  opts: { ttlMs: number; stamp: Stamp; info?: Record<string, unknown> },
): Promise<RegisterResult> {
  const result = await db.pool.query<{ registered: boolean; expires_at: Date }>(
    `
WITH mine AS (
  INSERT INTO cluster_nodes AS n (node_id, instance, started_at, heartbeat_at, expires_at, draining, info)
  VALUES ($1, $2, ${nowSql("$3")}, ${nowSql("$3")}, ${laterSql("$3", "$4")}, false, $5::jsonb)
  ON CONFLICT (node_id) DO UPDATE SET instance = EXCLUDED.instance, started_at = EXCLUDED.started_at,
    heartbeat_at = EXCLUDED.heartbeat_at, expires_at = EXCLUDED.expires_at, draining = false, info = EXCLUDED.info
  WHERE n.expires_at <= EXCLUDED.started_at OR n.instance = EXCLUDED.instance OR n.instance = $6
  RETURNING true AS registered, expires_at
)
SELECT registered, expires_at FROM mine
UNION ALL
SELECT false, expires_at FROM cluster_nodes WHERE node_id = $1 AND NOT EXISTS (SELECT 1 FROM mine)`,
    [node.nodeId, node.instance, opts.stamp(), opts.ttlMs, JSON.stringify(opts.info ?? {}), node.succeeds ?? null],
  );
  const row = result.rows[0];
  if (row?.registered) return { registered: true };
  // no row at all: the holder's row was removed between our attempt and the read; the caller retries
  return { registered: false, heldUntil: row?.expires_at ?? new Date(0) };
}

/** Marks this instance draining (it takes no new leases; others see it in the registry). */
export async function markDraining(db: PostgresDb, node: NodeIdentity): Promise<boolean> {
  const result = await db.pool.query("UPDATE cluster_nodes SET draining = true WHERE node_id = $1 AND instance = $2", [node.nodeId, node.instance]);
  return result.rowCount === 1;
}

/** Removes this instance's row (a clean shutdown: it is gone at once, not after the TTL). */
export async function deregisterNode(db: PostgresDb, node: NodeIdentity): Promise<boolean> {
  const result = await db.pool.query("DELETE FROM cluster_nodes WHERE node_id = $1 AND instance = $2", [node.nodeId, node.instance]);
  return result.rowCount === 1;
}

interface NodeRow {
  node_id: string;
  instance: string;
  started_at: Date;
  heartbeat_at: Date;
  expires_at: Date;
  draining: boolean;
  alive: boolean;
  info: Record<string, unknown>;
}

/** Every registered node, alive or not, by node id. */
export async function listNodes(db: PostgresDb, stamp: Stamp): Promise<NodeRecord[]> {
  const result = await db.pool.query<NodeRow>(`SELECT *, expires_at > ${nowSql("$1")} AS alive FROM cluster_nodes ORDER BY node_id`, [stamp()]);
  return result.rows.map((r) => ({
    nodeId: r.node_id,
    instance: r.instance,
    startedAt: r.started_at,
    heartbeatAt: r.heartbeat_at,
    expiresAt: r.expires_at,
    draining: r.draining,
    alive: r.alive,
    info: r.info,
  }));
}

/** How many nodes are alive (GET /info). */
export async function countAliveNodes(db: PostgresDb, stamp: Stamp): Promise<number> {
  const result = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM cluster_nodes WHERE expires_at > ${nowSql("$1")}`, [stamp()]);
  return result.rows[0].n;
}

/** Removes rows of nodes dead for longer than `afterMs` (a singleton chore); returns how many. */
export async function forgetDeadNodes(db: PostgresDb, opts: { afterMs: number; stamp: Stamp }): Promise<number> {
  const result = await db.pool.query(`DELETE FROM cluster_nodes WHERE expires_at + $2::float8 * interval '1 millisecond' <= ${nowSql("$1")}`, [
    opts.stamp(),
    opts.afterMs,
  ]);
  return result.rowCount ?? 0;
}

/** The registration of each of `nodeIds` that has a row: its instance and whether it is alive (one statement). */
export async function nodeStates(db: PostgresDb, nodeIds: readonly string[], stamp: Stamp): Promise<Map<string, { instance: string; alive: boolean }>> {
  const result = await db.pool.query<{ node_id: string; instance: string; alive: boolean }>(
    `SELECT node_id, instance, expires_at > ${nowSql("$2")} AS alive FROM cluster_nodes WHERE node_id = ANY($1::text[])`,
    [nodeIds, stamp()],
  );
  return new Map(result.rows.map((r) => [r.node_id, { instance: r.instance, alive: r.alive }]));
}
