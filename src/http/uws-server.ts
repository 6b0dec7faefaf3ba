// The socket front end: uWebSockets.js accepts connections on the main thread, collects the
// body, hands a RawRequest to the Dispatcher and writes the Reply back (corked, abort-safe).
import { trace } from "../util/trace.ts";
import { createRequire } from "node:module";
import type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket, us_socket_context_t } from "uWebSockets.js";
import type { BodyArrival, Dispatcher, RawRequest } from "./dispatch.ts";
import { BodyReader, frontEndError, tooLarge } from "./body-reader.ts";
import { upgradeRequiredReply, statusLine } from "./errors.ts";
import { jsonReplyText, type Headers, type Reply, type WebSocketReply, type WsSession } from "./types.ts";
import { ResponseWriter, SSE_MAX_QUEUED } from "./response-writer.ts";

type Uws = typeof import("uWebSockets.js");

/**
 * The trufflesuite build silently falls back to a pure-JS server when its native binary does not
 * load. That server is an order of magnitude slower, so we refuse to start on it.
 */
export function loadNativeUws(): Uws {
  const require = createRequire(import.meta.url);
  const uws = require("uWebSockets.js") as Uws & { getParts?: unknown };
  if (typeof uws.getParts !== "function" || Object.keys(uws).length < 20) {
    throw new Error(
      "uWebSockets.js native binary did not load (the package fell back to its slow pure-JS server). " +
        "Troupe refuses to start on the fallback: use Node 20 on glibc >= 2.36 (linux x64/arm64) and unset UWS_USE_FALLBACK.",
    );
  }
  return uws;
}

export interface ListeningServer {
  port: number;
  host: string;
  close(): void;
}

export function listen(dispatcher: Dispatcher, host: string, port: number): Promise<ListeningServer> {
  const uws = loadNativeUws();
  const app: TemplatedApp = uws.App();
  // Upgrade requests go through the same dispatcher (guards, routes); a route answers a
  // WebSocketReply to accept. Requests without an upgrade header fall through to app.any.
  app.ws<WsData>("/*", {
    maxPayloadLength: dispatcher.opts.maxBodyBytes,
    maxBackpressure: 64 * 1024 * 1024,
    // a client that cannot keep up is disconnected rather than silently missing events: it
    // reconnects and subscribes again (replayed while the thread's protocol session exists;
    // docs/THREAD_PROTOCOL.md says when a session is dropped)
    closeOnBackpressureLimit: 1,
    idleTimeout: 120,
    sendPingsAutomatically: true,
    upgrade: (res, req, context) => onUpgrade(dispatcher, res, req, context),
    open: (ws) => {
      const data = ws.getUserData();
      let closed = false;
      data.session = data.reply.open({
        send: (text) => !closed && ws.send(text, false) !== 2,
        close: (code, reason) => {
          if (closed) return;
          closed = true;
          ws.end(code, reason.slice(0, 120));
        },
      });
      data.markClosed = () => (closed = true);
    },
    message: (ws, message) => ws.getUserData().session?.onMessage(Buffer.from(message).toString("utf8")),
    close: (ws) => {
      const data = ws.getUserData();
      data.markClosed?.();
      data.session?.onClose();
    },
  });
  app.any("/*", (res, req) => onRequest(dispatcher, res, req));
  return new Promise((resolve, reject) => {
    app.listen(host, port, (socket: us_listen_socket | false) => {
      if (!socket) return reject(new Error(`cannot listen on ${host}:${port} (port in use or not permitted)`));
      resolve({
        port: uws.us_socket_local_port(socket),
        host,
        close: () => uws.us_listen_socket_close(socket),
      });
    });
  });
}

interface WsData {
  reply: WebSocketReply;
  session?: WsSession;
  markClosed?: () => void;
}

/**
 * A WebSocket handshake: dispatched like any GET. A WebSocketReply completes the upgrade; any other
 * reply is a refusal, sent (as the SDK expects) by accepting and closing at once with 4000 + its
 * status and the detail as reason, so the client learns why instead of a bare failed handshake.
 */
