// The store's TTL sweep on Postgres (StorePort.sweepExpired), apart from store.ts so the sweeping
// thread does not load LangGraph's BaseStore. Rows several servers sweep at once are skipped, not
// waited for (SKIP LOCKED); the expiry index finds the due rows.
import type pg from "pg";

export const SWEEP_EXPIRED = `DELETE FROM store_items WHERE (namespace, key) IN (
  SELECT namespace, key FROM store_items WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED)`;

/** removes up to `limit` items whose TTL ran out (their vectors go with the row); how many went */
export async function sweepExpiredItems(pool: pg.Pool, limit: number, now = Date.now()): Promise<number> {
  const r = await pool.query(SWEEP_EXPIRED, [now, limit]);
  return r.rowCount ?? 0;
}
