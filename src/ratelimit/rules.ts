// The platform rate limits of the spec's "Limits" table, as data for both regions, plus the
// compiled matcher that says which (rule, identity key) pairs a request is counted against.
//
// HOW A REQUEST MATCHING SEVERAL RULES IS COUNTED (see also docs/RATE_LIMITS.md):
//  1. Specific rules (every row except the two "Default" rows and the catch-all) apply when one of
//     their clauses matches (method, if given, and path) AND their identity is present:
//     `api-key` needs a non-empty x-api-key header, `user-ip` a non-empty x-user-id header (with the
//     client IP), `ip` is always present. Several specific rules may apply at once.
//  2. "Default (API key)" applies to a request carrying x-api-key for which NO specific api-key rule
//     applied; "Default (User)" likewise for x-user-id and user-ip rules. The defaults are
//     fallbacks, not extra caps: were they stacked on every request, the 1000/10 default would cap
//     the larger specific rows (2000/10 high throughput, 6000/10 multipart, 5000/60 examples) and
//     those rows could never take effect.
//  3. The IP catch-all (100/60) applies only to a request carrying neither x-api-key nor x-user-id
//     and matching no other IP rule.
//  4. Every applicable rule must admit. A request denied by one rule consumes from none of them:
//     the limiter takes from each bucket in turn and gives the tokens back (an exact inverse) to the
//     ones already taken when a later one denies.
// Matching: method compared case-insensitively; the path without its query string and without one
// trailing "/". "Prefix" paths cover the path and anything below it (`/repos` covers `/repos/a/b`).
// `DELETE /sessions or */trigger` reads as DELETE on /sessions[/...] OR any method on a path ending
// in /trigger (workflow triggers are not deletions). The deployment server's own routes
// (/threads/..., /assistants/...) are covered by the defaults; literal rows such as POST /runs,
// POST /runs/batch and PATCH-containing-/runs match the server's routes of the same shape.
import { TroupeError } from "../errors.ts";
import { CompiledRules } from "./compiled-rules.ts";
import { normalizePath, type PathMatch } from "./path-match.ts";

export { CompiledRules, type CompiledRule } from "./compiled-rules.ts";
export type { PathMatch } from "./path-match.ts";

export type Region = "us" | "eu";
export const REGIONS: readonly Region[] = ["us", "eu"];
export type HttpMethod = "GET" | "HEAD" | "POST" | "PUT" | "PATCH" | "DELETE" | "OPTIONS";
/** `ip`: client IP. `api-key`: x-api-key header. `user-ip`: x-user-id header together with client IP. */
export type IdentityKind = "ip" | "api-key" | "user-ip";
/** `specific`: a table row. `default`: fallback for its identity kind. `catch-all`: unauthenticated IPs. */
export type RuleScope = "specific" | "default" | "catch-all";

export interface RateWindow {
  readonly count: number;
  readonly intervalSeconds: number;
}

/** One alternative of a rule: optional method plus a path condition. A rule matches if any clause does. */
export interface MatchClause {
  readonly method?: HttpMethod;
  readonly path: PathMatch;
}

export interface RateRule {
  readonly id: string;
  readonly category: string;
  readonly scope: RuleScope;
  readonly identity: IdentityKind;
  readonly match: readonly MatchClause[];
  readonly limits: Readonly<Record<Region, RateWindow>>;
}

const ANY: readonly MatchClause[] = [{ path: { kind: "any" } }];
const w = (count: number, intervalSeconds: number): RateWindow => ({ count, intervalSeconds });
const same = (count: number, intervalSeconds: number): Record<Region, RateWindow> => ({ us: w(count, intervalSeconds), eu: w(count, intervalSeconds) });
const exact = (path: string): PathMatch => ({ kind: "exact", path });
const prefix = (path: string): PathMatch => ({ kind: "prefix", path });
const contains = (text: string): PathMatch => ({ kind: "contains", text });
const suffix = (text: string): PathMatch => ({ kind: "suffix", text });