function onUpgrade(dispatcher: Dispatcher, res: HttpResponse, req: HttpRequest, context: us_socket_context_t): void {
  const headers: Record<string, string> = {};
  req.forEach((k, v) => {
    headers[k] = v;
  });
  const key = headers["sec-websocket-key"] ?? "";
  const protocol = headers["sec-websocket-protocol"] ?? "";
  const extensions = headers["sec-websocket-extensions"] ?? "";
  const state: ResState = { aborted: false, done: false, onAbort: [] };
  const raw = new UwsRawRequest("GET", req.getUrl(), req.getQuery() ?? "", headers, Buffer.from(res.getRemoteAddressAsText()).toString(), state);
  res.onAborted(() => {
    state.aborted = true;
    raw.abortSignal();
  });
  void dispatcher.dispatch(raw).then((reply) => {
    if (state.aborted) return;
    const accepted: WebSocketReply =
      reply.kind === "websocket"
        ? reply
        : {
            kind: "websocket",
            open: (conn) => {
              const status = "status" in reply ? reply.status : 500;
              const detail = reply.kind === "json" ? (reply.body as { detail?: unknown } | undefined)?.detail : undefined;
              conn.close(4000 + status, typeof detail === "string" ? detail : statusLine(status));
              return { onMessage: () => undefined, onClose: () => undefined };
            },
          };
    res.cork(() => res.upgrade<WsData>({ reply: accepted }, key, protocol, extensions, context));
  });
}

/**
 * Longest request target (path and query) answered; a longer one that reaches us gets 414. uWS
 * itself gives up on a request head (request line and headers) that is incomplete at 4 KiB of
 * buffered bytes, and closes the connection: a head arriving in one read may be larger.
 */
export const MAX_URL_CHARS = 8 * 1024;

const contentLengthOf = (headers: Record<string, string>): number => {
  const declared = headers["content-length"];
  return declared === undefined ? 0 : Number(declared);
};

function onRequest(dispatcher: Dispatcher, res: HttpResponse, req: HttpRequest): void {
  // HttpRequest is only valid synchronously: copy everything now.
  const method = req.getCaseSensitiveMethod().toUpperCase();
  const path = req.getUrl();
  const query = req.getQuery() ?? "";
  const headers: Record<string, string> = {};
  let conflictingLength = false;
  req.forEach((k, v) => {
    // uWS frames the body by the first Content-Length; a proxy may use another one (smuggling)
    if (k === "content-length" && headers[k] !== undefined && headers[k] !== v) conflictingLength = true;
    headers[k] = v;
  });
  trace?.(`http.in ${method} ${path}`);
  const state: ResState = { aborted: false, done: false, onAbort: [] };
  const raw = new UwsRawRequest(method, path, query, headers, Buffer.from(res.getRemoteAddressAsText()).toString(), state);
  // uWS keeps one abort handler per response: fan out from here.
  res.onAborted(() => {
    state.aborted = true;
    raw.abortSignal();
    for (const fn of state.onAbort) fn();
  });

  const common = dispatcher.opts.commonHeaders;
  if (path.length + query.length > MAX_URL_CHARS) {
    const detail = `Request URL is longer than ${MAX_URL_CHARS} characters`;
    writeReply(res, state, frontEndError("URI_TOO_LONG", detail, common), false);
    return;
  }
  if (conflictingLength) {
    writeReply(res, state, frontEndError("BAD_REQUEST", "Conflicting Content-Length headers", common), true);
    return;
  }
  const contentLength = contentLengthOf(headers);
  const chunked = headers["transfer-encoding"] !== undefined;
  if (contentLength === 0 && !chunked) {
    void handle(dispatcher, raw, res, state, undefined);
    return;
  }
  const maxBody = dispatcher.opts.maxBodyBytes;
  if (contentLength > maxBody) {
    // refused from the header, at once (also behind `Expect: 100-continue`, which uWS has answered
    // with 100 Continue before we see the request: the 413 follows it in the same write). With no
    // data handler uWS drops the body as it comes, so a client still sending can read the 413.
    writeReply(res, state, tooLarge(maxBody, common), false);
    return;
  }
  // The body is read only once the guards admit the request (BodyReader); the dispatcher runs them now.
  const reader = new BodyReader(res, raw, maxBody, common);
  raw.bodyArrival = reader;
  state.onAbort.push(() => reader.abort());
  res.onData(reader.onData);
  void handle(dispatcher, raw, res, state, reader);
}

interface ResState {
  aborted: boolean;
  done: boolean;
  onAbort: (() => void)[];
}

