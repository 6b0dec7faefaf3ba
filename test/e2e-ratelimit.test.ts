// Platform rate limits on a real `troupe serve` with API keys: budget headers on every reply, 429
// with Retry-After and a JSON detail once an identity's bucket is empty; only keys that verify get
// buckets of their own (made-up keys and user ids count against the client's IP), and
// X-Forwarded-For names the client only when the connection comes from a trusted proxy; off unless
// asked for.
import { request } from "node:http";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPO, startTestServer, type TestServer } from "./helpers/server.ts";
import { waitUntil } from "./helpers/wait.ts";
import { startControlPlane } from "../src/control-plane/server.ts";

let cpDir: string;
let server: TestServer;
let key: string;
let otherKey: string;

function createKey(user: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [join(REPO, "bin/troupe.js"), "keys", "create", "--org", "acme", "--user", user, "--data-dir", cpDir, "--json"], {
      cwd: REPO,
    });
    let out = "";
    p.stdout.on("data", (d: Buffer) => (out += d.toString()));
    p.once("error", reject);
    p.once("exit", (code) => (code === 0 ? resolve((JSON.parse(out) as { key: string }).key) : reject(new Error(`troupe keys create exited ${code}`))));
  });
}

beforeAll(async () => {
  cpDir = mkdtempSync(join(tmpdir(), "troupe-ratelimit-keys-"));
  key = await createKey("alice");
  otherKey = await createKey("bob");
  server = await startTestServer({
    command: "serve",
    // 127.0.0.1 is the trusted proxy; test connections from 127.0.0.2 are an untrusted client
    extraArgs: ["--host", "127.0.0.1", "--rate-limit", "eu", "--control-plane-dir", cpDir, "--org", "acme", "--trusted-proxies", "127.0.0.1/32"],
  });
}, 60_000);
afterAll(async () => {
  await server?.stop();
  server?.cleanup();
  if (cpDir) rmSync(cpDir, { recursive: true, force: true });
});

/** One request, optionally from another local address (node:http can bind the client socket). */
function get(
  path: string,
  headers: Record<string, string>,
  localAddress?: string,
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  const url = new URL(path, server.url);
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, path: url.pathname, method: "GET", headers, localAddress }, (res) => {
      let body = "";
      res.on("data", (d: Buffer) => (body += d.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on("error", reject);
    req.end();
  });
}
const ANY_THREAD = "/threads/00000000-0000-4000-8000-000000000000";
/** Requests until the first 429 (at most `max`), each made by `make(i)`; returns how many were let through. */
async function untilLimited(make: (i: number) => Promise<{ status: number }>, max = 200): Promise<number> {
  for (let i = 0; i < max; i++) if ((await make(i)).status === 429) return i;
  return max;
}
/** 100 per 60 s, refilled continuously: the burst gets 100, plus a token per 0.6 s it takes (generous bound). */
const expectOneIpBudget = (passed: number) => {
  expect(passed).toBeGreaterThanOrEqual(100);
  expect(passed).toBeLessThan(130);
};

