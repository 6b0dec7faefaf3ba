// Path conditions of the rate-limit table, as data plus a compiler to plain string predicates,
// indexed by first path segment, so matching a request costs a few string comparisons, no regexes.

/** How a rule names the paths it covers. Paths are compared without query string or trailing "/". */
export type PathMatch =
  /** Every path. */
  | { readonly kind: "any" }
  /** `path` exactly, e.g. `/info`, `/runs/query`. */
  | { readonly kind: "exact"; readonly path: string }
  /** `path` itself or anything below it (`/repos`, `/repos/x/y`), but not `/reposx`. */
  | { readonly kind: "prefix"; readonly path: string }
  /** Any path containing `text`, e.g. "path containing /charts". */
  | { readonly kind: "contains"; readonly text: string }
  /** Glob `*` + `text`: any path ending in `text`, e.g. `*\/v1/metadata/submit`, `*\/trigger`. */
  | { readonly kind: "suffix"; readonly text: string }
  /** `prefix` + "/" + a canonical UUID (8-4-4-4-12 hex) and nothing more, e.g. `/runs/{uuid}`. */
  | { readonly kind: "uuid-child"; readonly prefix: string };

function isHex(c: number): boolean {
  return (c >= 48 && c <= 57) || (c >= 97 && c <= 102) || (c >= 65 && c <= 70);
}

/** True when `s` holds a canonical UUID starting at `from` and ending the string. */
export function isUuidAt(s: string, from: number): boolean {
  if (s.length - from !== 36) return false;
  for (let i = 0; i < 36; i++) {
    const c = s.charCodeAt(from + i);
    if (i === 8 || i === 13 || i === 18 || i === 23) {
      if (c !== 45) return false;
    } else if (!isHex(c)) return false;
  }
  return true;
}

const KIND_CODE = { any: 0, exact: 1, prefix: 2, contains: 3, suffix: 4, "uuid-child": 5 } as const;

/**
 * Clauses compiled to parallel arrays tested by one monomorphic switch (closures per clause make the
 * call site megamorphic, which cost ~4x in measurements). `rules[i]` is the rule owning clause i.
 */
export class ClauseList {
  readonly rules: number[] = [];
  readonly kinds: number[] = [];
  readonly texts: string[] = [];

  add(rule: number, m: PathMatch): void {
    this.rules.push(rule);
    this.kinds.push(KIND_CODE[m.kind]);
    this.texts.push(m.kind === "exact" || m.kind === "prefix" ? m.path : m.kind === "uuid-child" ? m.prefix + "/" : m.kind === "any" ? "" : m.text);
  }

  test(i: number, path: string): boolean {
    const t = this.texts[i];
    switch (this.kinds[i]) {
      case 0:
        return true;
      case 1:
        return path === t;
      case 2:
        return path.startsWith(t) && (path.length === t.length || path.charCodeAt(t.length) === 47);
      case 3:
        return path.includes(t);
      case 4:
        return path.endsWith(t);
      default:
        return path.startsWith(t) && isUuidAt(path, t.length);
    }
  }
}

/** Clauses whose paths start with "/" + the same character share one bucket of this index. */
export const ANCHOR_CODES = 128;

/**
 * The character after the leading "/" that every matching path must have, for conditions pinned
 * to the start of the path (exact, prefix, uuid-child); -1 when the condition can match anywhere.
 * Indexing by it needs no allocation per request (unlike slicing out the first segment).
 */
export function anchorOf(m: PathMatch): number {
  const p = m.kind === "exact" || m.kind === "prefix" ? m.path : m.kind === "uuid-child" ? m.prefix + "/" : "";
  if (p.length < 2 || p.charCodeAt(0) !== 47) return -1;
  const c = p.charCodeAt(1);
  return c < ANCHOR_CODES ? c : -1;
}

/** Strips the query string and one trailing slash; allocates only when there is something to strip. */
export function normalizePath(path: string): string {
  const q = path.indexOf("?");
  if (q >= 0) path = path.slice(0, q);
  if (path.length > 1 && path.charCodeAt(path.length - 1) === 47) path = path.slice(0, -1);
  return path;
}
