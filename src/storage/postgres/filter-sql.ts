// Search filters as SQL conditions with the LMDB adapter's exact semantics:
//  - metadata / values filters: domain/lifecycle.ts matchesFilter (a scalar or list is deep
//    equality, an object a subset match of a nested object, null never matches);
//  - auth filters: auth/filter.ts matchesAuthFilter ({k: v}, {$eq}, {$contains});
//  - store filters: storage/store.ts matchesFilter ($eq, $ne, $gt, $gte, $lt, $lte, $in, $nin).
// jsonb equality is deep equality of JSON values (numbers by value, object keys in any order), as
// util/deep-equal.ts decides it for parsed JSON. Each condition that implies containment is also
// given as `column @> {...}`, which the GIN index (jsonb_path_ops) answers.
import { jsonbText } from "./json-columns.ts";

/** Numbered parameters of one statement. */
export class Params {
  readonly values: unknown[] = [];

  add(value: unknown): string {
    this.values.push(value);
    return `$${this.values.length}`;
  }

  /** a text parameter (typed: jsonb's -> takes a key or an index) */
  text(value: string): string {
    return `${this.add(value)}::text`;
  }

  /** a JSON value as a jsonb parameter (jsonb spelling) */
  json(value: unknown): string {
    return `${this.add(jsonbText(value))}::jsonb`;
  }
}

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const ARRAY_INDEX = /^(0|[1-9][0-9]{0,8})$/;

/**
 * The member `key` of the jsonb expression `expr` as JavaScript reads `value[key]`: on a list, an
 * index-like key is its element.
 */
function member(expr: string, key: string, p: Params): string {
  const k = p.text(jsonbKey(key));
  if (!ARRAY_INDEX.test(key)) return `(${expr} -> ${k})`;
  return `(CASE WHEN jsonb_typeof(${expr}) = 'array' THEN ${expr} -> ${p.add(Number(key))}::int ELSE ${expr} -> ${k} END)`;
}

/** A key as the jsonb spelling writes it (json-columns.ts). */
export const jsonbKey = (key: string): string => JSON.parse(jsonbText(key)) as string;

/**
 * matchesFilter(filter, value) for a filter object and a jsonb expression `expr` that is never a
 * JSON null or scalar at the top (metadata columns are objects); `contains` collects the
 * top-level conditions the GIN index can answer.
 */
export function metadataFilterSql(expr: string, filter: Record<string, unknown>, p: Params): string {
  // (before any parameter is added: a statement must use every parameter it is given)
  if (Object.values(filter).includes(null)) return "FALSE";
  const parts: string[] = [];
  const contains: Record<string, unknown> = {};
  for (const [key, f] of Object.entries(filter)) {
    if (f === undefined) continue;
    const value = `(${expr} -> ${p.text(jsonbKey(key))})`;
    if (isPlainObject(f)) parts.push(nestedFilterSql(value, f, p));
    else {
      contains[key] = f;
      parts.push(`coalesce(${value} = ${p.json(f)}, FALSE)`);
    }
  }
  if (Object.keys(contains).length > 0) parts.unshift(`${expr} @> ${p.json(contains)}`);
  return parts.length === 0 ? "TRUE" : parts.join(" AND ");
}

/** matchesFilter(filter, value) for any filter value and a jsonb expression (SQL NULL: absent). */
export function valueFilterSql(expr: string, filter: unknown, p: Params): string {
  if (filter === undefined) return "TRUE";
  if (!isPlainObject(filter)) return `coalesce(${expr} = ${p.json(filter)}, FALSE)`;
  return nestedFilterSql(expr, filter, p);
}

/** A nested filter object: the value is an object (or a list: JavaScript indexes it) holding every member. */
function nestedFilterSql(expr: string, filter: Record<string, unknown>, p: Params): string {
  if (Object.values(filter).includes(null)) return "FALSE";
  const parts = [`coalesce(jsonb_typeof(${expr}) IN ('object', 'array'), FALSE)`];
  for (const [key, f] of Object.entries(filter)) {
    if (f === undefined) continue;
    parts.push(isPlainObject(f) ? nestedFilterSql(member(expr, key, p), f, p) : `coalesce(${member(expr, key, p)} = ${p.json(f)}, FALSE)`);
  }
  return `(${parts.join(" AND ")})`;
}

