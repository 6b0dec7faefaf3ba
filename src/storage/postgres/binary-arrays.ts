// Array parameters in PostgreSQL's binary array format (array_send/array_recv), for the columns of
// the multi-row statements (unnest of arrays). node-postgres sends a JS array as one text literal:
// each bytea element hex-encoded ('{"\\x…"}'), each string escaped by two regex passes, and the
// whole literal measured and copied again; the server then parses it character by character. On a
// long thread (a run's end carries its whole state) that was a quarter of an actor shard's busy
// time. A Buffer parameter goes out as binary instead: the bytes as they are, each element's
// length in front. The statement must cast the parameter to the array type (`$n::bytea[]`,
// `$n::text[]`): the server checks the element type named here against it.

/** PostgreSQL type oids of the element types (pg_type) */
const BYTEA_OID = 17;
const TEXT_OID = 25;

function binaryArray(oid: number, elements: readonly (Uint8Array | string | null | undefined)[]): Buffer {
  if (elements.length === 0) {
    const empty = Buffer.allocUnsafe(12); // no dimensions: '{}'
    empty.writeInt32BE(0, 0);
    empty.writeInt32BE(0, 4);
    empty.writeUInt32BE(oid, 8);
    return empty;
  }
  const lengths = new Array<number>(elements.length);
  let size = 20; // ndim, flags, element oid, dimension length, lower bound
  let hasNull = 0;
  for (let i = 0; i < elements.length; i++) {
    const e = elements[i];
    const n = e == null ? -1 : typeof e === "string" ? Buffer.byteLength(e, "utf8") : e.byteLength;
    lengths[i] = n;
    if (n < 0) hasNull = 1;
    size += 4 + Math.max(n, 0);
  }
  const out = Buffer.allocUnsafe(size);
  out.writeInt32BE(1, 0);
  out.writeInt32BE(hasNull, 4);
  out.writeUInt32BE(oid, 8);
  out.writeInt32BE(elements.length, 12);
  out.writeInt32BE(1, 16);
  let at = 20;
  for (let i = 0; i < elements.length; i++) {
    const e = elements[i];
    const n = lengths[i]!;
    out.writeInt32BE(n, at);
    at += 4;
    if (e == null) continue;
    if (typeof e === "string") out.write(e, at, n, "utf8");
    else out.set(e, at);
    at += n;
  }
  return out;
}

/** A `bytea[]` parameter (undefined elements are NULL) */
export function byteaArray(values: readonly (Uint8Array | null | undefined)[]): Buffer {
  return binaryArray(BYTEA_OID, values);
}

/** A `text[]` parameter (undefined elements are NULL) */
export function textArray(values: readonly (string | null | undefined)[]): Buffer {
  return binaryArray(TEXT_OID, values);
}

/** How one column of arrayColumns travels: a JS array (short values), or binary (textArray, byteaArray: large JSON, bytes). */
export type ColumnFormat = "plain" | "text" | "bytes";

/**
 * The array parameters of a multi-row statement: one per entry of `formats`, the column at that
 * position of every row (`rows`: each write's single-statement values; an entry undefined skips
 * its position).
 */
export function arrayColumns(rows: readonly (readonly unknown[])[], formats: readonly (ColumnFormat | undefined)[]): unknown[] {
  const columns: unknown[] = [];
  formats.forEach((format, at) => {
    if (format === undefined) return;
    const column = rows.map((row) => row[at]);
    columns.push(format === "plain" ? column : format === "text" ? textArray(column as (string | null)[]) : byteaArray(column as (Uint8Array | null)[]));
  });
  return columns;
}
