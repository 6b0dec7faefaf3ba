// Dispatcher guards that wrap the rest of the pipeline (GuardContext.proceed, used by http.app
// middleware): later guards run once, inside the wrapper; errors come back as replies.
import { describe, expect, it } from "vitest";
import { Dispatcher, MAX_BODY_DEPTH, parseBody, type Guard, type RawRequest } from "../../src/http/dispatch.ts";
import { json, type Reply, type RouteDef } from "../../src/http/types.ts";
import { TroupeError } from "../../src/errors.ts";
import { errorReply } from "../../src/http/errors.ts";

const raw = (path: string): RawRequest => ({
  method: "GET",
  path,
  query: "",
  headers: {},
  body: null,
  clientIp: "127.0.0.1",
  signal: new AbortController().signal,
});

function setup(): { d: Dispatcher; order: string[] } {
  const order: string[] = [];
  const d = new Dispatcher({ maxBodyBytes: 1024 });
  const hello: RouteDef = { method: "GET", path: "/hello", operationId: "hello", summary: "", tag: "t", handler: () => (order.push("route"), json({ hi: 1 })) };
  const boom: RouteDef = {
    method: "GET",
    path: "/boom",
    operationId: "boom",
    summary: "",
    tag: "t",
    handler: () => {
      throw new Error("boom");
    },
  };
  d.add(hello, boom);
  const first: Guard = (_req, ctx) => {
    order.push("first");
    ctx.responseHeaders["x-first"] = "1";
    return undefined;
  };
  const wrapper: Guard = async (_req, ctx) => {
    order.push("wrapper:before");
    const inner = await ctx.proceed();
    order.push("wrapper:after");
    return { ...inner, headers: { ...inner.headers, "x-wrapped": "yes" } } as Reply;
  };
  const last: Guard = () => {
    order.push("last");
    return undefined;
  };
  d.addGuard(first);
  d.addGuard(wrapper);
  d.addGuard(last);
  return { d, order };
}

describe("guards wrapping the pipeline", () => {
  it("run the later guards and the route once, inside the wrapper", async () => {
    const { d, order } = setup();
    const reply = await d.dispatch(raw("/hello"));
    expect(reply).toMatchObject({ kind: "json", status: 200, body: { hi: 1 }, headers: { "x-wrapped": "yes", "x-first": "1" } });
    expect(order).toEqual(["first", "wrapper:before", "last", "route", "wrapper:after"]);
  });

  it("get errors of the rest of the pipeline as replies", async () => {
    const { d } = setup();
    expect(await d.dispatch(raw("/nope"))).toMatchObject({ status: 404, body: { detail: "Not Found: GET /nope" }, headers: { "x-wrapped": "yes" } });
    const original = console.error;
    console.error = () => undefined; // the 500 is logged
    try {
      expect(await d.dispatch(raw("/boom"))).toMatchObject({ status: 500, headers: { "x-wrapped": "yes" } });
    } finally {
      console.error = original;
    }
  });
});

describe("error replies with headers", () => {
  it("carry each request's guard headers, also when the error's headers are a shared constant", async () => {
    const SHARED = { "www-authenticate": "ApiKey" };
    const d = new Dispatcher({ maxBodyBytes: 1024 });
    let n = 0;
    d.addGuard((_req, ctx) => {
      ctx.responseHeaders["x-ratelimit-remaining"] = String(10 - ++n);
      return undefined;
    });
    d.addGuard(() => errorReply(new TroupeError("UNAUTHORIZED", "Missing API key", { headers: SHARED })));
    const first = await d.dispatch(raw("/x"));
    const second = await d.dispatch(raw("/x"));
    // every reply also carries its own request id (issue 23); the guard headers are what this checks
    const { "x-request-id": firstId, ...firstHeaders } = first.headers ?? {};
    const { "x-request-id": secondId, ...secondHeaders } = second.headers ?? {};
    expect(firstId).not.toBe(secondId);
    expect(firstHeaders).toEqual({ "www-authenticate": "ApiKey", "x-ratelimit-remaining": "9" });
    expect(secondHeaders).toEqual({ "www-authenticate": "ApiKey", "x-ratelimit-remaining": "8" });
    expect(SHARED).toEqual({ "www-authenticate": "ApiKey" });
  });
});

describe("request bodies", () => {
  const nested = (levels: number, open = "[", close = "]") => `{"a": ${open.repeat(levels - 1)}"x ]}[ \\" {"${close.repeat(levels - 1)}}`;
  const post = (text: string): RawRequest => ({ ...raw("/x"), method: "POST", headers: { "content-type": "application/json" }, body: Buffer.from(text) });

  it("refuses nesting deeper than MAX_BODY_DEPTH with a 422, before anything recursive sees it", () => {
    expect(parseBody(post(nested(MAX_BODY_DEPTH)))).toBeDefined();
    expect(parseBody(post(nested(MAX_BODY_DEPTH, '{"k":', "}")))).toBeDefined();
    let error: unknown;
    try {
      parseBody(post(nested(MAX_BODY_DEPTH + 1)));
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(TroupeError);
    expect(error).toMatchObject({ code: "VALIDATION", issues: [{ loc: ["body"], type: "too_deep" }] });
    // brackets inside strings do not count
    expect(parseBody(post(JSON.stringify({ s: "[".repeat(5_000) })))).toEqual({ s: "[".repeat(5_000) });
  });
});
