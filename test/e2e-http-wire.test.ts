// What the HTTP front end (uWebSockets.js 20.30, the newest build that loads on glibc 2.36) does
// with unusual or invalid HTTP/1.x, on raw sockets (issue 17.4/17.5). Where Troupe sees the
// request it answers with a JSON error; where uWebSockets' C++ parser decides alone (HTTP/1.0,
// absolute-form targets, chunk extensions, too many headers, unknown methods, async pipelining) the
// tests pin down what happens, as README "HTTP: versions and limits" documents. If one of those
// starts failing after a uWebSockets.js upgrade, the upgrade fixed it: update the README.
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "./helpers/server.ts";
import { finalStatus, firstBody, rawExchange } from "./helpers/raw-http.ts";
import { waitUntil } from "./helpers/wait.ts";

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({ command: "serve", extraArgs: ["--host", "127.0.0.1", "--rate-limit", "off"] });
}, 60_000);
afterAll(async () => {
  await server?.stop();
  server?.cleanup();
});

const ANSWER = /\r\n\r\n\{.*\}$/s;
const get = (target: string, extra = "") => `GET ${target} HTTP/1.1\r\nHost: t\r\n${extra}\r\n`;
const jsonOf = (text: string) => JSON.parse(firstBody(text)) as { detail: unknown };

describe("answered by Troupe", () => {
  it("a request target over 8 KiB → 414 with a JSON body", async () => {
    const r = await rawExchange(server.url, get(`/ok?${"a".repeat(9000)}`), { until: ANSWER });
    expect(finalStatus(r.text)).toBe(414);
    expect(jsonOf(r.text)).toEqual({ detail: "Request URL is longer than 8192 characters" });
    expect(finalStatus((await rawExchange(server.url, get(`/ok?${"a".repeat(8000)}`), { until: ANSWER })).text)).toBe(200);
  });

  it("two different Content-Length headers → 400 and the connection closed (before: the first won)", async () => {
    const r = await rawExchange(
      server.url,
      "POST /threads/search HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 5\r\n\r\n{}",
      { until: /\}$/ },
    );
    expect(finalStatus(r.text)).toBe(400);
    expect(jsonOf(r.text)).toEqual({ detail: "Conflicting Content-Length headers" });
    expect(r.text).toMatch(/connection: close/i);
    // the same length twice is one length (RFC 9112 §6.3)
    const same = await rawExchange(
      server.url,
      "POST /threads/search HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}",
      { until: /\]$/ },
    );
    expect(finalStatus(same.text)).toBe(200);
  });

  it("a known method a route does not take → 405 with Allow and a JSON body", async () => {
    const r = await rawExchange(server.url, "TRACE /ok HTTP/1.1\r\nHost: t\r\n\r\n", { until: ANSWER });
    expect(finalStatus(r.text)).toBe(405);
    expect(r.text).toMatch(/allow: GET/i);
    expect(jsonOf(r.text)).toEqual({ detail: "Method TRACE not allowed on /ok" });
  });

  it("HEAD on a WebSocket route with Upgrade → the head of the 426 a plain GET gets (Upgrade header, JSON length)", async () => {
    const target = `/threads/${randomUUID()}/stream/events`;
    const r = await rawExchange(server.url, `HEAD ${target} HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\n\r\n`, { until: /\r\n\r\n/ });
    expect(finalStatus(r.text)).toBe(426);
    expect(r.text).toMatch(/^upgrade: websocket\r$/im);
    expect(r.text).toMatch(/^content-type: application\/json\r$/im);
    const refusal = JSON.stringify({ detail: "This endpoint needs a WebSocket upgrade request" });
    expect(r.text).toMatch(new RegExp(`^content-length: ${Buffer.byteLength(refusal)}\r$`, "im"));
  });

  it("pipelined requests whose replies are ready at once are all answered, in order", async () => {
    const r = await rawExchange(server.url, get("/ok") + get("/info") + get("/ok"), { until: /\{"ok":true\}[^]*\{"ok":true\}$/ });
    expect([...r.text.matchAll(/HTTP\/1\.1 200 OK/g)]).toHaveLength(3);
  });

  it("48 header lines are fine", async () => {
    const headers = Array.from({ length: 47 }, (_, i) => `X-H${i}: v\r\n`).join(""); // + Host = 48
    expect(finalStatus((await rawExchange(server.url, get("/ok", headers), { until: ANSWER })).text)).toBe(200);
  });

  it("troupe serve says it speaks HTTP/1.1 only and what nginx needs", () => {
    expect(server.output()).toContain("proxy_http_version 1.1");
  });
});

