// One webhook delivery attempt: POST with the configured headers and bounded timeouts. Never
// throws — the outcome is returned for the outbox's retry schedule (deliverer.ts, retry-schedule.ts).
import * as http from "node:http";
import * as https from "node:https";
import type { LookupFunction } from "node:net";
import { guardedLookup, REFUSED_ADDRESS, refusedHost, type AddressRule } from "./address-check.ts";
import { isRelativeWebhookUrl } from "./url-policy.ts";
import type { AttemptResult } from "./retry-schedule.ts";

/** In-process delivery of relative URLs (`/path`) to the server's own router. */
export type InProcessDispatch = (
  method: "POST",
  path: string,
  headers: Record<string, string>,
  body: string,
) => Promise<{ status: number; headers?: Record<string, string> }>;

export interface WebhookSenderOptions {
  /** Static headers from `webhooks.headers` (templates already resolved). Default none. */
  headers?: Readonly<Record<string, string>>;
  /** TCP connect timeout per attempt. Default 5000. */
  connectTimeoutMs?: number;
  /** Whole-request timeout per attempt (connect + send + response headers). Default 30000. */
  requestTimeoutMs?: number;
  /** Delivers relative URLs; without it they cannot be delivered. */
  dispatch?: InProcessDispatch;
  /**
   * Which addresses absolute URLs may connect to (address-check.ts): names are resolved and
   * checked at connect time, IP literals before the request. Default: any address.
   */
  addressRule?: AddressRule;
}

export interface ResolvedWebhookSenderOptions {
  headers: Readonly<Record<string, string>>;
  connectTimeoutMs: number;
  requestTimeoutMs: number;
  dispatch: InProcessDispatch | null;
  addressRule: AddressRule | null;
}

export function resolveSenderOptions(o: WebhookSenderOptions = {}): ResolvedWebhookSenderOptions {
  return {
    headers: o.headers ?? {},
    connectTimeoutMs: o.connectTimeoutMs ?? 5_000,
    requestTimeoutMs: o.requestTimeoutMs ?? 30_000,
    dispatch: o.dispatch ?? null,
    addressRule: o.addressRule ?? null,
  };
}

export class WebhookSender {
  readonly options: ResolvedWebhookSenderOptions;
  private readonly closing = new AbortController();
  private readonly lookup: LookupFunction | undefined;

  constructor(options: WebhookSenderOptions = {}) {
    this.options = resolveSenderOptions(options);
    this.lookup = this.options.addressRule ? guardedLookup(this.options.addressRule) : undefined;
  }

  /** Aborts in-flight attempts; later attempts fail immediately. */
  close(): void {
    this.closing.abort();
  }

  /** One attempt to POST `body` (JSON) to `url`, with `headers` added to the static ones. */
  async attempt(url: string, body: string, headers: Readonly<Record<string, string>> = {}): Promise<AttemptResult> {
    if (this.closing.signal.aborted) return { error: "sender closed" };
    if (!isRelativeWebhookUrl(url)) {
      const refused = this.options.addressRule ? refusedLiteral(url, this.options.addressRule) : null;
      return refused ? { error: refused, final: true } : this.postOnce(url, body, headers);
    }
    if (!this.options.dispatch) return { error: "relative URLs cannot be delivered (no in-process dispatch)" };
    return this.dispatchOnce(url, body, headers);
  }

  private requestHeaders(body: string, extra: Readonly<Record<string, string>>): Record<string, string> {
    return { ...this.options.headers, ...extra, "content-type": "application/json", "content-length": String(Buffer.byteLength(body)) };
  }

  private async dispatchOnce(path: string, body: string, extra: Readonly<Record<string, string>>): Promise<AttemptResult> {
    const o = this.options;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<AttemptResult>((resolve) => {
      timer = setTimeout(() => resolve({ error: `timed out after ${o.requestTimeoutMs} ms` }), o.requestTimeoutMs);
    });
    const call = o.dispatch!("POST", path, this.requestHeaders(body, extra), body).then(
      (r): AttemptResult => ({ status: r.status, retryAfterMs: parseRetryAfter(r.headers?.["retry-after"]) }),
      (err: unknown): AttemptResult => ({ error: `in-process dispatch failed: ${(err as Error)?.message ?? String(err)}` }),
    );
    try {
      return await Promise.race([call, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  private postOnce(url: string, body: string, extra: Readonly<Record<string, string>>): Promise<AttemptResult> {
    const o = this.options;
    return new Promise<AttemptResult>((resolve) => {
      let settled = false;
      const settle = (r: AttemptResult) => {
        if (!settled) {
          settled = true;
          resolve(r);
        }
      };
      let req: http.ClientRequest;
      try {
        const target = new URL(url);
        const mod = target.protocol === "https:" ? https : http;
        req = mod.request(target, { method: "POST", headers: this.requestHeaders(body, extra), signal: this.closing.signal, lookup: this.lookup });
      } catch (err) {
        settle({ error: (err as Error).message });
        return;
      }
      // whole-attempt timer; after the status is known it only guards draining the body
      const requestTimer = setTimeout(() => {
        settle({ error: `timed out after ${o.requestTimeoutMs} ms` });
        req.destroy();
      }, o.requestTimeoutMs);
      let connectTimer: NodeJS.Timeout | undefined;
      req.on("socket", (socket) => {
        if (!socket.connecting) return;
        connectTimer = setTimeout(() => {
          settle({ error: `connect timed out after ${o.connectTimeoutMs} ms` });
          req.destroy();
        }, o.connectTimeoutMs);
        socket.once("connect", () => clearTimeout(connectTimer));
      });
      req.on("response", (res) => {
        clearTimeout(connectTimer);
        settle({ status: res.statusCode ?? 0, retryAfterMs: parseRetryAfter(res.headers["retry-after"]) });
        res.on("error", () => {});
        res.on("close", () => clearTimeout(requestTimer));
        res.resume(); // response body ignored
      });
      req.on("error", (err) => {
        clearTimeout(connectTimer);
        clearTimeout(requestTimer);
        const code = (err as NodeJS.ErrnoException).code;
        settle({ error: err.message || code || "network error", final: code === REFUSED_ADDRESS });
      });
      req.on("close", () => {
        clearTimeout(connectTimer);
        if (!settled) clearTimeout(requestTimer);
        settle({ error: "connection closed before a response" });
      });
      req.end(body);
    });
  }
}

/** Retry-After as delay-seconds or an HTTP date; undefined when absent or unparseable. */
export function parseRetryAfter(value: string | string[] | undefined, now = Date.now()): number | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (!v) return undefined;
  if (/^\s*\d+\s*$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** The reason an absolute URL's host is refused as it is written (an IP literal, localhost), if it is. */
function refusedLiteral(url: string, rule: AddressRule): string | null {
  try {
    return refusedHost(new URL(url).hostname, rule);
  } catch {
    return null; // unparseable: the request itself reports it
  }
}
