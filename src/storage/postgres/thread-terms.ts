// Thread searches and counts whose whole filter is one metadata value (schema-terms.ts): sorted by
// created_at, the page walks that term's btree range in the page's order and joins each thread
// row (rechecking the member, since long values are spelled by a hash); the total is an
// index-only count of the range. Any other filter or order uses search-sql.ts (the GIN index on
// metadata, the created/updated/status btrees), which also serves several metadata members at
// once: there the planner may combine a term with conditions a walk of one range would have to
// check row by row, so a term drives only when it is the whole filter. The recheck is a plain
// member comparison on purpose: given the filter's `@>`, Postgres prefers the GIN bitmap of all
// matches (every match's heap page read) over the ordered walk.
import type pg from "pg";
import type { Page, PageSpec, ThreadFilter, ThreadSort } from "../port.ts";
import type { ThreadRecord } from "../records.ts";
import { jsonbKey, Params } from "./filter-sql.ts";

export interface MetadataTerm {
  key: string;
  value: string | number | boolean;
}

/** The filter's metadata member when it is the filter's only condition and a term answers it (a string, number or boolean). */
export function soleTerm(f: ThreadFilter): MetadataTerm | undefined {
  const members = Object.entries(f.metadata ?? {});
  if (members.length !== 1 || f.values != null || f.status != null || (f.ids?.length ?? 0) > 0 || f.auth !== undefined) return undefined;
  const [[key, value]] = members;
  return typeof value === "string" || typeof value === "boolean" || (typeof value === "number" && Number.isFinite(value)) ? { key, value } : undefined;
}

/** the term's range of thread_terms, with its parameters added to `p` */
function termSql(term: MetadataTerm, p: Params): string {
  return `term_key = troupe_term_spelling(${p.text(jsonbKey(term.key))}) AND term_value = troupe_term_value(${p.json(term.value)})`;
}

/** The statement of a page sorted by created_at (then thread_id, same direction: the planner's order) and its total. */
export function termSearchStatement(term: MetadataTerm, q: PageSpec<ThreadSort>): { text: string; values: unknown[] } {
  const p = new Params();
  const range = termSql(term, p);
  const member = `coalesce(t.metadata -> ${p.text(jsonbKey(term.key))} = ${p.json(term.value)}, FALSE)`;
  const dir = q.order === "asc" ? "ASC" : "DESC";
  return {
    text: `SELECT t.record, (SELECT count(*) FROM thread_terms WHERE ${range})::int AS total__
     FROM thread_terms m JOIN threads t ON t.thread_id = m.term_thread_id
     WHERE ${range} AND ${member}
     ORDER BY m.term_created_at ${dir}, m.term_thread_id ${dir} LIMIT ${p.add(q.limit)} OFFSET ${p.add(q.offset)}`,
    values: p.values,
  };
}

/** The statement of how many threads have the term (an index-only count of its range). */
export function termCountStatement(term: MetadataTerm): { text: string; values: unknown[] } {
  const p = new Params();
  return { text: `SELECT count(*)::int AS n FROM thread_terms WHERE ${termSql(term, p)}`, values: p.values };
}

export async function searchByTerm(pool: pg.Pool, term: MetadataTerm, q: PageSpec<ThreadSort>): Promise<Page<ThreadRecord>> {
  const result = await pool.query<{ record: ThreadRecord; total__: number }>(termSearchStatement(term, q));
  if (result.rows.length > 0) return { items: result.rows.map((row) => row.record), total: result.rows[0].total__ };
  // nothing matches, or the page is past the end / empty: then the total needs its own count
  return { items: [], total: q.offset === 0 && q.limit > 0 ? 0 : await countByTerm(pool, term) };
}

export async function countByTerm(pool: pg.Pool, term: MetadataTerm): Promise<number> {
  return (await pool.query<{ n: number }>(termCountStatement(term))).rows[0].n;
}
