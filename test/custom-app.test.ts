// `http.app` end to end: a real Hono app (test/fixtures/custom-app/app.ts) mounted before the
// built-in routes of a spawned server — its routes, a route that overrides a built-in, a relative
// webhook delivered to it in-process, fall-through to the built-ins wrapped in its middleware, and
// its streamed responses (sent as produced, pulled no faster than the client reads).
import { connect } from "node:net";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { REPO } from "./helpers/server.ts";
import { loadCustomApp, pathPattern } from "../src/http/custom-app.ts";
import { ConfigError } from "../src/config/index.ts";
import { rawRequest, useServer } from "./helpers/suite.ts";
import { waitUntil } from "./helpers/wait.ts";

const fx = useServer({ config: join(REPO, "test/fixtures/custom-app/service.json") });

describe("http.app (custom routes)", () => {
  it("answers its own routes (query, params, body, status, headers) and overrides a built-in", async () => {
    const hello = await rawRequest(fx.server.url, "/custom/hello?name=troupe");
    expect(hello).toMatchObject({ status: 200, body: { hello: "troupe" } });
    expect(hello.headers.get("x-custom-app")).toBe("yes");
    const echo = await rawRequest(fx.server.url, "/custom/echo/42", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ a: 1 }),
    });
    expect(echo).toMatchObject({ status: 201, body: { id: "42", body: { a: 1 } } });
    expect((await rawRequest(fx.server.url, "/info")).body).toEqual({ custom: true });
  });

  it("leaves every other path to the built-in routes, wrapped in its middleware", async () => {
    const ok = await rawRequest(fx.server.url, "/ok");
    expect(ok.body).toEqual({ ok: true });
    // headers its middleware sets before and after next()
    expect(ok.headers.get("x-custom-app")).toBe("yes");
    expect(ok.headers.get("x-before")).toBe("set before next");
    expect(ok.headers.get("x-troupe-bridge")).toBeNull();
    const t = await fx.client.threads.create();
    expect((await fx.client.threads.get(t.thread_id)).thread_id).toBe(t.thread_id);
    // built-in errors keep their status and JSON body
    const missing = await rawRequest(fx.server.url, "/custom/nope");
    expect(missing).toMatchObject({ status: 404, body: { detail: expect.stringContaining("Not Found") } });
    expect(missing.headers.get("x-custom-app")).toBe("yes");
    const invalid = await rawRequest(fx.server.url, "/threads", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ metadata: 5 }),
    });
    expect(invalid.status).toBe(422);
    expect(invalid.headers.get("x-custom-app")).toBe("yes");
  });

  it("lets path-scoped middleware answer for a built-in route or change its status", async () => {
    const t = await fx.client.threads.create();
    const denied = await rawRequest(fx.server.url, `/threads/${t.thread_id}`, { headers: { "x-deny": "yes" } });
    expect(denied).toMatchObject({ status: 403, body: { detail: "denied by middleware" } });
    expect(denied.headers.get("x-custom-app")).toBe("yes");
    const teapot = await rawRequest(fx.server.url, `/threads/${t.thread_id}`, { headers: { "x-teapot": "yes" } });
    expect(teapot).toMatchObject({ status: 418, body: { thread_id: t.thread_id } });
    // outside its path the built-in answers untouched by it
    expect(
      (await rawRequest(fx.server.url, "/assistants/search", { method: "POST", headers: { "x-deny": "yes", "content-type": "application/json" }, body: "{}" }))
        .status,
    ).toBe(200);
  });

  it("streams and waits through the middleware: SSE and runs/wait replies keep their shape", async () => {
    const t = await fx.client.threads.create();
    const input = { messages: [{ role: "human", content: "through middleware" }] };
    const res = await fetch(`${fx.server.url}/threads/${t.thread_id}/runs/stream`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ assistant_id: "echo", input, stream_mode: ["values"] }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    expect(res.headers.get("x-custom-app")).toBe("yes");
    const text = await res.text();
    expect(text).toMatch(/^event: metadata/m);
    expect(text).toContain("through middleware");
    const waited = await fx.client.runs.wait(t.thread_id, "echo", { input });
    expect(JSON.stringify(waited)).toContain("through middleware");
    const chunks = [];
    for await (const chunk of fx.client.runs.stream(t.thread_id, "echo", { input, streamMode: "values" })) chunks.push(chunk.event);
    expect(chunks).toEqual(expect.arrayContaining(["metadata", "values"]));
  });

  it("upgrades a WebSocket on a built-in route through the middleware", async () => {
    const t = await fx.client.threads.create();
    const ws = new WebSocket(`${fx.server.url.replace("http", "ws")}/threads/${t.thread_id}/stream/events`);
    const messages: { id?: number; type?: string }[] = [];
    ws.addEventListener("message", (e) => messages.push(JSON.parse(String(e.data))));
    await new Promise((resolve, reject) => (ws.addEventListener("open", resolve), ws.addEventListener("error", reject)));
    ws.send(JSON.stringify({ id: 1, method: "subscription.subscribe", params: { channels: ["values"] } }));
    expect(await waitUntil(() => messages.find((m) => m.id === 1), { what: "the subscribe reply" })).toMatchObject({ type: "success" });
    ws.close();
  });

  it("receives a run's relative webhook in-process (reference §10)", async () => {
    const t = await fx.client.threads.create();
    await fx.client.runs.wait(t.thread_id, "echo", { input: { messages: [{ role: "human", content: "hook" }] }, webhook: "/custom/webhook" });
    type Hook = { status: string; thread_id: string };
    const hooks = await waitUntil(
      async () => {
        const got = (await rawRequest(fx.server.url, "/custom/webhooks")).body as Hook[];
        return got.length > 0 ? got : undefined;
      },
      { what: "the relative webhook" },
    );
    expect(hooks).toEqual([expect.objectContaining({ status: "success", thread_id: t.thread_id })]);
  });
});

