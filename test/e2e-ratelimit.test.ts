// Platform rate limits on a real `troupe serve`: budget headers on every reply, 429 with
// Retry-After and a JSON detail once an identity's bucket is empty.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "./helpers/server.ts";

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({ command: "serve", extraArgs: ["--host", "127.0.0.1", "--rate-limit", "eu"] });
});
afterAll(async () => {
  await server?.stop();
  server?.cleanup();
});

describe("rate limits", () => {
  it("reports budgets and answers 429 when /runs/stats (EU 20/10 per key) is exhausted", async () => {
    const key = { "x-api-key": "k-" + Date.now() };
    const first = await fetch(`${server.url}/threads/search`, { method: "POST", headers: { ...key, "content-type": "application/json" }, body: "{}" });
    expect(first.status).toBe(200);
    expect(first.headers.get("x-ratelimit-limit")).toBe("1000");
    expect(Number(first.headers.get("x-ratelimit-remaining"))).toBe(999);
    expect(Number(first.headers.get("x-ratelimit-reset"))).toBeGreaterThanOrEqual(0);
    // A burst of 30 concurrent requests on a 20/10 s bucket: 20 are admitted (plus at most one
    // token refilled during the burst on a slow machine), the rest get 429.
    const burst = await Promise.all(Array.from({ length: 30 }, () => fetch(`${server.url}/runs/stats`, { headers: key })));
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
    const other = await fetch(`${server.url}/runs/stats`, { headers: { "x-api-key": "other" } });
    expect(other.status).not.toBe(429);
  });
});
