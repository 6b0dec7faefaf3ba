// One transaction on a pooled connection: committed when `work` resolves, rolled back when it throws.
import type pg from "pg";

/** A statement sent with the COMMIT (pipelined) that may refuse it by failing (a lease fence: write-chains.ts). */
export interface Closing {
  query: pg.QueryConfig;
  /** the error to throw when `err` (the statement's failure) is its refusal; undefined otherwise */
  refused(err: unknown): Error | undefined;
}

export async function transaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>, closing?: Closing): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    const result = await work(client);
    if (closing === undefined) await client.query("COMMIT");
    else {
      // a failed check aborts the transaction: the COMMIT sent with it answers ROLLBACK
      const [checked, committed] = await Promise.allSettled([client.query(closing.query), client.query("COMMIT")]);
      if (checked.status === "rejected") throw closing.refused(checked.reason) ?? checked.reason;
      if (committed.status === "rejected") throw committed.reason;
    }
    return result;
  } catch (err) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}