function pair(
  idBase: string,
  category: string,
  match: readonly MatchClause[],
  apiKey: Record<Region, RateWindow>,
  user: Record<Region, RateWindow>,
): RateRule[] {
  return [
    { id: `${idBase}.api-key`, category, scope: "specific", identity: "api-key", match, limits: apiKey },
    { id: `${idBase}.user-ip`, category, scope: "specific", identity: "user-ip", match, limits: user },
  ];
}

/** The spec's Limits table, row for row (rows naming two identity keys become two rules). */
export const RATE_RULES: readonly RateRule[] = Object.freeze([
  {
    id: "high-throughput.ip",
    category: "High throughput",
    scope: "specific",
    identity: "ip",
    match: [{ method: "OPTIONS", path: { kind: "any" } }, { path: exact("/info") }, { path: suffix("/v1/metadata/submit") }],
    limits: same(2000, 10),
  },
  ...pair("auth", "High throughput", [{ path: prefix("/auth") }], same(2000, 10), same(2000, 10)),
  { id: "beacon.ip", category: "High throughput", scope: "specific", identity: "ip", match: [{ path: prefix("/v1/beacon") }], limits: same(2000, 10) },
  ...pair("repos", "Repository", [{ path: prefix("/repos") }], same(100, 60), same(100, 60)),
  {
    id: "runs-batch.api-key",
    category: "High throughput",
    scope: "specific",
    identity: "api-key",
    match: [{ method: "POST", path: exact("/runs/batch") }],
    limits: same(2000, 10),
  },
  {
    id: "otel-traces.api-key",
    category: "Run ingest",
    scope: "specific",
    identity: "api-key",
    match: [{ method: "POST", path: exact("/otel/v1/traces") }],
    limits: same(2000, 10),
  },
  ...pair("charts", "Charts", [{ method: "POST", path: contains("/charts") }], same(750, 600), same(750, 600)),
  {
    id: "runs-multipart.api-key",
    category: "Multipart ingest",
    scope: "specific",
    identity: "api-key",
    match: [{ method: "POST", path: exact("/runs/multipart") }],
    limits: same(6000, 10),
  },
  {
    id: "runs-query.api-key",
    category: "Run query (API)",
    scope: "specific",
    identity: "api-key",
    match: [{ method: "POST", path: exact("/runs/query") }],
    limits: same(15, 10),
  },
  {
    id: "runs-query.user-ip",
    category: "Run query (User)",
    scope: "specific",
    identity: "user-ip",
    match: [{ method: "POST", path: exact("/runs/query") }],
    limits: same(300, 10),
  },
  ...pair("generate", "Generation", [{ path: prefix("/generate") }], same(30, 3600), same(30, 3600)),
  ...pair("commits", "Commits", [{ path: prefix("/commits") }], { us: w(10000, 60), eu: w(2000, 60) }, { us: w(10000, 60), eu: w(2000, 60) }),
  ...pair("deletion", "Deletion", [{ method: "DELETE", path: prefix("/sessions") }, { path: suffix("/trigger") }], same(10, 60), same(30, 60)),
  {
    id: "runs-ingest.api-key",
    category: "Run ingest",
    scope: "specific",
    identity: "api-key",
    match: [{ method: "POST", path: exact("/runs") }],
    limits: same(2000, 10),
  },
  {
    id: "runs-patch.api-key",
    category: "Run ingest",
    scope: "specific",
    identity: "api-key",
    match: [{ method: "PATCH", path: contains("/runs") }],
    limits: same(2000, 10),
  },
  {
    id: "feedback.api-key",
    category: "High throughput",
    scope: "specific",
    identity: "api-key",
    match: [{ method: "POST", path: exact("/feedback") }],
    limits: same(2000, 10),
  },
  {
    id: "run-lookup.api-key",
    category: "Run lookup",
    scope: "specific",
    identity: "api-key",
    match: [
      { method: "GET", path: { kind: "uuid-child", prefix: "/runs" } },
      { method: "GET", path: { kind: "uuid-child", prefix: "/api/v1/runs" } },
    ],
    limits: same(30, 60),
  },
  {
    id: "examples.api-key",
    category: "Examples",
    scope: "specific",
    identity: "api-key",
    match: [{ method: "GET", path: contains("/examples") }],
    limits: same(5000, 60),
  },
  { id: "default.api-key", category: "Default (API key)", scope: "default", identity: "api-key", match: ANY, limits: same(1000, 10) },
  { id: "default.user-ip", category: "Default (User)", scope: "default", identity: "user-ip", match: ANY, limits: same(1000, 10) },
  {
    id: "public-download.ip",
    category: "Public download",
    scope: "specific",
    identity: "ip",
    match: [{ path: prefix("/public/download") }],
    limits: same(5000, 60),
  },
  {
    id: "runs-stats.api-key",
    category: "Stats",
    scope: "specific",
    identity: "api-key",
    match: [{ path: prefix("/runs/stats") }],
    limits: { us: w(1, 10), eu: w(20, 10) },
  },
  { id: "catch-all.ip", category: "Public (catch-all)", scope: "catch-all", identity: "ip", match: ANY, limits: same(100, 60) },
] satisfies RateRule[]);