describe("rate limits", () => {
  it("reports budgets and answers 429 when /runs/stats (EU 20/10 per key) is exhausted", async () => {
    const first = await fetch(`${server.url}/threads/search`, {
      method: "POST",
      headers: { "x-api-key": key, "content-type": "application/json" },
      body: "{}",
    });
    expect(first.status).toBe(200);
    expect(first.headers.get("x-ratelimit-limit")).toBe("1000");
    expect(Number(first.headers.get("x-ratelimit-remaining"))).toBe(999);
    expect(Number(first.headers.get("x-ratelimit-reset"))).toBeGreaterThanOrEqual(0);
    // A burst of 30 concurrent requests on a 20/10 s bucket: 20 are admitted (plus at most one
    // token refilled during the burst on a slow machine), the rest get 429.
    const burst = await Promise.all(Array.from({ length: 30 }, () => fetch(`${server.url}/runs/stats`, { headers: { "x-api-key": key } })));
    const limited = burst.filter((r) => r.status === 429);
    const admitted = burst.length - limited.length;
    expect(admitted).toBeGreaterThanOrEqual(20);
    expect(admitted).toBeLessThanOrEqual(21);
    for (const r of burst.filter((x) => x.status !== 429)) await r.text();
    const last = limited[0];
    expect(Number(last.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(await last.json()).toEqual({ detail: expect.stringContaining("rate limit") });
    for (const r of limited.slice(1)) await r.text();
    // another identity is unaffected
    const other = await fetch(`${server.url}/runs/stats`, { headers: { "x-api-key": otherKey } });
    expect(other.status).not.toBe(429);
    await other.text();
  });

  it("counts made-up keys and user ids against the client IP (100/60), not a fresh bucket each", async () => {
    const client = "198.51.100.7"; // this test's client, as the trusted proxy names it
    const fakeKey = (i: number) => `trp_${String(i).padStart(43, "x")}`;
    expectOneIpBudget(await untilLimited((i) => get(ANY_THREAD, { "x-forwarded-for": client, "x-api-key": fakeKey(i), "x-user-id": `user-${i}` })));
    // another made-up key from the same IP is refused too (the bucket refills a token per 0.6 s: on
    // a slow machine one may have come back since, spent by a 401; the next ones find it empty)
    let denied = await get(ANY_THREAD, { "x-forwarded-for": client, "x-api-key": "not-a-key" });
    for (let retry = 0; retry < 3 && denied.status === 401; retry++) denied = await get(ANY_THREAD, { "x-forwarded-for": client, "x-api-key": "not-a-key" });
    expect(denied.status).toBe(429);
    expect(denied.headers["x-ratelimit-limit"]).toBe("100");
    expect(JSON.parse(denied.body)).toEqual({ detail: expect.stringContaining("catch-all") });
    // a key that verifies has a bucket of its own, whatever its IP did
    const real = await get(ANY_THREAD, { "x-forwarded-for": client, "x-api-key": otherKey });
    expect(real.status).toBe(404);
    expect(real.headers["x-ratelimit-limit"]).toBe("1000");
  });

  it("honours X-Forwarded-For from a trusted proxy only", async () => {
    // behind the trusted proxy (127.0.0.1) two clients have separate buckets
    expectOneIpBudget(await untilLimited(() => get(ANY_THREAD, { "x-forwarded-for": "203.0.113.5" })));
    expect((await get(ANY_THREAD, { "x-forwarded-for": "203.0.113.6" })).status).toBe(401); // no key: refused, but not rate-limited
    // a spoofed hop further left does not pick a bucket: this is still 203.0.113.5's, empty (or a
    // token or two refilled on a slow machine), where a fresh one would have 99 left
    const spoofed = await get(ANY_THREAD, { "x-forwarded-for": "1.2.3.4, 203.0.113.5" });
    expect(spoofed.status === 429 || Number(spoofed.headers["x-ratelimit-remaining"]) < 10).toBe(true);
    // from an untrusted peer (127.0.0.2) the header is ignored: rotating it mints nothing
    expectOneIpBudget(await untilLimited((i) => get(ANY_THREAD, { "x-forwarded-for": `192.0.2.${i}` }, "127.0.0.2")));
  });
});

// Rate limits are the hosted platform's table: a standalone `troupe serve` limits no one unless
// asked (flag or config); servers the control plane starts keep its region.
describe("rate-limit defaults", () => {
  const limited = (res: Response) => res.headers.get("x-ratelimit-limit") !== null;

  /** 120 searches without a key: over the IP catch-all (100/60) when limits are on */
  async function burst(url: string): Promise<Response[]> {
    const out: Response[] = [];
    for (let i = 0; i < 6; i++) {
      const batch = await Promise.all(
        Array.from({ length: 20 }, () => fetch(`${url}/threads/search`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })),
      );
      for (const r of batch) await r.arrayBuffer();
      out.push(...batch);
    }
    return out;
  }

  it("a standalone `troupe serve` answers every request of a client without a key", async () => {
    const plain = await startTestServer({ command: "serve", extraArgs: ["--host", "127.0.0.1"] });
    try {
      const replies = await burst(plain.url);
      expect(replies.map((r) => r.status).filter((s) => s !== 200)).toEqual([]);
      expect(replies.some(limited)).toBe(false);
    } finally {
      await plain.stop();
      plain.cleanup();
    }
  });

  it("turns them on with the config's http.rate_limit, and --rate-limit off wins over it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "troupe-rl-config-"));
    const config = join(dir, "service.json");
    writeFileSync(config, JSON.stringify({ graphs: { echo: `${join(REPO, "examples/echo.ts")}:graph` }, http: { rate_limit: "eu" } }));
    const fromConfig = await startTestServer({ command: "serve", config, extraArgs: ["--host", "127.0.0.1"] });
    try {
      const replies = await burst(fromConfig.url);
      expect(replies.every(limited)).toBe(true);
      expect(replies.filter((r) => r.status === 429).length).toBeGreaterThan(0);
    } finally {
      await fromConfig.stop();
      fromConfig.cleanup();
    }
    const off = await startTestServer({ command: "serve", config, extraArgs: ["--host", "127.0.0.1", "--rate-limit", "off"] });
    try {
      expect((await burst(off.url)).some(limited)).toBe(false);
    } finally {
      await off.stop();
      off.cleanup();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a deployment server started by the control plane applies the control plane's region", { timeout: 180_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), "troupe-rl-cp-"));
    const cp = await startControlPlane({
      host: "127.0.0.1",
      port: 0,
      dataDir: dir,
      region: "eu",
      rateLimit: null,
      log: () => undefined,
      projects: { root: REPO, perTenant: false }, // examples/service.json is a source it may deploy
      deployments: { workers: 1, readyTimeoutMs: 90_000 },
    });
    try {
      const res = await fetch(`${cp.url}/v2/deployments`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          name: "limited",
          source: "internal_source",
          source_config: {},
          source_revision_config: { langgraph_config_path: join(REPO, "examples/service.json") },
          secrets: [],
        }),
      });
      expect(res.status).toBe(201);
      const deployment = (await res.json()) as { id: string; url: string; latest_revision_id: string };
      await waitUntil(
        async () => {
          const r = await fetch(`${cp.url}/v2/deployments/${deployment.id}/revisions/${deployment.latest_revision_id}`);
          const status = ((await r.json()) as { status: string }).status;
          if (status.endsWith("_FAILED")) throw new Error(`revision ${status}`);
          return status === "DEPLOYED";
        },
        { timeoutMs: 150_000, intervalMs: 200, what: "the deployment to be DEPLOYED" },
      );
      const reply = await fetch(`${deployment.url}/threads/search`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
      await reply.arrayBuffer();
      expect(reply.status).toBe(200);
      expect(reply.headers.get("x-ratelimit-limit")).toBe("100"); // the IP catch-all (eu: 100/60)
    } finally {
      await cp.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
