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

const F_CHECK = fenceSql(1);
/** What a refused FENCE_CHECK_OR_FAIL's error says (isFenceRefusal). */
const REFUSED = "troupe lease fence refused";
/**
 * The fence alone ($1 thread, $2 epoch), for a transaction of several statements: sent with its
 * COMMIT (pipelined, no round trip of its own). Held: answers true, and its row lock holds until
 * the commit, so a steal waits for it and then sees every write of the transaction. Refused: it
 * fails, which aborts the transaction (the COMMIT answers ROLLBACK). At the end, not the start:
 * the lease row is locked only for the commit, never while the transaction waits on its client
 * (a node paused mid-transaction must not hold up the steal, nor the heartbeat's renewals).
 * (The failing branch reads the CTE, so the planner cannot evaluate it ahead of the condition.)
 */
export const FENCE_CHECK_OR_FAIL: NamedStatement = {
  name: "troupe_fence_check_or_fail",
  text: `WITH ${F_CHECK.cte}
SELECT CASE WHEN ${F_CHECK.holds} THEN true ELSE ('${REFUSED} (' || (SELECT count(*) FROM ${FENCE_CTE}) || ')')::boolean END AS held`,
};

/** Whether a statement failed because FENCE_CHECK_OR_FAIL refused. */
export const isFenceRefusal = (err: unknown): boolean => err instanceof Error && err.message.includes(REFUSED);

/**
 * How a write statement's parts keep their rows only under the fence. In the plain statement
 * (no fence) every member is empty or unconditional, so one text serves both (fencedStatements).
 */
export interface Guard {
  /** the condition, undefined in the plain statement */
  when: string | undefined;
  /** `AND <condition>` to append to a WHERE clause ("" when plain) */
  and: string;
  /** `WHERE <condition>` for a clause that has none ("" when plain) */
  where: string;
  /** one row of values to insert: `VALUES (...)` plain, `SELECT ... WHERE <condition>` fenced */
  row(values: string): string;
}

const UNGUARDED: Guard = { when: undefined, and: "", where: "", row: (values) => `VALUES (${values})` };

const guardOf = (when: string): Guard => ({ when, and: ` AND ${when}`, where: ` WHERE ${when}`, row: (values) => `SELECT ${values} WHERE ${when}` });

/** `guard` with one more condition every write must meet (a run create's assistant check). */
export const guardAlso = (guard: Guard, condition: string): Guard => guardOf(guard.when === undefined ? condition : `${guard.when} AND ${condition}`);

/** A statement's text and prepared name. */
export interface NamedStatement {
  name: string;
  text: string;
}

/**
 * One write statement written once, as its plain and its fenced form. `parts(guard)` lists its
 * parts in order, as `[name, sql]` CTEs; each data-modifying part keeps its rows only under
 * `guard` (read-only parts may ignore it). `answer`: the columns the statement answers (they may
 * read the parts' RETURNING rows).
 * - plain: the parts in a WITH list, then `SELECT answer`; without an answer the last part is the
 *   statement itself;
 * - fenced: the fence's CTE first, every part a CTE under the fence's condition, then
 *   `SELECT <held>, answer` (held: whether the holding stood, a refusal being a value). The
 *   fence's two values (fenceValues) follow the statement's own parameters (its highest `$n`).
 */
export function fencedStatements(
  name: string,
  parts: (guard: Guard) => [name: string, sql: string][],
  answer?: string,
): { plain: NamedStatement; fenced: NamedStatement } {
  const cte = ([n, sql]: [string, string]) => `${n} AS (\n  ${sql}\n)`;
  const plainParts = parts(UNGUARDED);
  const plain =
    answer === undefined
      ? plainParts.length === 1
        ? plainParts[0][1]
        : `WITH ${plainParts.slice(0, -1).map(cte).join(", ")}\n${plainParts[plainParts.length - 1][1]}`
      : `WITH ${plainParts.map(cte).join(", ")}\nSELECT ${answer}`;
  const f = fenceSql(highestParam(plain) + 1);
  const fenced = `WITH ${f.cte}, ${parts(guardOf(f.holds)).map(cte).join(", ")}\nSELECT ${f.holds} AS held${answer === undefined ? "" : `, ${answer}`}`;
  return { plain: { name, text: plain }, fenced: { name: `${name}_fenced`, text: fenced } };
}

/** The highest `$n` a statement's text names (its parameter count: every parameter is used). */
function highestParam(text: string): number {
  let n = 0;
  for (const m of text.matchAll(/\$(\d+)/g)) n = Math.max(n, Number(m[1]));
  return n;
}

/**
 * The fence of a statement merging writes of several threads (write-chains.ts, MergeKind): a CTE
 * (`name`) locking, FOR SHARE, the lease rows still carrying one of the holdings its
 * writes were issued under ($pairsParam: "<thread id> <epoch>" each, fenceManyValues; the thread
 * ids alone at $pairsParam - 1 for the index). Each write keeps its rows only if its own holding
 * is there (`holdsFor`), so a refusal is that write's alone. (A condition on the lease row's own
 * columns: a steal committed meanwhile is re-checked on the row's new version, as fenceSql's.)
 */
export function fenceManySql(pairsParam: number, name = FENCE_CTE): { cte: string; holdsFor(threadId: string, epoch: string): string } {
  return {
    cte: `${name} AS MATERIALIZED (SELECT l.thread_id, l.epoch FROM thread_leases l
  WHERE l.thread_id = ANY($${pairsParam - 1}::text[]) AND (l.thread_id || ' ' || l.epoch::text) = ANY($${pairsParam}::text[]) FOR SHARE)`,
    holdsFor: (threadId, epoch) => `(${epoch} IS NULL OR EXISTS (SELECT 1 FROM ${name} f WHERE f.thread_id = ${threadId} AND f.epoch = ${epoch}))`,
  };
}

/** fenceManySql's two values for the writes' fences (undefined: an unfenced write). */
export function fenceManyValues(fences: readonly (Fence | undefined)[]): [string[], string[]] {
  const threads = new Set<string>();
  const pairs = new Set<string>();
  for (const f of fences) {
    if (f === undefined) continue;
    threads.add(f.threadId);
    // (no ambiguity: an epoch has no space, so "<id> <epoch>" names one pair)
    pairs.add(`${f.threadId} ${f.epoch}`);
  }
  return [[...threads], [...pairs]];
}
