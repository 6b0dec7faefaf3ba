// `http.app` (reference §12.1): the user's Hono app (or any object with `fetch(Request)` and a
// Hono-style `routes` list) mounted before the built-in routes, after CORS, rate limits, API keys
// and custom auth (reference §11.3). A request matching one of its routes is answered by it; as
// upstream, its middleware (`app.use(...)`) also wraps the built-in routes under its paths: the
// request goes through the app, whose last route hands it on to the built-ins, and the app's
// response to that (middleware headers, a short-circuit, a status change) becomes the reply.
// Everything else goes straight to the built-ins. The app's streamed responses are streamed
// through. Differences from upstream (docs in README): a built-in route reads the request as it
// arrived (middleware cannot rewrite it); middleware sees a built-in reply's body only for
// JSON/text replies (streams stay streams, and pass through untouched).
import { randomUUID } from "node:crypto";
import { ConfigError, type ImportRef } from "../config/index.ts";
import type { Guard, RawRequest } from "./dispatch.ts";
import { jsonReplyText, type Reply } from "./types.ts";
import { importUserModule } from "../loader/user-modules.ts";
import { componentLog } from "../log/logger.ts";

interface FetchApp {
  fetch(request: Request, env?: unknown): Response | Promise<Response>;
  routes?: { method: string; path: string; handler?: (...args: never[]) => unknown }[];
  /** Hono's catch-all registration: present, the built-ins can be mounted as the app's last route */
  all?: (path: string, handler: (c: BridgeContext) => Response | Promise<Response>) => unknown;
}

/** What the bridge route uses of Hono's Context. */
interface BridgeContext {
  env: unknown;
  body(data: Uint8Array | string | null, status?: number, headers?: Record<string, string>): Response;
  notFound(): Response | Promise<Response>;
}

interface RouteMatcher {
  method: string;
  /** the app's path pattern as written (the route label in /metrics and the log) */
  path: string;
  pattern: RegExp;
  /** Hono's own test (hono/dev inspectRoutes): a handler taking `next` is middleware */
  middleware: boolean;
}

/** Hono path syntax → RegExp: `:name` (optionally `:name{regex}`) is one segment, `*` anything. */
export function pathPattern(path: string): RegExp {
  let re = "";
  for (let i = 0; i < path.length;) {
    const c = path[i];
    if (c === ":") {
      const m = /^:([A-Za-z0-9_]+)(\{([^}]*)\})?(\?)?/.exec(path.slice(i));
      if (!m) {
        re += ":";
        i++;
        continue;
      }
      const segment = m[3] ? `(?:${m[3]})` : "[^/]+";
      if (m[4] && re.endsWith("/"))
        re = `${re.slice(0, -1)}(?:/${segment})?`; // "/a/:id?" also matches "/a"
      else re += m[4] ? `(?:${segment})?` : segment;
      i += m[0].length;
    } else if (c === "*") {
      re += ".*";
      i++;
    } else {
      re += c.replace(/[.+?^${}()|[\]\\]/g, "\\$&");
      i++;
    }
  }
  return new RegExp(`^${re}/?$`);
}

export async function loadCustomApp(ref: ImportRef, configPath: string): Promise<FetchApp> {
  const fail = (message: string, cause?: unknown): never => {
    throw new ConfigError(configPath, [{ key: "http.app", message }], { cause });
  };
  let mod: Record<string, unknown> = {};
  try {
    mod = await importUserModule(ref.filePath);
  } catch (err) {
    fail(`could not import ${ref.filePath}: ${err instanceof Error ? err.message : String(err)}`, err);
  }
  const app = mod[ref.exportName] as FetchApp | undefined;
  if (!app || typeof app.fetch !== "function") fail(`export "${ref.exportName}" of ${ref.filePath} is not a Hono app (an object with fetch(request))`);
  return app as FetchApp;
}

/** Where the bridge route finds the request it is handing on (the `env` of app.fetch). */
const BRIDGE = Symbol("troupe.bridge");
/** Marks the bridge route's response, so it is recognised when it comes back out of the middleware. */
const BRIDGE_HEADER = "x-troupe-bridge";

/** One request handed through the app to the built-ins. */
class BridgeCall {
  readonly id = randomUUID();
  /** the built-in reply, once the bridge route ran */
  reply?: Reply;
  /** the bridge route's response as it left the route */
  response?: Response;

  constructor(readonly proceed: () => Promise<Reply>) {}
}

/**
 * Adds the route that hands requests on to the built-ins as the app's last one, so middleware
 * registered before it wraps them. False when the app cannot take it (not a Hono app, or its
 * router is already built); then its middleware wraps only its own routes.
 */
function mountBuiltIns(app: FetchApp): boolean {
  if (typeof app.all !== "function") return false;
  try {
    app.all("*", async (c) => {
      const call = (c.env as { [BRIDGE]?: BridgeCall } | undefined)?.[BRIDGE];
      if (call === undefined) return c.notFound();
      const reply = await call.proceed();
      call.reply = reply;
      const headers: Record<string, string> = { ...reply.headers, [BRIDGE_HEADER]: call.id };
      let body: Uint8Array | null = null;
      let status = 200;
      if (reply.kind === "json" || reply.kind === "text") {
        // the body too, for middleware that reads it (the reply sent is still the built-in's own)
        const text = reply.kind === "json" ? jsonReplyText(reply) : reply.body;
        body = typeof text === "string" ? encoder.encode(text) : text;
        headers["content-type"] = reply.kind === "json" ? "application/json" : reply.contentType;
        status = reply.status;
      } else if (reply.kind === "empty") {
        status = reply.status;
      }
      call.response = c.body(body, status, headers);
      return call.response;
    });
    return true;
  } catch (err) {
    componentLog("http.app").warn(`http.app: its middleware will wrap only its own routes (${err instanceof Error ? err.message : String(err)})`);
    return false;
  }
}

