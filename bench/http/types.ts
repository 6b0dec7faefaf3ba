// The HTTP surface the benchmark needs: one request/response call, optional streaming of body
// chunks, and requests serialised once so hot loops do not rebuild them.

/** A request serialised once; `wire` is the exact HTTP/1.1 bytes the raw client writes. */
export interface PreparedRequest {
  readonly method: string;
  readonly path: string;
  readonly body: Buffer | null;
  readonly wire: Buffer;
}

export interface BenchResponse {
  readonly status: number;
  /** Header names lower-cased; repeated headers keep the last value. */
  readonly headers: Readonly<Record<string, string>>;
  /** Whole body (empty when the request asked to discard it). */
  readonly body: Buffer;
}

export interface RequestOptions {
  /** Called synchronously for every decoded body chunk as it arrives (chunked framing removed). */
  readonly onChunk?: (chunk: Buffer) => void;
  /** Do not keep the body (the hot `/ok` loop only needs the status). */
  readonly discardBody?: boolean;
}

export interface HttpClient {
  prepare(method: string, path: string, body?: unknown): PreparedRequest;
  request(req: PreparedRequest, opts?: RequestOptions): Promise<BenchResponse>;
  /** Close every socket; in-flight requests are rejected with `reason` (default: code "closed"). */
  close(reason?: TransportError): void;
}

export type ClientKind = "raw" | "node";

export interface ClientConfig {
  readonly baseUrl: URL;
  /** A request fails when the server sends nothing for this long. */
  readonly idleTimeoutMs: number;
}

/** Transport failure (reset, refused, timeout, malformed response); `code` is a short stable tag. */
export class TransportError extends Error {
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.name = "TransportError";
    this.code = code;
  }
}

/** Builds the PreparedRequest both clients share; JSON bodies get a JSON content type. */
export function prepareRequest(baseUrl: URL, method: string, path: string, body?: unknown): PreparedRequest {
  const prefix = baseUrl.pathname.endsWith("/") ? baseUrl.pathname.slice(0, -1) : baseUrl.pathname;
  const fullPath = prefix + path;
  const bodyBuf = body === undefined ? null : Buffer.from(typeof body === "string" ? body : JSON.stringify(body), "utf8");
  let head = `${method} ${fullPath} HTTP/1.1\r\nHost: ${baseUrl.host}\r\nUser-Agent: troupe-bench\r\nAccept: */*\r\n`;
  if (bodyBuf !== null) {
    head += `Content-Type: application/json\r\nContent-Length: ${bodyBuf.length}\r\n`;
  } else if (method !== "GET" && method !== "HEAD" && method !== "DELETE") {
    head += "Content-Length: 0\r\n";
  }
  head += "\r\n";
  const headBuf = Buffer.from(head, "latin1");
  const wire = bodyBuf === null ? headBuf : Buffer.concat([headBuf, bodyBuf]);
  return { method, path: fullPath, body: bodyBuf, wire };
}