/** matchesAuthFilter(filter, metadata) for a metadata jsonb expression. */
export function authFilterSql(expr: string, filter: Record<string, unknown>, p: Params): string {
  const parts: string[] = [];
  for (const [key, cond] of Object.entries(filter)) {
    const actual = `(${expr} -> ${p.text(jsonbKey(key))})`;
    if (!isPlainObject(cond)) {
      parts.push(equalsSql(actual, cond, p));
      continue;
    }
    const hasEq = Object.hasOwn(cond, "$eq");
    const hasContains = Object.hasOwn(cond, "$contains");
    if (!hasEq && !hasContains) {
      parts.push(equalsSql(actual, cond, p));
      continue;
    }
    if (hasEq) parts.push(equalsSql(actual, cond.$eq, p));
    if (hasContains) {
      const wanted = Array.isArray(cond.$contains) ? cond.$contains : [cond.$contains];
      parts.push(`coalesce(jsonb_typeof(${actual}) = 'array', FALSE)`);
      for (const w of wanted) parts.push(`EXISTS (SELECT 1 FROM jsonb_array_elements(${actual}) e WHERE e = ${p.json(w)})`);
    }
  }
  return parts.length === 0 ? "TRUE" : parts.join(" AND ");
}

/** deepEqual(actual, v): an absent member (SQL NULL) equals nothing (undefined is not JSON). */
function equalsSql(actual: string, v: unknown, p: Params): string {
  if (v === undefined) return `${actual} IS NULL`;
  return `coalesce(${actual} = ${p.json(v)}, FALSE)`;
}

const STORE_OPERATORS = new Set(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin"]);

function isOperatorObject(v: unknown): v is Record<string, unknown> {
  if (!isPlainObject(v)) return false;
  const keys = Object.keys(v);
  return keys.length > 0 && keys.every((k) => STORE_OPERATORS.has(k));
}

const COMPARISONS: Record<string, string> = { $gt: ">", $gte: ">=", $lt: "<", $lte: "<=" };

/** store.ts matchesFilter(value, filter) for the store's `fields` jsonb column. */
export function storeFilterSql(expr: string, filter: Record<string, unknown>, p: Params): string {
  const parts: string[] = [];
  const contains: Record<string, unknown> = {};
  for (const [field, cond] of Object.entries(filter)) {
    // added when first used: a statement must use every parameter it is given
    let key: string | undefined;
    const fieldValue = (): string => `(${expr} -> ${(key ??= p.text(jsonbKey(field)))})`;
    if (!isOperatorObject(cond)) {
      if (cond !== undefined) contains[field] = cond;
      parts.push(equalsSql(fieldValue(), cond, p));
      continue;
    }
    for (const [op, expected] of Object.entries(cond)) {
      switch (op) {
        case "$eq":
          if (expected !== undefined) contains[field] = expected;
          parts.push(equalsSql(fieldValue(), expected, p));
          break;
        case "$ne":
          parts.push(`NOT ${equalsSql(fieldValue(), expected, p)}`);
          break;
        case "$in":
        case "$nin": {
          const any =
            Array.isArray(expected) && expected.length > 0
              ? `coalesce(${fieldValue()} = ANY(${p.add(expected.map((e) => jsonbText(e)))}::jsonb[]), FALSE)`
              : "FALSE";
          parts.push(op === "$in" ? any : `NOT ${any}`);
          break;
        }
        default: {
          // numbers compare as numbers, strings by code point; anything else never compares
          const cmp = COMPARISONS[op];
          if (typeof expected === "number")
            parts.push(`coalesce(jsonb_typeof(${fieldValue()}) = 'number' AND (${fieldValue()})::numeric ${cmp} ${p.add(expected)}::numeric, FALSE)`);
          else if (typeof expected === "string")
            parts.push(
              `coalesce(jsonb_typeof(${fieldValue()}) = 'string' AND (${fieldValue()} #>> '{}') COLLATE "C" ${cmp} ${p.add(JSON.parse(jsonbText(expected)))}::text COLLATE "C", FALSE)`,
            );
          else parts.push("FALSE");
        }
      }
    }
  }
  if (Object.keys(contains).length > 0) parts.unshift(`${expr} @> ${p.json(contains)}`);
  return parts.length === 0 ? "TRUE" : parts.join(" AND ");
}
