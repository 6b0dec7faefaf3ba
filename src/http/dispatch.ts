// Request pipeline independent of the socket library: guards (rate limit, auth) → route match →
// param/query/body validation → handler → error mapping. Validators are compiled at registration.
import { TroupeError, validationError } from "../errors.ts";
import { componentLog } from "../log/logger.ts";
import { canonicalUuid, isUuid } from "../util/ids.ts";
import { errorReply } from "./errors.ts";
import { requestIdOf } from "./request-id.ts";
import { Router } from "./router.ts";
import type { Headers, Reply, RequestContext, RouteDef } from "./types.ts";
import { compileBody, compileQuery, type Validator } from "./validation.ts";
import { MAX_KEY_CHARS as MAX_PATH_PARAM_CHARS } from "./schemas/common.ts";

export interface RawRequest {
  method: string;
  path: string;
  query: string;
  headers: Record<string, string>;
  body: Buffer | null;
  clientIp: string;
  signal: AbortSignal;
  /**
   * A body still arriving (socket front end): `body` is null until `complete()` resolves. Guards
   * run before it is read; the dispatcher completes it before the first guard that reads bodies
   * and before the route, so a refusal from the headers (401, 403, 429) keeps none of it.
   */
  bodyArrival?: BodyArrival;
}

export interface BodyArrival {
  /** read the whole body into `body`; resolves with the reply refusing it instead (413), if any */
  complete(): Promise<Reply | undefined>;
}

/**
 * A guard may answer the request itself (429, 401 …) and may add headers to whatever reply goes out.
 * A guard that answers synchronously runs while the socket front end still holds the request's
 * headers, before its body is read. `readsBody`: the guard needs `body` (it is read first).
 */
export type Guard = ((req: RawRequest, ctx: GuardContext) => Reply | undefined | Promise<Reply | undefined>) & { readsBody?: boolean };
export interface GuardContext {
  responseHeaders: Headers;
  auth?: RequestContext["auth"];
  /** this request's id (its X-Request-Id, or one made up): log lines about it carry it */
  readonly requestId: string;
  /**
   * The route template the request is counted under in /metrics and the log; set by the router,
   * or by a guard answering from routes of its own (http.app). Unset: matched once more at the end.
   */
  route?: string;
  /**
   * The reply the rest of the pipeline (later guards, then the route) gives this request, errors
   * mapped to their replies: for a guard that wraps the built-in routes (http.app middleware).
   */
  proceed(): Promise<Reply>;
}

/** One request's guard state; a class so proceed() costs no closure per request. */
class GuardCall implements GuardContext {
  readonly responseHeaders: Headers = {};
  auth?: RequestContext["auth"];
  route?: string;
  /** index of the guard running now */
  guard = 0;

  constructor(
    private readonly dispatcher: Dispatcher,
    private readonly req: RawRequest,
    readonly requestId: string,
  ) {}

  proceed(): Promise<Reply> {
    return this.dispatcher.runFrom(this.req, this, this.guard + 1).catch((err: unknown) => failureReply(this.req, this, err));
  }
}

const log = componentLog("http");

function failureReply(req: RawRequest, gctx: GuardCall, err: unknown): Reply {
  if (!(err instanceof TroupeError)) log.error("request failed", { req_id: gctx.requestId, method: req.method, path: req.path, err });
  return errorReply(err);
}

/** Sees every request once its reply is decided (metrics, the request log). */
export interface RequestObserver {
  /**
   * `durationMs`: from the request's arrival at the dispatcher to its reply (a stream's head);
   * `nowMs`: performance.now() at the reply. Positional: no object per request.
   */
  answered(req: RawRequest, requestId: string, route: string, status: number, durationMs: number, nowMs: number, reply: Reply): void;
}

/** The status a reply goes out with (streams and deferred bodies: 200 once their head is sent). */
function statusOf(reply: Reply): number {
  switch (reply.kind) {
    case "json":
    case "text":
    case "empty":
      return reply.status;
    case "websocket":
      return 101;
    default:
      return 200;
  }
}

interface CompiledRoute {
  def: RouteDef;
  body?: Validator;
  query?: Validator;
}