/**
 * A class, not an object literal with `get signal()`: a literal with an accessor gets a fresh
 * getter closure and hidden class per request, which V8 keeps in old space (measured under /ok
 * load: ~40 MB/s promoted, 7-12 ms scavenges). The AbortController is created only if a handler
 * asks for the signal (most never do): making one per request cost ~6% of /ok throughput.
 */
class UwsRawRequest implements RawRequest {
  body: Buffer | null = null;
  bodyArrival: BodyArrival | undefined = undefined;
  private abort: AbortController | undefined;

  constructor(
    readonly method: string,
    readonly path: string,
    readonly query: string,
    readonly headers: Record<string, string>,
    readonly clientIp: string,
    private readonly state: ResState,
  ) {}

  get signal(): AbortSignal {
    if (!this.abort) {
      this.abort = new AbortController();
      if (this.state.aborted) this.abort.abort();
    }
    return this.abort.signal;
  }

  /** the client went away: abort the signal if a handler took it */
  abortSignal(): void {
    this.abort?.abort();
  }
}

async function handle(dispatcher: Dispatcher, raw: RawRequest, res: HttpResponse, state: ResState, body: BodyReader | undefined): Promise<void> {
  const reply = await dispatcher.dispatch(raw);
  if (state.aborted) {
    if (reply.kind === "deferred") reply.onAbort?.();
    return;
  }
  // answered before the body was read (a refusal from the headers): none of it is kept
  if (body && !body.finished) body.discard();
  if (raw.method === "HEAD") writeHeadReply(res, state, reply);
  else writeReply(res, state, reply, false);
}

/**
 * A HEAD request (routed to the GET handler) gets that reply's status and headers and no body: a
 * body would be read by a keep-alive client as the start of its next response. A stream is not
 * started; a deferred body is left to settle unread.
 */
function writeHeadReply(res: HttpResponse, state: ResState, reply: Reply): void {
  state.done = true;
  let status = 200;
  let contentType: string | null = null;
  let length: number | undefined;
  switch (reply.kind) {
    case "json":
      status = reply.status;
      contentType = "application/json";
      length = Buffer.byteLength(jsonReplyText(reply));
      break;
    case "text":
      status = reply.status;
      contentType = reply.contentType;
      length = typeof reply.body === "string" ? Buffer.byteLength(reply.body) : reply.body.byteLength;
      break;
    case "empty":
      status = reply.status;
      break;
    case "sse":
      contentType = "text/event-stream";
      break;
    case "deferred":
      contentType = reply.contentType;
      reply.body.catch(() => undefined);
      break;
    case "stream":
      status = reply.status;
      contentType = reply.contentType;
      reply.cancel();
      break;
    case "websocket":
      return writeHeadReply(res, state, upgradeRequiredReply());
  }
  res.cork(() => {
    writeHead(res, status, contentType, reply.headers);
    // the length as a plain header: endWithoutBody(length) leaves uWS waiting for that many bytes
    // (the connection's next response never comes)
    if (length !== undefined) res.writeHeader("content-length", String(length));
    res.endWithoutBody();
  });
}

/**
 * The status line and every header in one call into uWS: a call costs the HTTP thread ~0.7 µs
 * (measured under /ok load, 5 calls were 15-20% of its CPU per request), far more than joining
 * the lines. uWS writes the status text and a `\r\n` verbatim, so the header lines ride after it.
 */
function writeHead(res: HttpResponse, status: number, contentType: string | null, headers: Headers | undefined): void {
  let head = statusLine(status);
  if (contentType) head += "\r\ncontent-type: " + contentType;
  if (headers) for (const k in headers) head += "\r\n" + k + ": " + headers[k];
  res.writeStatus(head);
}

