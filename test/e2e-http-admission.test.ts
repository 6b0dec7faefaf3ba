// Refusals decided from the headers (issue 17.3): a request without a valid API key, over its rate
// limit, refused by custom auth or declaring a body over the limit is answered at once, before
// its body is sent — the client here sends only the headers and waits. Before, the server waited
// for (and buffered) the whole declared body first.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPO, startTestServer, type TestServer } from "./helpers/server.ts";
import { finalStatus, firstBody, rawExchange } from "./helpers/raw-http.ts";

const MiB = 1024 * 1024;
const post = (path: string, length: number, extra = "") =>
  `POST ${path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n${extra}\r\n`;
/** headers only: the answer must come without the body (which never comes: before, nothing came back) */
const headersOnly = (url: string, request: string) => rawExchange(url, request, { timeoutMs: 15_000, until: /\r\n\r\n\{.*\}$/s });

function troupeCli(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [join(REPO, "bin/troupe.js"), ...args], { cwd: REPO, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    p.stdout.on("data", (d: Buffer) => (out += d.toString()));
    p.once("error", reject);
    p.once("exit", (code) => (code === 0 ? resolve(out) : reject(new Error(`troupe ${args.join(" ")} exited ${code}`))));
  });
}

describe("API keys and rate limits", () => {
  let cpDir: string;
  let server: TestServer;
  let key: string;
  beforeAll(async () => {
    cpDir = mkdtempSync(join(tmpdir(), "troupe-admission-"));
    const out = await troupeCli(["keys", "create", "--org", "acme", "--data-dir", cpDir, "--json"]);
    const created = JSON.parse(out) as { key: string; org_id: string };
    key = created.key;
    server = await startTestServer({
      command: "serve",
      extraArgs: ["--host", "127.0.0.1", "--rate-limit", "eu", "--control-plane-dir", cpDir, "--org", created.org_id],
    });
  }, 90_000);
  afterAll(async () => {
    await server?.stop();
    server?.cleanup();
    rmSync(cpDir, { recursive: true, force: true });
  });

  it("answer 401 to a keyless upload from its headers, without waiting for the body", async () => {
    const r = await headersOnly(server.url, post("/threads", 5 * MiB));
    expect(finalStatus(r.text)).toBe(401);
    expect(JSON.parse(firstBody(r.text))).toEqual({ detail: "Missing or invalid API key" });
    // a client that sends its body anyway still reads the 401 (the body is dropped, not kept)
    const eager = await fetch(`${server.url}/threads`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ metadata: { x: "y".repeat(5 * MiB) } }),
    });
    expect(eager.status).toBe(401);
    await eager.text();
  });

  it("answer 429 from the headers once the caller's budget is spent", async () => {
    const caller = { "x-api-key": key };
    // EU /runs/stats: 20 per 10 s per key
    for (let i = 0; i < 25; i++) await (await fetch(`${server.url}/runs/stats`, { headers: caller })).text();
    const r = await headersOnly(
      server.url,
      `GET /runs/stats HTTP/1.1\r\nHost: t\r\nX-Api-Key: ${key}\r\nContent-Type: application/json\r\nContent-Length: ${4 * MiB}\r\n\r\n`,
    );
    expect(finalStatus(r.text)).toBe(429);
    expect(r.text).toMatch(/retry-after: \d+/i);
  });

  it("answer 413 at once to a declared body over the limit, also behind Expect: 100-continue", async () => {
    const plain = await headersOnly(server.url, post("/threads", 11 * MiB, `X-Api-Key: ${key}\r\n`));
    expect(finalStatus(plain.text)).toBe(413);
    const expecting = await headersOnly(server.url, post("/threads", 11 * MiB, `X-Api-Key: ${key}\r\nExpect: 100-continue\r\n`));
    // uWebSockets answers the expectation before Troupe sees the request; the 413 follows at once
    expect(expecting.text).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 413 /);
    expect(JSON.parse(firstBody(expecting.text))).toEqual({ detail: "Request body exceeds the limit of 10485760 bytes" });
  });

  it("still read the bodies of admitted requests, sent in pieces", async () => {
    const body = JSON.stringify({ metadata: { note: "x".repeat(200_000) } });
    const head = post("/threads", Buffer.byteLength(body), `X-Api-Key: ${key}\r\n`);
    const pieces = [body.slice(0, 70_000), body.slice(70_000, 140_000), body.slice(140_000)];
    const r = await rawExchange(server.url, head, { more: pieces, gapMs: 30, timeoutMs: 10_000, until: /\r\n\r\n\{.*\}$/s });
    expect(finalStatus(r.text)).toBe(200);
    expect(JSON.parse(firstBody(r.text))).toMatchObject({ metadata: { note: "x".repeat(200_000) } });
  });
});

describe("custom auth", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ config: join(REPO, "test/fixtures/auth/service.json") });
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
    server?.cleanup();
  });

  it("authenticates from the headers: an unauthenticated upload is refused before its body", async () => {
    const r = await headersOnly(server.url, post("/threads", 5 * MiB));
    expect(finalStatus(r.text)).toBe(401);
    expect(r.text).toMatch(/www-authenticate: Bearer/i);
    // an authenticated one goes through
    const next = await rawExchange(server.url, post("/threads", 2, "Authorization: Bearer user-a\r\n") + "{}", {
      timeoutMs: 15_000,
      until: /\r\n\r\n\{.*\}$/s,
    });
    expect(finalStatus(next.text)).toBe(200);
  });

  it("hands authenticate the body when it reads it, also when the body comes after the headers", async () => {
    const body = JSON.stringify({ metadata: { input: "x".repeat(100_000) } });
    const head = post("/threads/search", Buffer.byteLength(body), "Authorization: Bearer user-a\r\n");
    const r = await rawExchange(server.url, head, {
      more: [body.slice(0, 50_000), body.slice(50_000)],
      gapMs: 50,
      timeoutMs: 10_000,
      until: /\r\n\r\n\[.*\]$/s,
    });
    expect(finalStatus(r.text)).toBe(200);
  });
});