export interface DispatcherOptions {
  maxBodyBytes: number;
  guards?: Guard[];
  /** headers added to every reply (CORS) */
  commonHeaders?: Headers;
  observer?: RequestObserver;
}

/** The route label of requests no route matches: one label, so scanners cannot mint series. */
export const UNMATCHED_ROUTE = "unmatched";

export class Dispatcher {
  private readonly router = new Router();
  private readonly compiled = new Map<RouteDef, CompiledRoute>();
  private readonly guards: Guard[];

  constructor(readonly opts: DispatcherOptions) {
    this.guards = opts.guards ?? [];
  }

  get routes(): readonly RouteDef[] {
    return this.router.routes;
  }

  add(...defs: RouteDef[]): void {
    for (const def of defs) {
      this.router.add(def);
      this.compiled.set(def, {
        def,
        body: def.body ? compileBody(def.body) : undefined,
        query: def.query ? compileQuery(def.query) : undefined,
      });
    }
  }

  addGuard(g: Guard): void {
    this.guards.push(g);
  }

  async dispatch(req: RawRequest): Promise<Reply> {
    const observer = this.opts.observer;
    const started = observer === undefined ? 0 : performance.now();
    const gctx = new GuardCall(this, req, requestIdOf(req.headers["x-request-id"]));
    let reply: Reply;
    try {
      reply = await this.runFrom(req, gctx, 0);
    } catch (err) {
      reply = failureReply(req, gctx, err);
    }
    // Merge without spreading (this runs on every request): the reply's own headers win, then
    // the guards' (rate-limit budget), then the common ones (CORS).
    const headers = reply.headers ?? (reply.headers = {});
    mergeMissing(headers, gctx.responseHeaders);
    if (this.opts.commonHeaders) mergeMissing(headers, this.opts.commonHeaders);
    headers["x-request-id"] ??= gctx.requestId;
    if (observer !== undefined) {
      const now = performance.now();
      observer.answered(req, gctx.requestId, gctx.route ?? this.routeOf(req), statusOf(reply), now - started, now, reply);
    }
    return reply;
  }

  /** The template of the route a request names, for a request answered before routing (a guard's reply). */
  private routeOf(req: RawRequest): string {
    const m = this.router.match(req.method, req.path);
    return "route" in m ? m.route.path : UNMATCHED_ROUTE;
  }

  /** Guards from index `first` on, then the route (GuardCall.proceed continues from a guard). */
  async runFrom(req: RawRequest, gctx: GuardCall, first: number): Promise<Reply> {
    for (let i = first; i < this.guards.length; i++) {
      gctx.guard = i;
      const guard = this.guards[i];
      if (guard.readsBody && req.bodyArrival) {
        const refused = await req.bodyArrival.complete();
        if (refused) return refused;
      }
      // not awaited unless it is a promise: guards deciding from headers finish before the body is read
      const answer = guard(req, gctx);
      const early = answer instanceof Promise ? await answer : answer;
      if (early) return early;
    }
    if (req.bodyArrival) {
      const refused = await req.bodyArrival.complete();
      if (refused) return refused;
    }
    const m = this.router.match(req.method, req.path);
    if ("notFound" in m) {
      gctx.route = UNMATCHED_ROUTE;
      throw new TroupeError("NOT_FOUND", `Not Found: ${req.method} ${req.path}`);
    }
    if ("methodNotAllowed" in m) {
      gctx.route = UNMATCHED_ROUTE;
      throw new TroupeError("METHOD_NOT_ALLOWED", `Method ${req.method} not allowed on ${req.path}`, { headers: { allow: m.methodNotAllowed.join(", ") } });
    }
    const route = this.compiled.get(m.route)!;
    const def = route.def;
    gctx.route = def.path;

    for (const name in m.params) {
      // a path id longer than any key names nothing (and LMDB would refuse it as a key)
      if (m.params[name].length > MAX_PATH_PARAM_CHARS && def.params?.[name] !== "uuid") {
        throw new TroupeError("NOT_FOUND", `Not Found: ${name} is longer than ${MAX_PATH_PARAM_CHARS} characters`);
      }
    }
    if (def.params) {
      for (const [name, kind] of Object.entries(def.params)) {
        if (kind !== "uuid") continue;
        const value = m.params[name] ?? "";
        if (!isUuid(value)) throw validationError([{ loc: ["path", name], msg: "Input should be a valid UUID", type: "uuid_parsing" }]);
        m.params[name] = canonicalUuid(value);
      }
    }

    const rawQuery = new URLSearchParams(req.query);
    let query: Record<string, unknown> = {};
    if (route.query) {
      query = queryObject(rawQuery);
      const issues = route.query(query);
      if (issues) throw validationError(issues);
    }

    let body: unknown = undefined;
    if (def.body) {
      body = parseBody(req);
      if (body === undefined) {
        if (!def.bodyOptional) {
          throw validationError([{ loc: ["body"], msg: "Field required", type: "missing" }]);
        }
        body = {};
      }
      const issues = route.body!(body);
      if (issues) throw validationError(issues);
    }

    return def.handler(new RouteContext(req, m.params, query, rawQuery, body, gctx.auth));
  }
}