/** Reads a streamed body until `until` matches what arrived (rejects once the body ends without it). */
async function readUntil(reader: ReadableStreamDefaultReader<Uint8Array>, got: { text: string }, until: RegExp): Promise<void> {
  const decoder = new TextDecoder();
  while (!until.test(got.text)) {
    const r = await reader.read();
    if (r.done) throw new Error(`the body ended without ${until}: ${JSON.stringify(got.text)}`);
    got.text += decoder.decode(r.value, { stream: true });
  }
}

describe("http.app streaming responses", () => {
  // The route writes three chunks, then waits for /custom/stream/release before its fourth: a
  // client that reads the three before releasing saw them as they were produced.
  for (const sse of [false, true]) {
    it(`streams a ${sse ? "streamSSE" : "stream"} response as it is produced`, async () => {
      const got = { text: "" };
      try {
        const res = await Promise.race([
          fetch(`${fx.server.url}/custom/stream${sse ? "?sse=1" : ""}`),
          new Promise<never>((_, reject) => setTimeout(() => reject(new Error("no response head while the route still streams")), 15_000)),
        ]);
        expect(res.status).toBe(200);
        if (sse) expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
        expect(res.headers.get("x-custom-app")).toBe("yes"); // its middleware still wraps it
        const reader = res.body!.getReader();
        await Promise.race([
          readUntil(reader, got, sse ? /id: 3\n\n/ : /chunk 3\n/),
          new Promise<never>((_, reject) =>
            setTimeout(() => reject(new Error(`chunks 1-3 not seen before the last was produced: ${JSON.stringify(got.text)}`)), 15_000),
          ),
        ]);
        expect(got.text).not.toMatch(/4/);
        expect((await rawRequest(fx.server.url, "/custom/stream/release")).body).toEqual({ released: true });
        await readUntil(reader, got, sse ? /id: 4\n\n/ : /chunk 4\n/);
        expect((await reader.read()).done).toBe(true);
        if (sse) expect(got.text.match(/^event: chunk$/gm)).toHaveLength(4);
        else expect(got.text).toBe("chunk 1\nchunk 2\nchunk 3\nchunk 4\n");
      } finally {
        await rawRequest(fx.server.url, "/custom/stream/release"); // never leave the route waiting
      }
    });
  }

  it("pulls a streamed body no faster than the client reads it", async () => {
    const total = 64 * 16; // 64 MiB in 64 KiB chunks
    const produced = async () => ((await rawRequest(fx.server.url, "/custom/large/produced")).body as { produced: number }).produced;
    const { port } = new URL(fx.server.url);
    const socket = connect(Number(port), "127.0.0.1");
    let received = 0;
    let head = "";
    socket.on("data", (d: Buffer) => {
      received += d.length;
      if (head.length < 200) head += d.toString("latin1");
    });
    socket.write("GET /custom/large?mb=64 HTTP/1.1\r\nHost: x\r\n\r\n");
    await waitUntil(() => head.includes("\r\n\r\n"), { what: "the response head" });
    socket.pause(); // a client that stops reading
    // production stalls once the socket's buffers are full: the same count twice, 1 s apart
    let last = -1;
    const stalledAt = await waitUntil(
      async () => {
        const n = await produced();
        const stable = n === last;
        last = n;
        return stable ? n + 1 : 0; // +1: truthy even at 0
      },
      { intervalMs: 1_000, timeoutMs: 30_000, what: "the producer to stop while the client does not read" },
    );
    expect(stalledAt - 1).toBeLessThan(total / 2);
    socket.resume();
    await waitUntil(async () => (await produced()) === total, { timeoutMs: 60_000, what: "the whole body to be produced once the client reads" });
    await waitUntil(() => received >= total * 64 * 1024, { timeoutMs: 60_000, what: "the whole body to arrive" });
    socket.destroy();
  });
});

describe("custom app loading and route matching", () => {
  it("matches Hono path syntax", () => {
    const cases: [string, string, boolean][] = [
      ["/a/:id", "/a/1", true],
      ["/a/:id", "/a/1/b", false],
      ["/a/:id", "/a/", false],
      ["/a/:id?", "/a", true],
      ["/a/:n{[0-9]+}", "/a/12", true],
      ["/a/:n{[0-9]+}", "/a/x", false],
      ["/files/*", "/files/x/y.txt", true],
      ["/x.json", "/xyjson", false],
      ["/ok", "/ok/", true],
    ];
    for (const [pattern, path, expected] of cases) expect(pathPattern(pattern).test(path), `${pattern} ${path}`).toBe(expected);
  });

  it("refuses an export that is not an app, naming http.app", async () => {
    const ref = { filePath: join(REPO, "test/fixtures/custom-app/app.ts"), exportName: "nope" };
    await expect(loadCustomApp(ref, "service.json")).rejects.toThrow(ConfigError);
    await expect(loadCustomApp(ref, "service.json")).rejects.toThrow(/http\.app/);
  });
});
