// Fenced writes: an executor's write to a thread's records or checkpoints carries the lease epoch
// it holds and is refused, in the same statement, once the lease moved. A node that was paused
// (GC, SIGSTOP, a partition) past its lease's expiry and comes back cannot write over the node
// that took the thread over.
/*
 * The check locks the lease row FOR SHARE while it still carries the epoch:
 * - a steal in flight (an UPDATE of that row, not committed) makes the write wait; once the steal
 *   commits, READ COMMITTED re-checks the row's new version, the epoch no longer matches, and the
 *   write is refused;
 * - a write that locked first makes a steal wait until the write's transaction commits, so the
 *   new holder reads everything the old one wrote.
 * A renewal takes the same row lock: it waits for in-flight writes (milliseconds), never fails them.
 */

/** A holding a write belongs to (Lease has these fields). */
export interface Fence {
  threadId: string;
  epoch: number;
}

export interface FenceSql {
  /** a CTE to put in the statement's WITH list */
  cte: string;
  /** true while the holding stands: AND it into every write of the statement */
  holds: string;
}

/** Name of the CTE (statements may select `EXISTS (SELECT 1 FROM troupe_fence)` to tell a refusal from "no row"). */
export const FENCE_CTE = "troupe_fence";

/**
 * SQL a statement embeds to write only under `fence`; its two values (fenceValues) go at
 * positions $threadParam and $threadParam+1.
 */
export function fenceSql(threadParam: number): FenceSql {
  return {
    cte: `${FENCE_CTE} AS MATERIALIZED (SELECT 1 FROM thread_leases WHERE thread_id = $${threadParam} AND epoch = $${threadParam + 1}::bigint FOR SHARE)`,
    holds: `EXISTS (SELECT 1 FROM ${FENCE_CTE})`,
  };
}

export const fenceValues = (fence: Fence): [string, number] => [fence.threadId, fence.epoch];
