// Migration 4: row counts of threads, assistants and crons kept by triggers, so the total of an
// unfiltered search or count is a read of a few counter rows instead of a count of the whole
// table (which grows with the table: at a million threads it was the search's main cost).
/*
 * - A statement trigger per table and operation adds the rows a statement inserted (or subtracts
 *   those it deleted, or zeroes the count on TRUNCATE) in the statement's own transaction, so in
 *   every snapshot the counts sum to count(*) exactly. Upserts that update count nothing (the
 *   INSERT trigger's transition table holds only the rows really inserted), nor do inserts that
 *   ON CONFLICT DO NOTHING skipped.
 * - Each connection adds to its own slot (its backend pid modulo 64): concurrent writers rarely
 *   wait on the same counter row until their commit; a read sums the table's slots.
 * - Rows already there are counted once, after the triggers exist (CREATE TRIGGER locks out
 *   writers until this migration commits, so none is missed or counted twice).
 */
import type { Migration } from "./schema.ts";

/** the tables whose rows are counted (search-sql.ts reads their counts) */
export const COUNTED_TABLES = ["threads", "assistants", "crons"] as const;

const SLOTS = 64;

export const ROW_COUNTS: Omit<Migration, "version"> = {
  name: "row counts",
  sql: `
CREATE TABLE troupe_row_counts (
  table_name text COLLATE "C" NOT NULL,
  slot integer NOT NULL,
  n bigint NOT NULL,
  PRIMARY KEY (table_name, slot)
);

CREATE FUNCTION troupe_count_inserted() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  INSERT INTO troupe_row_counts AS c (table_name, slot, n)
    SELECT TG_TABLE_NAME, pg_backend_pid() % ${SLOTS}, count(*) FROM inserted_rows HAVING count(*) > 0
    ON CONFLICT (table_name, slot) DO UPDATE SET n = c.n + EXCLUDED.n;
  RETURN NULL;
END
$fn$;

CREATE FUNCTION troupe_count_deleted() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  INSERT INTO troupe_row_counts AS c (table_name, slot, n)
    SELECT TG_TABLE_NAME, pg_backend_pid() % ${SLOTS}, -count(*) FROM deleted_rows HAVING count(*) > 0
    ON CONFLICT (table_name, slot) DO UPDATE SET n = c.n + EXCLUDED.n;
  RETURN NULL;
END
$fn$;

CREATE FUNCTION troupe_count_truncated() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  DELETE FROM troupe_row_counts WHERE table_name = TG_TABLE_NAME;
  RETURN NULL;
END
$fn$;
${COUNTED_TABLES.map(
  (t) => `
CREATE TRIGGER ${t}_count_inserted AFTER INSERT ON ${t} REFERENCING NEW TABLE AS inserted_rows FOR EACH STATEMENT EXECUTE FUNCTION troupe_count_inserted();
CREATE TRIGGER ${t}_count_deleted AFTER DELETE ON ${t} REFERENCING OLD TABLE AS deleted_rows FOR EACH STATEMENT EXECUTE FUNCTION troupe_count_deleted();
CREATE TRIGGER ${t}_count_truncated AFTER TRUNCATE ON ${t} FOR EACH STATEMENT EXECUTE FUNCTION troupe_count_truncated();
INSERT INTO troupe_row_counts (table_name, slot, n) SELECT '${t}', 0, count(*) FROM ${t};`,
).join("")}
`,
};

/** The number of rows of a counted table, from its counters (same snapshot as the statement it is part of). */
export const countedRowsSql = (table: (typeof COUNTED_TABLES)[number]): string =>
  `(SELECT coalesce(sum(n), 0) FROM troupe_row_counts WHERE table_name = '${table}')`;
