// How JSON values go into the record tables' columns (schema-records.ts).
//  - `json` columns take JSON.stringify text as it is: exact, key order kept, NUL allowed.
//  - `jsonb` copies (metadata, store fields), used only by filters, cannot hold a NUL character:
//    every string (and object key) is spelled with NUL as U+E000 U+0001 and U+E000 as U+E000 U+E000.
//    The spelling is one-to-one, so equality (what metadata filters test) is unchanged; filter
//    values are spelled the same way before they are compared (filter-sql.ts).
//  - Neither takes an unpaired UTF-16 surrogate (PostgreSQL refuses the whole text: "invalid input
//    syntax for type json"); such a surrogate is stored as U+FFFD, as a UTF-8 encoder writes it.

const ESCAPE = "\uE000";
const NEEDS_SPELLING = /[\u0000\uE000]/;

/** JSON text for a `jsonb` column or parameter. */
export function jsonbText(value: unknown): string {
  const text = JSON.stringify(value) ?? "null";
  // JSON.stringify writes NUL as the escape \u0000, U+E000 as itself, an unpaired surrogate as \udXXX
  return text.includes("\\u0000") || text.includes(ESCAPE) || text.includes("\\ud") ? JSON.stringify(jsonbSpelling(value)) : text;
}

/** The value with every string and key spelled for jsonb (a copy where something changes). */
export const jsonbSpelling = (value: unknown): unknown => mapStrings(value, spell);

/** `value` with `f` applied to every string and object key (a copy; undefined members dropped, as JSON drops them). */
function mapStrings(value: unknown, f: (s: string) => string): unknown {
  if (typeof value === "string") return f(value);
  if (Array.isArray(value)) return value.map((v) => mapStrings(v, f));
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) if (v !== undefined) out[f(k)] = mapStrings(v, f);
    return out;
  }
  return value;
}

function spell(s: string): string {
  const whole = wellFormed(s);
  return NEEDS_SPELLING.test(whole) ? whole.replace(/[\u0000\uE000]/g, (c) => (c === "\u0000" ? "\uE000\u0001" : "\uE000\uE000")) : whole;
}

const UNPAIRED_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

const wellFormed = (s: string): string => s.replace(UNPAIRED_SURROGATE, "\uFFFD");

/** JSON text for a `json` column. */
export function jsonText(value: unknown): string {
  const text = JSON.stringify(value) ?? "null";
  // JSON.stringify writes only unpaired surrogates as \udXXX escapes (a pair is written as itself)
  return text.includes("\\ud") ? JSON.stringify(mapStrings(value, wellFormed)) : text;
}
