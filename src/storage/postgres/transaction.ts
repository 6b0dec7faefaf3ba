// One transaction on a pooled connection: committed when `work` resolves, rolled back when it throws.
import type pg from "pg";

/** A statement sent with the BEGIN (pipelined) and checked before `work` runs (a lease fence: write-chains.ts). */
export interface Opening {
  query: pg.QueryConfig;
  /** throws to roll the transaction back */
  check(result: pg.QueryResult): void;
}

export async function transaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>, opening?: Opening): Promise<T> {
  const client = await pool.connect();
  try {
    if (opening === undefined) await client.query("BEGIN");
    else {
      const [, opened] = await Promise.all([client.query("BEGIN"), client.query(opening.query)]);
      opening.check(opened);
    }
    const result = await work(client);
    await client.query("COMMIT");
    return result;
  } catch (err) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}
