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
    const statuses: number[] = [];
    let last: Response | undefined;
    for (let i = 0; i < 21; i++) {
      last = await fetch(`${server.url}/runs/stats`, { headers: key });
      statuses.push(last.status);
      if (last.status !== 429) await last.text();
    }
    expect(statuses.slice(0, 20).every((s) => s !== 429)).toBe(true);
    expect(statuses[20]).toBe(429);
    expect(Number(last!.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(await last!.json()).toEqual({ detail: expect.stringContaining("rate limit") });
    // another identity is unaffected
    const other = await fetch(`${server.url}/runs/stats`, { headers: { "x-api-key": "other" } });
    expect(other.status).not.toBe(429);
  });
});