const encoder = new TextEncoder();

/** The guard answering requests that match one of the app's routes or middleware paths. */
export function customAppGuard(app: FetchApp): Guard {
  const routes: RouteMatcher[] = (app.routes ?? []).map((r) => ({
    method: r.method.toUpperCase(),
    path: r.path,
    pattern: pathPattern(r.path),
    middleware: typeof r.handler === "function" ? r.handler.length > 1 : r.path === "*" || r.path === "/*",
  }));
  const bridged = routes.some((r) => r.middleware) && mountBuiltIns(app);
  // without the bridge, middleware is not a route: a request matching only middleware is not the app's
  const matchers = bridged ? routes : routes.filter((r) => !r.middleware);
  const matches = (r: RouteMatcher, req: RawRequest) =>
    (r.method === "ALL" || r.method === req.method || (req.method === "HEAD" && r.method === "GET")) && r.pattern.test(req.path);
  return async (req, ctx) => {
    if (!matchers.some((r) => matches(r, req))) return undefined;
    // counted under the app's own route (its path as written; the built-ins overwrite it when they answer)
    ctx.route = `http.app ${(matchers.find((r) => !r.middleware && matches(r, req)) ?? matchers.find((r) => matches(r, req)))!.path}`;
    if (!bridged) return toReply(await app.fetch(toRequest(req)));
    const call = new BridgeCall(() => ctx.proceed());
    const res = await app.fetch(toRequest(req), { [BRIDGE]: call });
    if (call.reply === undefined) return toReply(res); // the middleware answered without the built-ins
    if (res.headers.get(BRIDGE_HEADER) === call.id && res.body === call.response?.body) return builtInReply(call.reply, res);
    // the middleware replaced the built-in's response: that reply is not sent
    if (call.reply.kind === "deferred") call.reply.body.catch(() => undefined);
    return toReply(res);
  };
}

/**
 * The built-in reply as the app's middleware left it: its headers and (JSON, text) status; the body
 * is the built-in's own (the middleware did not replace it: the response still carries it).
 */
function builtInReply(reply: Reply, res: Response): Reply {
  const headers: Record<string, string> = {};
  res.headers.forEach((value, name) => {
    if (name !== BRIDGE_HEADER && name !== "content-type" && name !== "content-length") headers[name] = value;
  });
  if (reply.kind === "json" || reply.kind === "text") return { ...reply, status: res.status, headers };
  return { ...reply, headers };
}

function toRequest(req: RawRequest): Request {
  const url = `http://${req.headers.host ?? "localhost"}${req.path}${req.query ? `?${req.query}` : ""}`;
  const hasBody = req.body !== null && req.method !== "GET" && req.method !== "HEAD";
  return new Request(url, { method: req.method, headers: req.headers, body: hasBody ? new Uint8Array(req.body!) : undefined, signal: req.signal });
}

/** Bodies larger than this are streamed even when they are complete at once. */
const WHOLE_BODY_LIMIT = 1024 * 1024;
const PENDING = Symbol("pending");

/** Resolves with PENDING when `read` has not settled by the end of this event-loop turn. */
function withinTurn<T>(read: Promise<T>): Promise<T | typeof PENDING> {
  return Promise.race([read, new Promise<typeof PENDING>((resolve) => setImmediate(resolve, PENDING))]);
}

/**
 * The app's Response as a reply. A body complete within this event-loop turn (c.json, c.text, a
 * buffer) is sent whole, with its length; one still being produced (hono/streaming, a
 * ReadableStream) is streamed as it comes, pulled no faster than the client reads it.
 */
async function toReply(res: Response): Promise<Reply> {
  const headers: Record<string, string> = {};
  res.headers.forEach((value, name) => {
    if (name !== "content-type" && name !== "content-length" && name !== BRIDGE_HEADER) headers[name] = value;
  });
  const contentType = res.headers.get("content-type") ?? "application/octet-stream";
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = res.body?.getReader();
  while (reader) {
    if (size > WHOLE_BODY_LIMIT) return streamReply(res.status, contentType, headers, chunks, reader, undefined);
    const read = reader.read();
    const got = await withinTurn(read);
    if (got === PENDING) return streamReply(res.status, contentType, headers, chunks, reader, read);
    if (got.done) break;
    chunks.push(got.value);
    size += got.value.byteLength;
  }
  const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
  if (body.byteLength === 0 && (res.status === 204 || res.status === 202)) return { kind: "empty", status: res.status, headers };
  return { kind: "text", status: res.status, contentType, body, headers };
}

function streamReply(
  status: number,
  contentType: string,
  headers: Record<string, string>,
  prefix: Uint8Array[],
  reader: ReadableStreamDefaultReader<Uint8Array>,
  inFlight: Promise<ReadableStreamReadResult<Uint8Array>> | undefined,
): Reply {
  let pending = inFlight;
  return {
    kind: "stream",
    status,
    contentType,
    headers,
    async next() {
      const first = prefix.shift();
      if (first !== undefined) return first;
      const read = pending ?? reader.read();
      pending = undefined;
      const got = await read;
      return got.done ? null : got.value;
    },
    cancel() {
      reader.cancel().catch(() => undefined);
    },
  };
}