function writeReply(res: HttpResponse, state: ResState, reply: Reply, closeConnection: boolean): void {
  if (state.done || state.aborted) return;
  switch (reply.kind) {
    case "json": {
      const text = jsonReplyText(reply);
      state.done = true;
      res.cork(() => {
        writeHead(res, reply.status, "application/json", reply.headers);
        res.end(text, closeConnection);
      });
      trace?.(`http.out json ${reply.status}`);
      return;
    }
    case "text":
      state.done = true;
      res.cork(() => {
        writeHead(res, reply.status, reply.contentType, reply.headers);
        res.end(reply.body, closeConnection);
      });
      return;
    case "empty":
      state.done = true;
      res.cork(() => {
        writeHead(res, reply.status, null, reply.headers);
        res.endWithoutBody(0, closeConnection);
      });
      return;
    case "sse":
      return writeSse(res, state, reply);
    case "deferred":
      return writeDeferred(res, state, reply);
    case "stream":
      return void writeStream(res, state, reply);
    case "websocket":
      // only an upgrade request (onUpgrade) can be answered with a WebSocket
      return writeReply(res, state, upgradeRequiredReply(), closeConnection);
  }
}

function writeSse(res: HttpResponse, state: ResState, reply: Extract<Reply, { kind: "sse" }>): void {
  res.cork(() => writeHead(res, 200, "text/event-stream", { "cache-control": "no-cache", connection: "keep-alive", ...reply.headers }));
  // Frames wait (bounded) while the client is slow; one too far behind is dropped (response-writer.ts)
  const out = new ResponseWriter(res, { maxQueued: SSE_MAX_QUEUED, filler: ":\n" }, () => state.aborted);
  // uWS sends the head only with body bytes: an SSE comment opens the stream for the client now
  // (a join on a queued run may wait long for its first event); SSE readers skip comments.
  out.write(":\n\n");
  let ended = false;
  const heartbeat =
    reply.heartbeatMs === undefined
      ? undefined
      : setInterval(() => {
          if (!ended && out.idle) out.write(": heartbeat\n\n"); // a reader behind needs no keep-alive
        }, reply.heartbeatMs);
  heartbeat?.unref();
  const cleanup = reply.start({
    write(frame) {
      if (ended) return false;
      return out.write(frame);
    },
    end() {
      if (ended) return;
      ended = true;
      if (heartbeat) clearInterval(heartbeat);
      if (state.aborted) return;
      state.done = true;
      out.end();
    },
  });
  state.onAbort.push(() => {
    out.abort();
    if (heartbeat) clearInterval(heartbeat);
    if (!ended) cleanup?.();
  });
}

/**
 * A body produced over time (a custom route's stream): the next chunk is pulled only once the
 * last one went out, so a slow client slows the producer instead of filling the server's memory.
 */
async function writeStream(res: HttpResponse, state: ResState, reply: Extract<Reply, { kind: "stream" }>): Promise<void> {
  res.cork(() => writeHead(res, reply.status, reply.contentType, reply.headers));
  // byte-exact bodies: no filler; at most the chunk being sent waits, so the bound never drops
  const out = new ResponseWriter(res, { maxQueued: Number.POSITIVE_INFINITY, filler: null }, () => state.aborted);
  state.onAbort.push(() => {
    out.abort();
    reply.cancel();
  });
  try {
    for (;;) {
      await out.ready();
      if (out.isClosed) return;
      const chunk = await reply.next();
      if (chunk === null) break;
      if (chunk.byteLength > 0 && !out.write(chunk)) return;
    }
  } catch (err) {
    // the producer failed after the status went out: a truncated body, as a closed connection
    console.warn(`[troupe] streamed response failed: ${err instanceof Error ? err.message : String(err)}`);
    if (!state.aborted) res.close();
    return;
  }
  state.done = true;
  out.end();
}

function writeDeferred(res: HttpResponse, state: ResState, reply: Extract<Reply, { kind: "deferred" }>): void {
  res.cork(() => {
    writeHead(res, 200, reply.contentType, reply.headers);
    res.write("");
  });
  trace?.("http.head deferred");
  const timer = setInterval(() => {
    if (!state.aborted && !state.done) res.cork(() => res.write("\n"));
  }, reply.heartbeatMs);
  state.onAbort.push(() => {
    clearInterval(timer);
    reply.onAbort?.();
  });
  reply.body.then(
    (text) => {
      clearInterval(timer);
      if (state.aborted || state.done) return;
      state.done = true;
      res.cork(() => res.end(text));
      trace?.("http.out deferred");
    },
    (err: unknown) => {
      clearInterval(timer);
      if (state.aborted || state.done) return;
      state.done = true;
      const message = err instanceof Error ? err.message : String(err);
      res.cork(() => res.end(JSON.stringify({ __error__: { error: "Error", message } })));
    },
  );
}