/** Parses a `--region` value; throws VALIDATION naming the option. */
export function parseRegion(value: string, option = "region"): Region {
  const v = value.trim().toLowerCase();
  if (v === "us" || v === "eu") return v;
  throw new TroupeError("VALIDATION", `${option} must be "us" or "eu", got ${JSON.stringify(value)}`);
}

/** Lower-case header names, as Node and our uWS layer provide them. */
export type RequestHeaders = Readonly<Record<string, string | readonly string[] | undefined>>;

/** First value of a header, or undefined when absent or empty. */
export function headerValue(headers: RequestHeaders, name: string): string | undefined {
  const v = headers[name];
  const s = typeof v === "string" ? v : v?.[0];
  return s ? s : undefined;
}

/** The identity key string a rule counts a request under (for diagnostics; the limiter hashes the parts). */
export function identityKey(kind: IdentityKind, apiKey: string | undefined, userId: string | undefined, clientIp: string): string {
  if (kind === "api-key") return apiKey ?? "";
  if (kind === "user-ip") return `${userId ?? ""}|${clientIp}`;
  return clientIp;
}

const compiledDefaults = new Map<Region, CompiledRules>();

/** The spec table compiled for `region` (cached). */
export function defaultCompiledRules(region: Region): CompiledRules {
  let c = compiledDefaults.get(region);
  if (!c) compiledDefaults.set(region, (c = new CompiledRules(RATE_RULES, region)));
  return c;
}

export interface RuleMatch {
  rule: RateRule;
  /** Rule's limit in the region asked for. */
  window: RateWindow;
  identityKey: string;
}

/** Which rules, under which identity keys, a request is counted against (see the policy above). */
export function matchRules(
  method: string,
  path: string,
  headers: RequestHeaders,
  region: Region,
  clientIp = "unknown",
  rules?: readonly RateRule[],
): RuleMatch[] {
  const compiled = rules ? new CompiledRules(rules, region) : defaultCompiledRules(region);
  const apiKey = headerValue(headers, "x-api-key");
  const userId = headerValue(headers, "x-user-id");
  const out = new Int32Array(compiled.rules.length);
  const n = compiled.collect(method, normalizePath(path), apiKey !== undefined, userId !== undefined, out);
  const result: RuleMatch[] = [];
  for (let i = 0; i < n; i++) {
    const { rule } = compiled.rules[out[i]];
    result.push({ rule, window: rule.limits[region], identityKey: identityKey(rule.identity, apiKey, userId, clientIp) });
  }
  return result;
}
