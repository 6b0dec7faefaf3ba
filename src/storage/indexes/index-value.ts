// How a JSON value is spelled inside an index key, so that an index lookup finds exactly the
// records an equality filter accepts (util/deep-equal.ts): two values get the same spelling if and
// only if they are deep-equal. Type-tagged ("1" and 1 differ), numbers by value (1 and 1.0, 0 and -0
// are equal), arrays and objects as JSON with object keys sorted (deepEqual ignores key order).
// Long spellings are replaced by a SHA-256 digest ("#…", which no other spelling starts with): LMDB
// keys are at most 1978 bytes, and ids and filter values come from requests.
import { createHash } from "node:crypto";

/** Longest spelling (UTF-16 units) kept as it is; longer ones become a digest. */
export const MAX_SPELLING = 200;

/**
 * The index spelling of `v`, or undefined when `v` is not indexed: plain objects unless
 * `objects` (thread metadata filters match nested objects as subsets, not by equality), and
 * anything that is not JSON.
 */
export function indexValue(v: unknown, objects = false): string | undefined {
  let s: string | undefined;
  switch (typeof v) {
    case "string":
      s = "s" + v;
      break;
    case "number":
      if (!Number.isFinite(v)) return undefined;
      s = "n" + (v === 0 ? "0" : String(v));
      break;
    case "boolean":
      return v ? "t" : "f";
    case "object":
      if (v === null) return "z";
      if (!Array.isArray(v) && !objects) return undefined;
      s = (Array.isArray(v) ? "a" : "o") + canonicalJson(v);
      break;
    default:
      return undefined;
  }
  return s.length > MAX_SPELLING ? digest(s) : s;
}

/**
 * A name or id (metadata key, store field, graph/assistant/thread id) as an index key part:
 * tagged like the values, so no name can spell another's digest; long ones become a digest.
 */
export function indexName(name: string): string {
  return name.length > MAX_SPELLING ? digest("k" + name) : "k" + name;
}

function digest(s: string): string {
  return "#" + createHash("sha256").update(s).digest("base64");
}

/** JSON with object keys sorted at every level; numbers as JSON writes them (-0 as 0). */
export function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(",")}]`;
  if (v !== null && typeof v === "object") {
    const o = v as Record<string, unknown>;
    const keys = Object.keys(o)
      .filter((k) => o[k] !== undefined)
      .sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`).join(",")}}`;
  }
  return JSON.stringify(v) ?? "null";
}