/** A class so `signal` is a prototype getter (see UwsRawRequest in uws-server.ts for why). */
class RouteContext implements RequestContext {
  readonly method: string;
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly clientIp: string;

  constructor(
    private readonly req: RawRequest,
    readonly params: Record<string, string>,
    readonly query: Record<string, unknown>,
    readonly rawQuery: URLSearchParams,
    readonly body: unknown,
    readonly auth: RequestContext["auth"],
  ) {
    this.method = req.method;
    this.path = req.path;
    this.headers = req.headers;
    this.clientIp = req.clientIp;
  }

  get signal(): AbortSignal {
    return this.req.signal;
  }
}

function mergeMissing(into: Headers, from: Headers): void {
  for (const k in from) if (into[k] === undefined) into[k] = from[k];
}

/** Repeated keys become arrays; single keys stay strings (ajv coerces per schema). */
function queryObject(q: URLSearchParams): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of q) {
    const prev = out[k];
    if (prev === undefined) out[k] = v;
    else if (Array.isArray(prev)) prev.push(v);
    else out[k] = [prev, v];
  }
  return out;
}

const JSON_TYPE = /^application\/([\w.+-]+\+)?json\b/i;

/**
 * Body rules (documented in README): empty body → absent; JSON or text/plain content types
 * (or none) are parsed as JSON; any other content type is refused with 415.
 */
export function parseBody(req: RawRequest): unknown {
  const buf = req.body;
  if (!buf || buf.length === 0) return undefined;
  const ct = req.headers["content-type"] ?? "";
  if (ct && !JSON_TYPE.test(ct) && !ct.toLowerCase().startsWith("text/plain")) {
    throw new TroupeError("UNSUPPORTED_MEDIA_TYPE", `Unsupported content type "${ct.split(";")[0]}": send application/json`);
  }
  const text = buf.toString("utf8");
  if (text.trim() === "") return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new TroupeError("MALFORMED_JSON", "Malformed JSON in request body");
  }
  if (buf.length > 2 * MAX_BODY_DEPTH && nestingDepth(buf) > MAX_BODY_DEPTH) {
    throw validationError([{ loc: ["body"], msg: `Input should nest at most ${MAX_BODY_DEPTH} levels of objects and arrays`, type: "too_deep" }]);
  }
  return parsed;
}

/**
 * Deepest nesting a body may have. Recursive code downstream (msgpackr packing records, LangGraph,
 * JSON walks) overflows its stack somewhere past ~1,000 levels, which would be a 500 after part of
 * the work was done; no real payload comes close.
 */
export const MAX_BODY_DEPTH = 512;

const OPEN_BRACE = 0x7b,
  OPEN_BRACKET = 0x5b,
  CLOSE_BRACE = 0x7d,
  CLOSE_BRACKET = 0x5d,
  QUOTE = 0x22,
  BACKSLASH = 0x5c;

/** Deepest object/array nesting of valid JSON text, from its bytes (strings skipped). */
function nestingDepth(json: Uint8Array): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < json.length; i++) {
    const c = json[i];
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) {
      inString = true;
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > deepest) deepest = depth;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      depth--;
    }
  }
  return deepest;
}
