// In-process requests through a Dispatcher, no socket: route tests (and in-process callers such as
// relative webhook URLs) get the status, headers and whole body text a client would read.
import type { Dispatcher, RawRequest } from "./dispatch.ts";
import { upgradeRequiredReply } from "./errors.ts";
import { jsonReplyText, type Headers, type Reply } from "./types.ts";

export interface InjectRequest {
  method?: string;
  /** path with an optional query string: "/threads/search?x=1" */
  url: string;
  headers?: Record<string, string>;
  /** an object is sent as JSON (content-type application/json unless given) */
  body?: string | Buffer | object;
  clientIp?: string;
  /** aborts the request as a client disconnect would (open streams end) */
  signal?: AbortSignal;
}

export interface InjectResponse {
  status: number;
  headers: Headers;
  /** the body as a client reads it: JSON text, SSE frames, a deferred body */
  text: string;
  /** the body parsed as JSON (undefined when it is not JSON) */
  json<T = unknown>(): T | undefined;
  /** the kind of reply the route gave */
  kind: Reply["kind"];
}

/** Dispatches one request and collects its whole reply (an SSE stream until the route ends it). */
export async function inject(dispatcher: Dispatcher, req: InjectRequest): Promise<InjectResponse> {
  const [path, query = ""] = req.url.split("?", 2) as [string, string?];
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(req.headers ?? {})) headers[k.toLowerCase()] = v;
  let body: Buffer | null = null;
  if (typeof req.body === "string") body = Buffer.from(req.body);
  else if (Buffer.isBuffer(req.body)) body = req.body;
  else if (req.body !== undefined) {
    body = Buffer.from(JSON.stringify(req.body));
    headers["content-type"] ??= "application/json";
  }
  const raw: RawRequest = {
    method: (req.method ?? "GET").toUpperCase(),
    path,
    query,
    headers,
    body,
    clientIp: req.clientIp ?? "127.0.0.1",
    signal: req.signal ?? new AbortController().signal,
  };
  const reply = await dispatcher.dispatch(raw);
  const { status, text } = await collect(reply, raw.signal);
  return {
    status,
    headers: reply.headers ?? {},
    text,
    kind: reply.kind,
    json<T>() {
      try {
        return JSON.parse(text) as T;
      } catch {
        return undefined;
      }
    },
  };
}

async function collect(reply: Reply, signal: AbortSignal): Promise<{ status: number; text: string }> {
  switch (reply.kind) {
    case "json":
      return { status: reply.status, text: jsonReplyText(reply) };
    case "text":
      return { status: reply.status, text: typeof reply.body === "string" ? reply.body : Buffer.from(reply.body).toString("utf8") };
    case "empty":
      return { status: reply.status, text: "" };
    case "deferred": {
      const body = await reply.body;
      return { status: 200, text: typeof body === "string" ? body : Buffer.from(body).toString("utf8") };
    }
    case "sse":
      return { status: 200, text: await collectSse(reply.start.bind(reply), signal) };
    case "stream": {
      const chunks: Uint8Array[] = [];
      for (let c = await reply.next(); c !== null; c = await reply.next()) chunks.push(c);
      return { status: reply.status, text: Buffer.concat(chunks).toString("utf8") };
    }
    case "websocket": {
      // a plain request to a WebSocket route: what the socket front end answers without an upgrade
      const refusal = upgradeRequiredReply();
      return { status: refusal.status, text: jsonReplyText(refusal) };
    }
  }
}

function collectSse(start: Extract<Reply, { kind: "sse" }>["start"], signal: AbortSignal): Promise<string> {
  return new Promise((resolve) => {
    let text = "";
    let open = true;
    let cleanup: (() => void) | void = undefined;
    const finish = () => {
      if (!open) return;
      open = false;
      resolve(text);
    };
    signal.addEventListener(
      "abort",
      () => {
        cleanup?.();
        finish();
      },
      { once: true },
    );
    cleanup = start({
      write(frame) {
        if (open) text += frame;
        return open;
      },
      end: finish,
    });
  });
}
