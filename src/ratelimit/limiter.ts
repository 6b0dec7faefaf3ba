// RateLimiter: the one call the HTTP layer makes per request. Finds the applicable rules, takes a
// token from each rule's shared bucket (all-or-nothing) and returns the X-RateLimit-* values.
//
// Header meanings (see docs/RATE_LIMITS.md): the reported bucket is the most constraining one —
// on allow, the applicable rule with the fewest tokens left (ties: the one slowest to refill); on
// deny, the rule that denied. Limit = its count; Remaining = whole tokens left after this request;
// Reset = seconds (rounded up) until that bucket is completely full again; Retry-After (deny only)
// = seconds (rounded up, >= 1) until that bucket holds one token again.
import { TroupeError } from "../errors.ts";
import { createBucketTable, newTakeResult, type BucketTable, type BucketTableOptions, type TakeResult } from "./bucket-table.ts";
import { combineKey, hashLanes, type KeyHash, type Lanes } from "./key-hash.ts";
import { normalizePath } from "./path-match.ts";
import { CompiledRules } from "./compiled-rules.ts";
import { RATE_RULES, headerValue, type RateRule, type Region, type RequestHeaders } from "./rules.ts";

export interface RateLimiterOptions {
  /** Regional limits to enforce (default "us"). */
  region?: Region;
  /** Rule table (default: the spec table, RATE_RULES). */
  rules?: readonly RateRule[];
  /** Multiplies every count (rounded, at least 1); for tests and local development. Default 1. */
  scale?: number;
  /** Shared table to count in, e.g. attachBucketTable(sab) in a worker. Default: a new table. */
  table?: BucketTable;
  /** Options for the new table when `table` is not given. */
  tableOptions?: BucketTableOptions;
}

export interface RateLimitResult {
  allowed: boolean;
  /** Count of the reported rule (0 when no rule applies: then send no rate-limit headers). */
  limit: number;
  remaining: number;
  resetSeconds: number;
  /** Present when denied. */
  retryAfterSeconds?: number;
  /** The reported rule; absent when no rule applies. */
  ruleId?: string;
  /** Why a request was denied: its bucket is empty, or the table had no slot for a new key. */
  reason?: "limit" | "table-full";
}

/** Returns `rules` with every count multiplied by `factor` (rounded, at least 1). */
export function scaleRules(rules: readonly RateRule[], factor: number): RateRule[] {
  if (!(factor > 0) || !Number.isFinite(factor)) throw new TroupeError("VALIDATION", `rate limit scale must be a positive number, got ${factor}`);
  return rules.map((r) => ({
    ...r,
    limits: {
      us: { ...r.limits.us, count: Math.max(1, Math.round(r.limits.us.count * factor)) },
      eu: { ...r.limits.eu, count: Math.max(1, Math.round(r.limits.eu.count * factor)) },
    },
  }));
}

const UNLIMITED: RateLimitResult = Object.freeze({ allowed: true, limit: 0, remaining: 0, resetSeconds: 0 });

export class RateLimiter {
  readonly region: Region;
  readonly table: BucketTable;
  readonly compiled: CompiledRules;
  // Per-request scratch, allocated once (check() is synchronous, so never shared between calls).
  private readonly idx: Int32Array;
  private readonly slots: Int32Array;
  private readonly gens: Int32Array;
  private readonly keys: KeyHash[];
  private readonly take: TakeResult = newTakeResult();
  private readonly refundScratch = { slot: -1, gen: 0 };
  private readonly ipLanes: Lanes = { a: 0, b: 0 };
  private readonly apiKeyLanes: Lanes = { a: 0, b: 0 };
  private readonly userLanes: Lanes = { a: 0, b: 0 };

  constructor(opts: RateLimiterOptions = {}) {
    this.region = opts.region ?? "us";
    const base = opts.rules ?? RATE_RULES;
    const rules = opts.scale === undefined || opts.scale === 1 ? base : scaleRules(base, opts.scale);
    this.compiled = new CompiledRules(rules, this.region);
    this.table = opts.table ?? createBucketTable(opts.tableOptions);
    const n = this.compiled.rules.length;
    this.idx = new Int32Array(n);
    this.slots = new Int32Array(n);
    this.gens = new Int32Array(n);
    this.keys = Array.from({ length: n }, () => ({ hi: 0, lo: 0 }));
  }

  /** The SharedArrayBuffer to hand to workers (attachBucketTable + new RateLimiter({ table })). */
  get buffer(): SharedArrayBuffer {
    return this.table.buffer;
  }

