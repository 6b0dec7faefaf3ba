// Platform rate limiter: exact shared buckets across real worker threads, GCRA refill, the spec's
// rule table in both regions, all-or-nothing multi-rule counting, and safe eviction.
import { TrustedProxies } from "../../src/ratelimit/client-ip.ts";
import { Worker } from "node:worker_threads";
import { attachBucketTable, bucketSpec, createBucketTable, newTakeResult } from "../../src/ratelimit/bucket-table.ts";
import { keyOf } from "../../src/ratelimit/key-hash.ts";
import { RateLimiter, rateLimitError, rateLimitHeaders } from "../../src/ratelimit/limiter.ts";
import { RATE_RULES, matchRules, parseRegion, type RateRule, type Region } from "../../src/ratelimit/rules.ts";
import type { HammerJob } from "../fixtures/ratelimit-worker.ts";

const WORKER = new URL("../fixtures/ratelimit-worker.boot.mjs", import.meta.url);
const T0 = Date.now() + 3_600_000; // one instant for the whole file; tables count time from their creation

interface Done {
  admitted: number;
  churnFull?: number;
}

/** Starts one worker per job, releases them together, and collects their results. */
async function runWorkers(jobs: HammerJob[], start: Int32Array): Promise<Done[]> {
  const workers = jobs.map((job) => new Worker(WORKER, { workerData: job }));
  try {
    let ready = 0;
    const results = workers.map(
      (w) =>
        new Promise<Done>((resolve, reject) => {
          w.on("error", reject);
          w.on("exit", (code) => reject(new Error(`worker exited with ${code} before answering`)));
          w.on("message", (msg: { type: string } & Done) => {
            if (msg.type === "done") resolve(msg);
            else if (msg.type === "ready" && ++ready === workers.length) {
              Atomics.store(start, 0, 1);
              Atomics.notify(start, 0);
            }
          });
        }),
    );
    return await Promise.all(results);
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
}

const rule = (id: string, identity: RateRule["identity"], path: RateRule["match"][number]["path"], count: number, intervalSeconds: number): RateRule => ({
  id,
  category: "test",
  scope: "specific",
  identity,
  match: [{ path }],
  limits: { us: { count, intervalSeconds }, eu: { count, intervalSeconds } },
});

function ids(method: string, path: string, headers: Record<string, string>, region: Region = "us"): string[] {
  return matchRules(method, path, headers, region, "203.0.113.7").map((m) => m.rule.id);
}

describe("shared bucket table across worker threads", () => {
  it("admits exactly the capacity of one bucket hammered by 4 threads", async () => {
    const rules = [rule("hammer", "ip", { kind: "any" }, 20_000, 3600)];
    const main = new RateLimiter({ rules, tableOptions: { slots: 1024 } });
    const start = new Int32Array(new SharedArrayBuffer(4));
    const jobs: HammerJob[] = [0, 1, 2, 3].map((id) => ({
      type: "check",
      id,
      sab: main.buffer,
      start,
      rules,
      attempts: 8000,
      nowMs: T0,
      path: "/anything",
      headers: {},
      ip: "198.51.100.1",
    }));
    const done = await runWorkers(jobs, start);
    const total = done.reduce((s, d) => s + d.admitted, 0);
    expect(total).toBe(20_000);
    expect(done.filter((d) => d.admitted > 0).length).toBeGreaterThan(1); // threads really raced
    const after = main.check("GET", "/anything", {}, "198.51.100.1", T0);
    expect(after).toMatchObject({ allowed: false, ruleId: "hammer", remaining: 0, reason: "limit" });
  });

  it("a request denied by one rule consumes nothing from the others, under contention", async () => {
    // /x/both matches wide (api key, 10000) and narrow (IP, 4000); /x/only matches wide alone.
    const rules = [rule("wide", "api-key", { kind: "prefix", path: "/x" }, 10_000, 3600), rule("narrow", "ip", { kind: "exact", path: "/x/both" }, 4000, 3600)];
    const main = new RateLimiter({ rules, tableOptions: { slots: 1024 } });
    const start = new Int32Array(new SharedArrayBuffer(4));
    const headers = { "x-api-key": "k1" };
    const jobs: HammerJob[] = [0, 1, 2, 3].map((id) => ({
      type: "check",
      id,
      sab: main.buffer,
      start,
      rules,
      attempts: 2500,
      nowMs: T0,
      path: "/x/both",
      headers,
      ip: "198.51.100.2",
    }));
    const done = await runWorkers(jobs, start);
    expect(done.reduce((s, d) => s + d.admitted, 0)).toBe(4000);
    // Exactly 4000 tokens left the wide bucket: 6000 more requests on /x/only pass, the next one fails.
    let more = 0;
    while (main.check("GET", "/x/only", headers, "198.51.100.2", T0).allowed) more++;
    expect(more).toBe(6000);
  });

  it("eviction churn by 2 threads on a tiny table never resets an active key", async () => {
    const table = createBucketTable({ slots: 64, maxProbe: 64 });
    const out = newTakeResult();
    expect(table.consume(keyOf("active", "x"), bucketSpec(1000, 1_000_000), T0, out).outcome).toBe("admitted");
    const start = new Int32Array(new SharedArrayBuffer(4));
    const jobs: HammerJob[] = [0, 1].map((id) => ({ type: "churn", id, sab: table.buffer, start, attempts: 1500, baseMs: T0 }));
    const done = await runWorkers(jobs, start);
    expect(done.reduce((s, d) => s + d.admitted, 0)).toBe(999);
    expect(table.stats().evictions).toBeGreaterThan(100);
  });
});

describe("token bucket refill (explicit clock)", () => {
  const rules = [rule("ten", "ip", { kind: "any" }, 10, 10)]; // one token per second
  const ip = "192.0.2.1";

  it("drains, reports headers, and refills at count/interval", () => {
    const l = new RateLimiter({ rules, tableOptions: { slots: 64 } });
    const first = l.check("GET", "/", {}, ip, T0);
    expect(first).toEqual({ allowed: true, limit: 10, remaining: 9, resetSeconds: 1, ruleId: "ten" });
    for (let i = 8; i >= 0; i--) expect(l.check("GET", "/", {}, ip, T0).remaining).toBe(i);
    const denied = l.check("GET", "/", {}, ip, T0);
    expect(denied).toEqual({ allowed: false, limit: 10, remaining: 0, resetSeconds: 10, retryAfterSeconds: 1, ruleId: "ten", reason: "limit" });
    expect(rateLimitHeaders(denied)).toEqual({ "x-ratelimit-limit": "10", "x-ratelimit-remaining": "0", "x-ratelimit-reset": "10", "retry-after": "1" });
    expect(rateLimitError(denied).code).toBe("RATE_LIMITED");

    expect(l.check("GET", "/", {}, ip, T0 + 999).allowed).toBe(false);
    expect(l.check("GET", "/", {}, ip, T0 + 1000)).toMatchObject({ allowed: true, remaining: 0, resetSeconds: 10 });
    expect(l.check("GET", "/", {}, ip, T0 + 1000).allowed).toBe(false);

    // 5.5 s later: 5 whole tokens.
    let n = 0;
    while (l.check("GET", "/", {}, ip, T0 + 6500).allowed) n++;
    expect(n).toBe(5);
    // Long idle: full again, but never above capacity.
    n = 0;
    while (l.check("GET", "/", {}, ip, T0 + 600_000).allowed) n++;
    expect(n).toBe(10);
  });

  it("a denied request does not use up a token", () => {
    const l = new RateLimiter({ rules, tableOptions: { slots: 64 } });
    for (let i = 0; i < 10; i++) l.check("GET", "/", {}, ip, T0);
    for (let i = 0; i < 50; i++) expect(l.check("GET", "/", {}, ip, T0 + 500).allowed).toBe(false);
    expect(l.check("GET", "/", {}, ip, T0 + 1000).allowed).toBe(true);
  });

  it("/runs/stats is 1/10 in the US and 20/10 in the EU", () => {
    const h = { "x-api-key": "stats-key" };
    const us = new RateLimiter({ region: "us", tableOptions: { slots: 256 } });
    expect(us.check("GET", "/runs/stats", h, ip, T0)).toMatchObject({ allowed: true, limit: 1, remaining: 0, ruleId: "runs-stats.api-key" });
    expect(us.check("GET", "/runs/stats", h, ip, T0 + 9_999)).toMatchObject({ allowed: false, retryAfterSeconds: 1 });
    expect(us.check("GET", "/runs/stats", h, ip, T0 + 10_000).allowed).toBe(true);
    const eu = new RateLimiter({ region: "eu", tableOptions: { slots: 256 } });
    let n = 0;
    while (eu.check("GET", "/runs/stats", h, ip, T0).allowed) n++;
    expect(n).toBe(20);
  });

  it("POST /runs/query: the api-key rule (15/10) denying leaves the user rule (300/10) untouched", () => {
    const l = new RateLimiter({ tableOptions: { slots: 256 } });
    const both = { "x-api-key": "qk", "x-user-id": "alice" };
    let n = 0;
    while (l.check("POST", "/runs/query", both, ip, T0).allowed) n++;
    expect(n).toBe(15);
    for (let i = 0; i < 20; i++) expect(l.check("POST", "/runs/query", both, ip, T0).ruleId).toBe("runs-query.api-key");
    n = 0;
    while (l.check("POST", "/runs/query", { "x-user-id": "alice" }, ip, T0).allowed) n++;
    expect(n).toBe(300 - 15);
  });

  it("POST /runs/query: the user rule denying gives back the token the api-key rule took", () => {
    const l = new RateLimiter({ tableOptions: { slots: 256 } });
    for (let i = 0; i < 300; i++) expect(l.check("POST", "/runs/query", { "x-user-id": "bob" }, ip, T0).allowed).toBe(true);
    const both = { "x-api-key": "bk", "x-user-id": "bob" };
    for (let i = 0; i < 40; i++) expect(l.check("POST", "/runs/query", both, ip, T0)).toMatchObject({ allowed: false, ruleId: "runs-query.user-ip" });
    let n = 0;
    while (l.check("POST", "/runs/query", { "x-api-key": "bk" }, ip, T0).allowed) n++;
    expect(n).toBe(15);
  });

  it("scale multiplies counts; unauthenticated traffic hits the catch-all", () => {
    const l = new RateLimiter({ scale: 0.1, tableOptions: { slots: 256 } });
    let n = 0;
    while (l.check("GET", "/threads/t1", {}, ip, T0).allowed) n++;
    expect(n).toBe(10); // 100/60 scaled by 0.1
    expect(l.check("GET", "/threads/t1", {}, "192.0.2.2", T0).allowed).toBe(true); // other IP, own bucket
  });
});

describe("spec rule table", () => {
  it("has both regions for every row and unique ids", () => {
    expect(new Set(RATE_RULES.map((r) => r.id)).size).toBe(RATE_RULES.length);
    expect(RATE_RULES).toHaveLength(29);
    for (const r of RATE_RULES) for (const region of ["us", "eu"] as const) expect(r.limits[region].count).toBeGreaterThan(0);
    expect(parseRegion(" EU ")).toBe("eu");
    expect(() => parseRegion("apac")).toThrow(/region/);
  });

  it("region-specific rows: /runs/stats and /commits", () => {
    const win = (region: Region, method: string, path: string, h: Record<string, string>) =>
      matchRules(method, path, h, region, "203.0.113.7").map((m) => [m.rule.id, m.window.count, m.window.intervalSeconds, m.identityKey]);
    expect(win("us", "GET", "/runs/stats", { "x-api-key": "k" })).toEqual([["runs-stats.api-key", 1, 10, "k"]]);
    expect(win("eu", "GET", "/runs/stats", { "x-api-key": "k" })).toEqual([["runs-stats.api-key", 20, 10, "k"]]);
    expect(win("us", "POST", "/commits/acme/prompt", { "x-api-key": "k" })).toEqual([["commits.api-key", 10000, 60, "k"]]);
    expect(win("eu", "GET", "/commits", { "x-user-id": "u" })).toEqual([["commits.user-ip", 2000, 60, "u|203.0.113.7"]]);
  });

  it("identity presence picks specific rules, defaults and the catch-all", () => {
    expect(ids("GET", "/threads/abc", {})).toEqual(["catch-all.ip"]);
    expect(ids("GET", "/threads/abc", { "x-api-key": "k" })).toEqual(["default.api-key"]);
    expect(ids("GET", "/threads/abc", { "x-user-id": "u" })).toEqual(["default.user-ip"]);
    expect(ids("GET", "/threads/abc", { "x-api-key": "k", "x-user-id": "u" })).toEqual(["default.api-key", "default.user-ip"]);
    expect(ids("GET", "/threads/abc", { "x-api-key": "" })).toEqual(["catch-all.ip"]); // empty header = absent
    // An IP rule replaces the catch-all; a key still gets its default next to it.
    expect(ids("GET", "/info", {})).toEqual(["high-throughput.ip"]);
    expect(ids("GET", "/info", { "x-api-key": "k" })).toEqual(["high-throughput.ip", "default.api-key"]);
    expect(ids("OPTIONS", "/threads/abc", {})).toEqual(["high-throughput.ip"]);
    expect(ids("POST", "/a/b/v1/metadata/submit", {})).toEqual(["high-throughput.ip"]);
    expect(ids("GET", "/public/download/f", {})).toEqual(["public-download.ip"]);
  });

  it("method-specific and path-shape rows", () => {
    const k = { "x-api-key": "k" };
    expect(ids("POST", "/runs/query", k)).toEqual(["runs-query.api-key"]);
    expect(ids("post", "/runs/query?limit=5", k)).toEqual(["runs-query.api-key"]); // case, query string
    expect(ids("POST", "/runs/query/", { "x-user-id": "u" })).toEqual(["runs-query.user-ip"]); // trailing slash
    expect(ids("GET", "/runs/query", k)).toEqual(["default.api-key"]);
    expect(ids("POST", "/runs/batch", k)).toEqual(["runs-batch.api-key"]);
    expect(ids("POST", "/runs", k)).toEqual(["runs-ingest.api-key"]);
    expect(ids("PATCH", "/threads/t/runs/r", k)).toEqual(["runs-patch.api-key"]);
    expect(ids("POST", "/runs/multipart", k)).toEqual(["runs-multipart.api-key"]);
    expect(ids("GET", "/runs/0190f0c4-7a4b-7cc1-8a6e-1f2b3c4d5e6f", k)).toEqual(["run-lookup.api-key"]);
    expect(ids("GET", "/api/v1/runs/0190F0C4-7A4B-7CC1-8A6E-1F2B3C4D5E6F", k)).toEqual(["run-lookup.api-key"]);
    expect(ids("GET", "/runs/not-a-uuid", k)).toEqual(["default.api-key"]);
    expect(ids("DELETE", "/runs/0190f0c4-7a4b-7cc1-8a6e-1f2b3c4d5e6f", k)).toEqual(["default.api-key"]);
    expect(ids("DELETE", "/sessions/s1", k)).toEqual(["deletion.api-key"]);
    expect(ids("GET", "/sessions/s1", k)).toEqual(["default.api-key"]);
    expect(ids("POST", "/workflows/w/trigger", { "x-user-id": "u" })).toEqual(["deletion.user-ip"]);
    expect(ids("POST", "/datasets/d/charts", k)).toEqual(["charts.api-key"]);
    expect(ids("GET", "/datasets/d/examples", k)).toEqual(["examples.api-key"]);
    expect(ids("POST", "/datasets/d/examples", k)).toEqual(["default.api-key"]);
    expect(ids("GET", "/repos/acme/p", k)).toEqual(["repos.api-key"]);
    expect(ids("GET", "/reposx", k)).toEqual(["default.api-key"]); // prefix stops at a segment
    expect(ids("POST", "/generate", { "x-user-id": "u" })).toEqual(["generate.user-ip"]);
    expect(ids("POST", "/feedback", k)).toEqual(["feedback.api-key"]);
    expect(ids("POST", "/otel/v1/traces", k)).toEqual(["otel-traces.api-key"]);
    expect(ids("PATCH", "/runs/stats", k).sort()).toEqual(["runs-patch.api-key", "runs-stats.api-key"]); // both apply
  });
});

describe("eviction", () => {
  const spec = bucketSpec(5, 10); // one token per 2 s
  const out = newTakeResult();

  it("reclaims only full buckets; active keys survive; a full table denies new keys", () => {
    const table = createBucketTable({ slots: 16, maxProbe: 16 });
    const key = (i: number) => keyOf("evict", `k${i}`);
    // key0 drained, keys 1..15 take one token each: every slot holds a bucket that is not full.
    for (let i = 0; i < 5; i++) expect(table.consume(key(0), spec, T0, out).outcome).toBe("admitted");
    for (let i = 1; i < 16; i++) expect(table.consume(key(i), spec, T0, out).outcome).toBe("admitted");
    expect(table.stats()).toMatchObject({ used: 16, inserts: 16, evictions: 0 });
    expect(table.consume(key(100), spec, T0, out)).toMatchObject({ outcome: "table-full", retryAfterUs: 2_000_000 });

    // 2 s later keys 1..15 are full again (idle), key0 holds 1 token: only the 15 may be reclaimed.
    const t1 = T0 + 2000;
    for (let i = 100; i < 115; i++) expect(table.consume(key(i), spec, t1, out).outcome).toBe("admitted");
    expect(table.stats().evictions).toBe(15);
    expect(table.consume(key(115), spec, t1, out).outcome).toBe("table-full");
    expect(table.peek(key(0), spec, t1)).toBe(1);
    expect(table.consume(key(0), spec, t1, out)).toMatchObject({ outcome: "admitted", remaining: 0 });
    expect(table.consume(key(0), spec, t1, out).outcome).toBe("denied");

    // An evicted key that returns starts full, exactly as its idle bucket was.
    const t2 = t1 + 10_000;
    expect(table.consume(key(3), spec, t2, out)).toMatchObject({ outcome: "admitted", remaining: 4 });
    expect(table.stats().tableFull).toBe(2);
  });

  it("a shared table is attached by buffer and checks its geometry", () => {
    const table = createBucketTable({ slots: 32 });
    const again = attachBucketTable(table.buffer, { slots: 32 });
    expect(again.consume(keyOf("s", "a"), spec, T0, out).outcome).toBe("admitted");
    expect(table.peek(keyOf("s", "a"), spec, T0)).toBe(4);
    expect(() => attachBucketTable(table.buffer, { slots: 64 })).toThrow(/32 slots/);
    expect(() => attachBucketTable(new SharedArrayBuffer(1024))).toThrow(/magic/);
    expect(() => createBucketTable({ slots: 100 })).toThrow(/power of two/);
  });
});

describe("TrustedProxies (X-Forwarded-For)", () => {
  const proxies = TrustedProxies.parse("10.0.0.0/8, 192.0.2.7, fd00::/8");
  it("names the right-most hop that is not a trusted proxy, and only when the peer is one", () => {
    expect(proxies.clientIp("10.1.2.3", "198.51.100.1")).toBe("198.51.100.1");
    expect(proxies.clientIp("10.1.2.3", "6.6.6.6, 198.51.100.1, 10.9.9.9")).toBe("198.51.100.1"); // spoofed left part ignored
    expect(proxies.clientIp("::ffff:10.1.2.3", "198.51.100.1")).toBe("198.51.100.1"); // IPv4-mapped peer
    expect(proxies.clientIp("fd00::1", "2001:db8::5")).toBe("2001:db8::5");
    expect(proxies.clientIp("192.0.2.7", "10.0.0.1, 10.0.0.2")).toBe("10.0.0.1"); // all trusted: the left-most
    expect(proxies.clientIp("198.51.100.9", "1.2.3.4")).toBe("198.51.100.9"); // untrusted peer: header ignored
    expect(proxies.clientIp("10.1.2.3", undefined)).toBe("10.1.2.3");
  });
  it("refuses malformed entries", () => {
    for (const bad of ["10.0.0.0/33", "nope", "10.0.0.0/8/1", "fd00::/129", "10.0.0.0/x"])
      expect(() => TrustedProxies.parse(bad), bad).toThrow(/not an IP address or CIDR/);
  });
});
