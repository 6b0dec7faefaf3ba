// A batch's queries leave in one socket write (write-chains.ts pipelinedInOneWrite): node-postgres
// corks and uncorks its socket around every query, so BEGIN, n statements and COMMIT were n + 2
// writes (system calls, and wake-ups of the backend); inside our cork they are one. Against a real
// server through the pool the storage uses, counting what reaches the socket.
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openPostgres, type PostgresDb } from "../../src/storage/postgres/pool.ts";
import { pipelinedInOneWrite } from "../../src/storage/postgres/write-chains.ts";
import { usePostgresDatabase } from "../helpers/postgres.ts";

const db = usePostgresDatabase();
let pg_: PostgresDb;

beforeAll(() => {
  pg_ = openPostgres({ uri: db.uri });
});
afterAll(() => pg_.close());

type Socket = { _write: (...a: unknown[]) => unknown; _writev?: (...a: unknown[]) => unknown };

/** the client's socket writes while `issue` runs and its queries settle */
async function socketWrites(client: pg.PoolClient, issue: () => Promise<unknown>[]): Promise<{ writes: number; settled: PromiseSettledResult<unknown>[] }> {
  const socket = (client as unknown as { connection: { stream: Socket } }).connection.stream;
  let writes = 0;
  const write = socket._write;
  const writev = socket._writev;
  socket._write = function (this: unknown, ...a: unknown[]) {
    writes++;
    return write.apply(this, a);
  };
  if (writev) {
    socket._writev = function (this: unknown, ...a: unknown[]) {
      writes++;
      return writev.apply(this, a);
    };
  }
  try {
    const settled = await Promise.allSettled(issue());
    return { writes, settled };
  } finally {
    socket._write = write;
    if (writev) socket._writev = writev;
  }
}

const batchOf = (c: pg.PoolClient, n: number, failAt = -1) => [
  c.query("BEGIN"),
  ...Array.from({ length: n }, (_, i) => c.query(i === failAt ? "SELECT 1 / 0 AS v" : "SELECT $1::int AS v", i === failAt ? [] : [i])),
  c.query("COMMIT"),
];

describe("a batch's queries in one socket write", () => {
  it("node-postgres alone: one write per query; in pipelinedInOneWrite: one for all, same answers", async () => {
    const client = await pg_.pool.connect();
    try {
      const plain = await socketWrites(client, () => batchOf(client, 5));
      expect(plain.writes).toBe(7);
      const corked = await socketWrites(client, () => pipelinedInOneWrite(client, () => batchOf(client, 5)));
      expect(corked.writes).toBe(1);
      expect(corked.settled.map((s) => s.status)).toEqual(plain.settled.map((s) => s.status));
      const values = (r: PromiseSettledResult<unknown>[]) =>
        r.slice(1, -1).map((s) => ((s as PromiseFulfilledResult<pg.QueryResult>).value.rows[0] as { v: number }).v);
      expect(values(corked.settled)).toEqual([0, 1, 2, 3, 4]);
      expect(values(plain.settled)).toEqual([0, 1, 2, 3, 4]);
    } finally {
      client.release();
    }
  });

  it("a failing statement still aborts the transaction: COMMIT answers ROLLBACK, the connection stays usable", async () => {
    const client = await pg_.pool.connect();
    try {
      const { writes, settled } = await socketWrites(client, () => pipelinedInOneWrite(client, () => batchOf(client, 3, 1)));
      expect(writes).toBe(1);
      expect(settled.map((s) => s.status)).toEqual(["fulfilled", "fulfilled", "rejected", "rejected", "fulfilled"]);
      expect((settled[4] as PromiseFulfilledResult<pg.QueryResult>).value.command).toBe("ROLLBACK");
      expect((await client.query("SELECT 7 AS v")).rows[0]).toEqual({ v: 7 });
    } finally {
      client.release();
    }
  });
});
