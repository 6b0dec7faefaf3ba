// Array parameters in PostgreSQL's binary format (src/storage/postgres/binary-arrays.ts), against a
// real server: what arrives is exactly what was sent — NULLs, empty arrays and elements, bytes no
// text encoding survives, multi-byte text, and an element far larger than any literal.
import { Client } from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { byteaArray, textArray } from "../../src/storage/postgres/binary-arrays.ts";
import { usePostgresDatabase } from "../helpers/postgres.ts";

const db = usePostgresDatabase();
let client: Client;

beforeAll(async () => {
  client = new Client({ connectionString: db.uri });
  await client.connect();
});
afterAll(() => client.end());

async function roundTrip<T>(sql: string, param: Buffer): Promise<T[]> {
  const r = await client.query<{ v: T | null; ord: string }>(`SELECT v, ord FROM unnest(${sql}) WITH ORDINALITY u(v, ord) ORDER BY ord`, [param]);
  return r.rows.map((row) => row.v as T);
}

describe("binary array parameters", () => {
  it("bytea[]: every byte value, NULLs, empty elements, a large element, in order", async () => {
    const every = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    const large = Buffer.alloc(3 * 1024 * 1024, 0x5c); // backslashes: what a text literal must escape
    const sent = [every, null, Buffer.alloc(0), new Uint8Array([0, 34, 92, 123, 125, 44]), undefined, large];
    const got = await roundTrip<Buffer>("$1::bytea[]", byteaArray(sent));
    expect(got.map((b) => (b === null ? null : b.toString("hex")))).toEqual(sent.map((b) => (b == null ? null : Buffer.from(b).toString("hex"))));
  });

  it("text[]: quotes, backslashes, braces, commas, multi-byte and astral characters, NULLs, empty strings", async () => {
    const sent = ['{"a":"b\\"c"}', null, "", "NULL", "é\u00a0✓𝄞", "a,b}{c", undefined, "x".repeat(100_000)];
    const got = await roundTrip<string>("$1::text[]", textArray(sent));
    expect(got).toEqual(sent.map((s) => s ?? null));
  });

  it("empty arrays are '{}' (unnest yields nothing, cardinality 0)", async () => {
    const r = await client.query<{ b: number; t: number }>("SELECT cardinality($1::bytea[]) AS b, cardinality($2::text[]) AS t", [
      byteaArray([]),
      textArray([]),
    ]);
    expect(r.rows[0]).toEqual({ b: 0, t: 0 });
    expect(await roundTrip("$1::bytea[]", byteaArray([]))).toEqual([]);
  });

  it("is refused where the statement expects another element type (the oid is checked)", async () => {
    await expect(client.query("SELECT cardinality($1::int[]) AS n", [textArray(["1"])])).rejects.toThrow(/element type 25/);
  });
});
