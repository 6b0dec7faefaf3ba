// In-process requests (src/http/inject.ts): every reply kind reads back as a client would see it,
// and the statuses the dispatcher answers itself (404, 405, 422, 426) come from the one error map.
import { describe, expect, it } from "vitest";
import { Dispatcher } from "../../src/http/dispatch.ts";
import { inject } from "../../src/http/inject.ts";
import { json, type RouteDef } from "../../src/http/types.ts";

function app(): Dispatcher {
  const d = new Dispatcher({ maxBodyBytes: 1024 });
  const routes: RouteDef[] = [
    {
      method: "POST",
      path: "/echo/:name",
      operationId: "echo",
      summary: "",
      tag: "t",
      body: { type: "object", properties: { n: { type: "integer" } }, required: ["n"] },
      handler: (ctx) => json({ name: ctx.params.name, body: ctx.body, q: ctx.rawQuery.get("q"), h: ctx.headers["x-h"] }),
    },
    {
      method: "GET",
      path: "/text",
      operationId: "text",
      summary: "",
      tag: "t",
      handler: () => ({ kind: "text", status: 200, body: new TextEncoder().encode("bytes"), contentType: "text/plain" }),
    },
    {
      method: "GET",
      path: "/stream",
      operationId: "stream",
      summary: "",
      tag: "t",
      handler: () => ({
        kind: "sse",
        start(sink) {
          sink.write("event: a\ndata: 1\n\n");
          setTimeout(() => (sink.write("event: b\ndata: 2\n\n"), sink.end()), 5);
        },
      }),
    },
    {
      method: "GET",
      path: "/later",
      operationId: "later",
      summary: "",
      tag: "t",
      handler: () => ({ kind: "deferred", contentType: "application/json", heartbeatMs: 1000, body: Promise.resolve('{"done":true}') }),
    },
    {
      method: "GET",
      path: "/ws",
      operationId: "ws",
      summary: "",
      tag: "t",
      handler: () => ({ kind: "websocket", open: () => ({ onMessage: () => undefined, onClose: () => undefined }) }),
    },
  ];
  d.add(...routes);
  return d;
}

describe("inject", () => {
  it("sends path params, query, headers and a JSON body through validation to the route", async () => {
    const res = await inject(app(), { method: "POST", url: "/echo/x?q=1", headers: { "X-H": "v" }, body: { n: 3 } });
    expect(res.status).toBe(200);
    expect(res.json()).toEqual({ name: "x", body: { n: 3 }, q: "1", h: "v" });
  });

  it("reads text, deferred and SSE bodies whole", async () => {
    const d = app();
    expect((await inject(d, { url: "/text" })).text).toBe("bytes");
    expect((await inject(d, { url: "/later" })).json()).toEqual({ done: true });
    const stream = await inject(d, { url: "/stream" });
    expect(stream.kind).toBe("sse");
    expect(stream.text).toBe("event: a\ndata: 1\n\nevent: b\ndata: 2\n\n");
  });

  it("answers 404, 405 (with Allow), 422 and 426 as JSON errors", async () => {
    const d = app();
    expect(await inject(d, { url: "/nope" })).toMatchObject({ status: 404 });
    const wrongMethod = await inject(d, { method: "DELETE", url: "/text" });
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.allow).toBe("GET");
    expect(wrongMethod.json()).toEqual({ detail: "Method DELETE not allowed on /text" });
    const invalid = await inject(d, { method: "POST", url: "/echo/x", body: {} });
    expect(invalid.status).toBe(422);
    expect(invalid.json()).toEqual({ detail: [{ loc: ["body", "n"], msg: "Field required", type: "missing" }] });
    const ws = await inject(d, { url: "/ws" });
    expect(ws.status).toBe(426);
    expect(ws.json()).toEqual({ detail: "This endpoint needs a WebSocket upgrade request" });
  });
});