describe("decided by uWebSockets before Troupe sees the request (documented limits)", () => {
  it("HTTP/1.0 gets no answer: the request line is never complete to uWS, which waits for more", async () => {
    const r = await rawExchange(server.url, "GET /ok HTTP/1.0\r\n\r\n", { timeoutMs: 1500 });
    expect(r.text).toBe("");
    expect(r.closed).toBe(false);
    // an HTTP/1.0 request head of 4 KiB or more is dropped at once
    const padded = await rawExchange(server.url, `GET /ok HTTP/1.0\r\nX-Pad: ${"a".repeat(5000)}\r\n\r\n`, { timeoutMs: 10_000 });
    expect(padded).toMatchObject({ text: "", closed: true });
  });

  it("an absolute-form target gets no answer, like HTTP/1.0", async () => {
    const r = await rawExchange(server.url, `GET ${server.url}/ok HTTP/1.1\r\nHost: t\r\n\r\n`, { timeoutMs: 1500 });
    expect(r.text).toBe("");
  });

  it("a chunk extension closes the connection without an answer", async () => {
    const r = await rawExchange(
      server.url,
      "POST /threads/search HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n2;ext=1\r\n{}\r\n0\r\n\r\n",
      { timeoutMs: 10_000 },
    );
    expect(r).toMatchObject({ text: "", closed: true });
    // plain chunks are fine
    const plain = await rawExchange(
      server.url,
      "POST /threads/search HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
      { until: /\]$/ },
    );
    expect(finalStatus(plain.text)).toBe(200);
  });

  it("a request pipelined behind a reply that waits (a commit) closes the connection; the first request still takes effect", async () => {
    const body = JSON.stringify({ metadata: { pipelined: "yes" } });
    const r = await rawExchange(
      server.url,
      `POST /threads HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}` + get("/ok"),
      { timeoutMs: 10_000 },
    );
    expect(r).toMatchObject({ text: "", closed: true });
    const search = async () =>
      (await (
        await fetch(`${server.url}/threads/search`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ metadata: { pipelined: "yes" } }),
        })
      ).json()) as unknown[];
    await waitUntil(async () => (await search()).length === 1, { what: "the pipelined POST's thread" });
  });

  it("49 or more header lines get no answer (uWS keeps at most 48 and waits for the rest)", async () => {
    const headers = Array.from({ length: 48 }, (_, i) => `X-H${i}: v\r\n`).join(""); // + Host = 49
    const r = await rawExchange(server.url, get("/ok", headers), { timeoutMs: 1500 });
    expect(r.text).toBe("");
  });

  it("a request head still incomplete at 4 KiB, e.g. a 128 KiB URL arriving in pieces, closes the connection", async () => {
    const head = get(`/ok?${"a".repeat(128 * 1024)}`);
    const r = await rawExchange(server.url, head.slice(0, 64 * 1024), { more: [head.slice(64 * 1024)], gapMs: 100, timeoutMs: 10_000 });
    expect(r).toMatchObject({ text: "", closed: true });
  });

  it("methods other than GET POST PUT PATCH DELETE HEAD OPTIONS TRACE CONNECT, and lower-case ones, close the connection", async () => {
    for (const method of ["PURGE", "PROPFIND", "get"]) {
      const r = await rawExchange(server.url, `${method} /ok HTTP/1.1\r\nHost: t\r\n\r\n`, { timeoutMs: 10_000 });
      expect(r, method).toMatchObject({ text: "", closed: true });
    }
  });

  it("a Content-Length list (`2, 2`) closes the connection", async () => {
    const r = await rawExchange(server.url, "POST /threads/search HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 2, 2\r\n\r\n{}", {
      timeoutMs: 10_000,
    });
    expect(r).toMatchObject({ text: "", closed: true });
  });
});