  /**
   * Counts one request. `headers` uses lower-case names (x-api-key, x-user-id); `path` may carry a
   * query string. `nowMs` defaults to Date.now() (pass it explicitly in tests). `identified`
   * false: the request's key did not verify, so x-api-key and x-user-id are ignored and it counts
   * as an anonymous request of its IP.
   */
  check(method: string, path: string, headers: RequestHeaders, clientIp: string, nowMs: number = Date.now(), identified = true): RateLimitResult {
    const apiKey = identified ? headerValue(headers, "x-api-key") : undefined;
    const userId = identified ? headerValue(headers, "x-user-id") : undefined;
    const ip = clientIp || "unknown";
    const n = this.compiled.collect(method, normalizePath(path), apiKey !== undefined, userId !== undefined, this.idx);
    if (n === 0) return UNLIMITED;
    let haveIp = false;
    let haveApiKey = false;
    let haveUser = false;
    let best = -1;
    let bestRemaining = Infinity;
    let bestResetUs = -1;
    const take = this.take;
    for (let i = 0; i < n; i++) {
      const cr = this.compiled.rules[this.idx[i]];
      let lanes: Lanes;
      if (cr.identity === "api-key") {
        if (!haveApiKey) {
          hashLanes(apiKey as string, undefined, this.apiKeyLanes, this.table.salt);
          haveApiKey = true;
        }
        lanes = this.apiKeyLanes;
      } else if (cr.identity === "user-ip") {
        if (!haveUser) {
          hashLanes(userId as string, ip, this.userLanes, this.table.salt);
          haveUser = true;
        }
        lanes = this.userLanes;
      } else {
        if (!haveIp) {
          hashLanes(ip, undefined, this.ipLanes, this.table.salt);
          haveIp = true;
        }
        lanes = this.ipLanes;
      }
      const key = combineKey(cr.seed, lanes, this.keys[i]);
      this.table.consume(key, cr.spec, nowMs, take);
      if (take.outcome !== "admitted") {
        this.refundTaken(i, nowMs);
        const tableFull = take.outcome === "table-full";
        const retryAfterSeconds = Math.max(1, Math.ceil(take.retryAfterUs / 1e6));
        return {
          allowed: false,
          limit: cr.spec.count,
          remaining: 0,
          resetSeconds: tableFull ? retryAfterSeconds : Math.ceil(take.resetUs / 1e6),
          retryAfterSeconds,
          ruleId: cr.rule.id,
          reason: tableFull ? "table-full" : "limit",
        };
      }
      this.slots[i] = take.slot;
      this.gens[i] = take.gen;
      if (take.remaining < bestRemaining || (take.remaining === bestRemaining && take.resetUs > bestResetUs)) {
        best = i;
        bestRemaining = take.remaining;
        bestResetUs = take.resetUs;
      }
    }
    const cr = this.compiled.rules[this.idx[best]];
    return { allowed: true, limit: cr.spec.count, remaining: bestRemaining, resetSeconds: Math.ceil(bestResetUs / 1e6), ruleId: cr.rule.id };
  }

  /** Gives back the tokens taken for rules [0, upTo) of the current request. */
  private refundTaken(upTo: number, nowMs: number): void {
    const r = this.refundScratch;
    for (let j = 0; j < upTo; j++) {
      r.slot = this.slots[j];
      r.gen = this.gens[j];
      this.table.refund(this.keys[j], this.compiled.rules[this.idx[j]].spec, nowMs, r);
    }
  }
}

/** Response headers for a result: X-RateLimit-* when a rule applied, plus Retry-After on deny. */
export function rateLimitHeaders(result: RateLimitResult): Record<string, string> {
  if (result.ruleId === undefined) return {};
  const h: Record<string, string> = {
    "x-ratelimit-limit": String(result.limit),
    "x-ratelimit-remaining": String(result.remaining),
    "x-ratelimit-reset": String(result.resetSeconds),
  };
  if (!result.allowed) h["retry-after"] = String(result.retryAfterSeconds ?? 1);
  return h;
}

/** The domain error for a denied request (the HTTP layer maps RATE_LIMITED to 429 and sends `headers`). */
export function rateLimitError(result: RateLimitResult): TroupeError {
  const why = result.reason === "table-full" ? "rate limiter has no room for a new identity" : `rate limit ${result.ruleId} exceeded`;
  return new TroupeError("RATE_LIMITED", why, { headers: rateLimitHeaders(result) });
}
