// A rule list compiled for one region at registration time: clause lists per method indexed by
// the path's first character, bucket specs and hash seeds, so per-request matching is a few compares.
import { TroupeError } from "../errors.ts";
import { bucketSpec, type BucketSpec } from "./bucket-table.ts";
import { hashLanes, type Lanes } from "./key-hash.ts";
import { ANCHOR_CODES, ClauseList, anchorOf, type PathMatch } from "./path-match.ts";
import type { IdentityKind, RateRule, Region, RuleScope } from "./rules.ts";

const METHOD_INDEX: ReadonlyMap<string, number> = new Map(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"].map((m, i) => [m, i]));
const OTHER_METHOD = METHOD_INDEX.size;

function methodIndex(method: string): number {
  return METHOD_INDEX.get(method) ?? METHOD_INDEX.get(method.toUpperCase()) ?? OTHER_METHOD;
}

export interface CompiledRule {
  readonly index: number;
  readonly rule: RateRule;
  readonly identity: IdentityKind;
  readonly scope: RuleScope;
  readonly spec: BucketSpec;
  /** Hash lanes of the rule id, mixed with the identity's lanes to form the bucket key. */
  readonly seed: Lanes;
}

/** A rule list compiled for one region: per-method clause lists and bucket specs, built once. */
export class CompiledRules {
  readonly region: Region;
  readonly rules: readonly CompiledRule[];
  /** Per method index: clauses pinned to the path start, by the character after the leading "/". */
  private readonly anchored: (ClauseList | undefined)[][];
  /** Per method index: clauses that can match under any first segment (contains, suffix, any). */
  private readonly floating: ClauseList[];
  /** seen[rule] === stamp when the rule was already collected for the current request. */
  private readonly seen: Int32Array;
  private stamp = 0;
  private readonly defaultApiKey: number;
  private readonly defaultUser: number;
  private readonly catchAll: number;

  constructor(rules: readonly RateRule[], region: Region) {
    this.region = region;
    const ids = new Set<string>();
    let defaultApiKey = -1;
    let defaultUser = -1;
    let catchAll = -1;
    const anchored = Array.from({ length: OTHER_METHOD + 1 }, () => new Array<ClauseList | undefined>(ANCHOR_CODES).fill(undefined));
    const floating = Array.from({ length: OTHER_METHOD + 1 }, () => new ClauseList());
    const addClause = (m: number, rule: number, path: PathMatch): void => {
      const anchor = anchorOf(path);
      if (anchor < 0) return floating[m].add(rule, path);
      (anchored[m][anchor] ??= new ClauseList()).add(rule, path);
    };
    this.rules = rules.map((rule, index) => {
      if (ids.has(rule.id)) throw new TroupeError("VALIDATION", `rate limit rule id ${rule.id} is listed twice`);
      ids.add(rule.id);
      const window = rule.limits[region];
      if (!window) throw new TroupeError("VALIDATION", `rate limit rule ${rule.id} has no ${region} limit`);
      let spec: BucketSpec;
      try {
        spec = bucketSpec(window.count, window.intervalSeconds);
      } catch (err) {
        throw new TroupeError("VALIDATION", `rate limit rule ${rule.id} (${region}): ${(err as Error).message}`);
      }
      if (rule.scope === "default") {
        if (rule.identity === "ip") throw new TroupeError("VALIDATION", `rate limit rule ${rule.id}: a default rule needs identity api-key or user-ip`);
        const prev = rule.identity === "api-key" ? defaultApiKey : defaultUser;
        if (prev >= 0) throw new TroupeError("VALIDATION", `rate limit rule ${rule.id}: second default rule for ${rule.identity}`);
        if (rule.identity === "api-key") defaultApiKey = index;
        else defaultUser = index;
      } else if (rule.scope === "catch-all") {
        if (rule.identity !== "ip" || catchAll >= 0) throw new TroupeError("VALIDATION", `rate limit rule ${rule.id}: only one catch-all, with identity ip`);
        catchAll = index;
      } else {
        if (rule.match.length === 0) throw new TroupeError("VALIDATION", `rate limit rule ${rule.id} has no match clause`);
        for (const clause of rule.match) {
          if (clause.method) addClause(methodIndex(clause.method), index, clause.path);
          else for (let m = 0; m <= OTHER_METHOD; m++) addClause(m, index, clause.path);
        }
      }
      return { index, rule, identity: rule.identity, scope: rule.scope, spec, seed: hashLanes(rule.id, undefined, { a: 0, b: 0 }) };
    });
    this.anchored = anchored;
    this.floating = floating;
    this.seen = new Int32Array(this.rules.length);
    this.defaultApiKey = defaultApiKey;
    this.defaultUser = defaultUser;
    this.catchAll = catchAll;
  }

  /**
   * Writes the indices of the rules a request is counted against into `out` (length >= rules.length)
   * and returns how many. Order: specific rules, then defaults, then catch-all.
   * `path` must already be normalized (see normalizePath).
   */
  collect(method: string, path: string, hasApiKey: boolean, hasUser: boolean, out: Int32Array): number {
    const m = methodIndex(method);
    if (++this.stamp === 0x7fffffff) {
      this.stamp = 1;
      this.seen.fill(0);
    }
    const stamp = this.stamp;
    const seen = this.seen;
    let n = 0;
    let sawApiKey = false;
    let sawUser = false;
    let sawIp = false;
    const c = path.charCodeAt(1); // NaN for "/" and "": then no anchored list
    for (let pass = 0; pass < 2; pass++) {
      const list = pass === 1 ? this.floating[m] : c < ANCHOR_CODES ? this.anchored[m][c] : undefined;
      if (list === undefined) continue;
      const ruleOf = list.rules;
      for (let i = 0; i < ruleOf.length; i++) {
        const r = ruleOf[i];
        if (seen[r] === stamp || !list.test(i, path)) continue;
        seen[r] = stamp;
        const kind = this.rules[r].identity;
        if (kind === "api-key") {
          if (!hasApiKey) continue;
          sawApiKey = true;
        } else if (kind === "user-ip") {
          if (!hasUser) continue;
          sawUser = true;
        } else sawIp = true;
        out[n++] = r;
      }
    }
    if (hasApiKey && !sawApiKey && this.defaultApiKey >= 0) out[n++] = this.defaultApiKey;
    if (hasUser && !sawUser && this.defaultUser >= 0) out[n++] = this.defaultUser;
    if (!hasApiKey && !hasUser && !sawIp && this.catchAll >= 0) out[n++] = this.catchAll;
    return n;
  }
}
