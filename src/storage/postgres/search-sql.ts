// One search statement for threads, assistants and crons: a page of records in the planner's
// order (indexes/planner.ts: the sort field, then created_at, then id, all in the sort direction;
// null values last either way) and how many match, from one snapshot in one round trip.
import type pg from "pg";
import type { Page, PageSpec } from "../port.ts";
import type { Params } from "./filter-sql.ts";
import { COUNTED_TABLES, countedRowsSql } from "./schema-counts.ts";

export interface SearchSql<S extends string> {
  table: string;
  idColumn: string;
  /** sortable fields -> their column (every one COLLATE "C" text or comparable) */
  sortColumns: Readonly<Record<S, string>>;
  /** what a row returns (one column aliased `record`, or several the caller assembles) */
  select: string;
  /** sort fields whose column may be NULL (ordered NULLS LAST either way); the others are NOT NULL */
  nullable?: readonly S[];
}

/** ORDER BY for the planner's order. */
export function orderBySql<S extends string>(t: SearchSql<S>, sortBy: S, order: "asc" | "desc"): string {
  const dir = order === "asc" ? "ASC" : "DESC";
  const column = t.sortColumns[sortBy];
  const tail = `created_at ${dir}, ${t.idColumn} ${dir}`;
  if (column === "created_at") return `created_at ${dir}, ${t.idColumn} ${dir}`;
  if (column === t.idColumn) return `${t.idColumn} ${dir}`;
  // NOT NULL columns without a NULLS clause: a backward index walk gives DESC (NULLS LAST would
  // not match the index's order and sort the whole table)
  return t.nullable?.includes(sortBy) ? `${column} ${dir} NULLS LAST, ${tail}` : `${column} ${dir}, ${tail}`;
}

/**
 * The page and the total. The count is an uncorrelated subquery (computed once, same snapshot);
 * when the page is empty (an offset past the end) it is asked for on its own.
 */
/** The statement of a page and its total (`where` uses the parameters in `p`; limit and offset are added last). */
export function searchStatement<S extends string>(t: SearchSql<S>, where: string, p: Params, page: PageSpec<S>): { text: string; values: unknown[] } {
  const limit = p.add(page.limit);
  const offset = p.add(page.offset);
  return {
    text: `SELECT ${t.select}, ${totalSql(t.table, where)}::int AS total__
     FROM ${t.table} WHERE ${where} ORDER BY ${orderBySql(t, page.sortBy, page.order)} LIMIT ${limit} OFFSET ${offset}`,
    values: p.values,
  };
}

export async function searchPage<S extends string, R>(
  pool: pg.Pool,
  t: SearchSql<S>,
  where: string,
  p: Params,
  page: PageSpec<S>,
  toRecord: (row: Record<string, unknown>) => R,
): Promise<Page<R>> {
  const result = await pool.query(searchStatement(t, where, p, page));
  if (result.rows.length === 0) {
    // nothing matches, or the page is past the end / empty: then the total needs its own count
    const empty = page.offset === 0 && page.limit > 0;
    return { items: [], total: empty ? 0 : await countRows(pool, t.table, where, p.values.slice(0, -2)) };
  }
  return { items: result.rows.map(toRecord), total: (result.rows[0] as { total__: number }).total__ };
}

export async function countRows(pool: pg.Pool, table: string, where: string, values: unknown[]): Promise<number> {
  const result = await pool.query<{ n: number }>(countStatement(table, where, values));
  return result.rows[0].n;
}

/** The statement of a count (`where` uses `values`). */
export function countStatement(table: string, where: string, values: unknown[]): { text: string; values: unknown[] } {
  return { text: `SELECT ${totalSql(table, where)}::int AS n`, values };
}

/**
 * How many rows match, as a subquery: without a filter, the table's maintained row count
 * (schema-counts.ts: a few counter rows, whatever the table's size); else a count of the
 * matching rows (by the filter's indexes).
 */
function totalSql(table: string, where: string): string {
  const counted = COUNTED_TABLES.find((t) => t === table);
  return where === "TRUE" && counted !== undefined ? countedRowsSql(counted) : `(SELECT count(*) FROM ${table} WHERE ${where})`;
}
