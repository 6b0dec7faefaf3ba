// What a route handler receives from the uWS front end and the Dispatcher, over a real socket:
// every request field, and an abort signal that is created on demand and fires when the client
// goes away (also when the handler asks for it only after the disconnect).
import { request } from "node:http";
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Dispatcher } from "../../src/http/dispatch.ts";
import { json, type RequestContext, type RouteDef } from "../../src/http/types.ts";
import { listen, type ListeningServer } from "../../src/http/uws-server.ts";
import { waitUntil } from "../helpers/wait.ts";

let server: ListeningServer;
let base: string;
const aborted: Record<string, boolean> = {};
let releaseLateSignal: () => void = () => undefined;

beforeAll(async () => {
  const d = new Dispatcher({ maxBodyBytes: 1 << 20 });
  const echo: RouteDef = {
    method: "POST",
    path: "/echo/:name",
    operationId: "echo",
    summary: "echo",
    tag: "t",
    params: { name: "string" },
    body: { type: "object" },
    query: { type: "object", properties: { n: { type: "integer" } } },
    handler: (ctx: RequestContext) =>
      json({
        method: ctx.method,
        path: ctx.path,
        params: ctx.params,
        query: ctx.query,
        raw: ctx.rawQuery.get("n"),
        header: ctx.headers["x-test"],
        body: ctx.body,
        ip: ctx.clientIp,
        signal: ctx.signal instanceof AbortSignal && !ctx.signal.aborted,
      }),
  };
  const hang: RouteDef = {
    method: "GET",
    path: "/hang/:id",
    operationId: "hang",
    summary: "hang",
    tag: "t",
    params: { id: "string" },
    handler: (ctx: RequestContext) =>
      new Promise((resolve) => {
        const id = ctx.params.id!;
        ctx.signal.addEventListener("abort", () => {
          aborted[id] = true;
          resolve(json({}));
        });
      }),
  };
  const late: RouteDef = {
    method: "GET",
    path: "/late",
    operationId: "late",
    summary: "late",
    tag: "t",
    // takes the signal only after the client has gone: it must already be aborted
    handler: (ctx: RequestContext) =>
      new Promise((resolve) => {
        releaseLateSignal = () => {
          aborted.late = ctx.signal.aborted;
          resolve(json({}));
        };
      }),
  };
  const hello: RouteDef = {
    method: "GET",
    path: "/hello",
    operationId: "hello",
    summary: "hello",
    tag: "t",
    handler: () => json({ hello: "world" }, 200, { "x-hello": "1" }),
  };
  d.add(echo, hang, late, hello);
  server = await listen(d, "127.0.0.1", 0);
  base = `http://127.0.0.1:${server.port}`;
});

afterAll(() => server?.close());

/** Sends a request and destroys the socket once the server has it (no answer awaited). */
function sendAndDrop(path: string): Promise<void> {
  return new Promise((resolve) => {
    const req = request(`${base}${path}`, { method: "GET" });
    req.on("error", () => undefined);
    req.end(() =>
      setTimeout(() => {
        req.destroy();
        resolve();
      }, 100),
    );
  });
}

describe("request context", () => {
  it("carries method, path, params, query, headers, body, client address and a live signal", async () => {
    const res = await fetch(`${base}/echo/abc?n=7`, {
      method: "POST",
      headers: { "x-test": "yes", "content-type": "application/json" },
      body: JSON.stringify({ a: 1 }),
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      method: "POST",
      path: "/echo/abc",
      params: { name: "abc" },
      query: { n: 7 },
      raw: "7",
      header: "yes",
      body: { a: 1 },
      ip: "127.0.0.1",
      signal: true,
    });
  });

  it("aborts the signal when the client disconnects", async () => {
    await sendAndDrop("/hang/one");
    await waitUntil(() => aborted.one === true, { what: "the request's signal to abort" });
  });

  it("hands out an already-aborted signal when asked after the disconnect", async () => {
    await sendAndDrop("/late");
    await new Promise((r) => setTimeout(r, 100));
    releaseLateSignal();
    expect(aborted.late).toBe(true);
  });
});

describe("HEAD", () => {
  it("answers with the GET reply's status and headers and no body, so the next response on the connection is intact", async () => {
    const socket = connect(server.port, "127.0.0.1");
    let received = "";
    socket.on("data", (chunk) => (received += chunk.toString()));
    socket.write("HEAD /hello HTTP/1.1\r\nHost: x\r\n\r\nGET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
    await waitUntil(() => received.includes('{"hello":"world"}'), { what: "the GET reply after the HEAD reply" });
    socket.destroy();
    const [head, rest] = received.split(/(?=HTTP\/1\.1 )/g).filter((part) => part.length > 0) as [string, string];
    expect(head).toMatch(/^HTTP\/1\.1 200/);
    expect(head.toLowerCase()).toContain("content-length: 17");
    expect(head.toLowerCase()).toContain("x-hello: 1");
    expect(head.endsWith("\r\n\r\n")).toBe(true); // no body after the head
    expect(rest).toMatch(/^HTTP\/1\.1 200[\s\S]*\r\n\r\n\{"hello":"world"\}$/);
  });
});
