// Delivers one webhook payload: POST with the configured headers, bounded timeouts, a few retries
// on transient failures. Never throws — a failed webhook is logged and does not affect the run.
import * as http from "node:http";
import * as https from "node:https";
import type { LookupFunction } from "node:net";
import { guardedLookup, REFUSED_ADDRESS, refusedHost, type AddressRule } from "./address-check.ts";
import { stampSentAt, type WebhookPayload } from "./payload.ts";
import { isRelativeWebhookUrl, urlForLog } from "./url-policy.ts";

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
  /** Attempts in total, first one included. Default 3. */
  maxAttempts?: number;
  /** First retry waits about this long, doubling each time, with jitter. Default 500. */
  backoffBaseMs?: number;
  /** A 429/503 `Retry-After` up to this long is honoured; longer ones end the retries. Default 10000. */
  maxRetryAfterMs?: number;
  /** Delivers relative URLs; without it they are logged as undeliverable. */
  dispatch?: InProcessDispatch;
  /**
   * Which addresses absolute URLs may connect to (address-check.ts): names are resolved and
   * checked at connect time, IP literals before the request. Default: any address.
   */
  addressRule?: AddressRule;
  /** Default: console.warn with a `[troupe webhook]` prefix. */
  log?: (message: string) => void;
}

export interface ResolvedWebhookSenderOptions {
  headers: Readonly<Record<string, string>>;
  connectTimeoutMs: number;
  requestTimeoutMs: number;
  maxAttempts: number;
  backoffBaseMs: number;
  maxRetryAfterMs: number;
  dispatch: InProcessDispatch | null;
  addressRule: AddressRule | null;
  log: (message: string) => void;
}

/** Outcome of one delivery, for logs and tests. `status` is the last HTTP status seen, if any. */
export interface DeliveryResult {
  delivered: boolean;
  attempts: number;
  status?: number;
  error?: string;
}

interface AttemptResult {
  status?: number;
  retryAfterMs?: number;
  error?: string;
  /** not worth another attempt (a refused address) */
  final?: boolean;
}

export function resolveSenderOptions(o: WebhookSenderOptions = {}): ResolvedWebhookSenderOptions {
  return {
    headers: o.headers ?? {},
    connectTimeoutMs: o.connectTimeoutMs ?? 5_000,
    requestTimeoutMs: o.requestTimeoutMs ?? 30_000,
    maxAttempts: Math.max(1, o.maxAttempts ?? 3),
    backoffBaseMs: o.backoffBaseMs ?? 500,
    maxRetryAfterMs: o.maxRetryAfterMs ?? 10_000,
    dispatch: o.dispatch ?? null,
    addressRule: o.addressRule ?? null,
    log: o.log ?? ((m) => console.warn(`[troupe webhook] ${m}`)),
  };
}

const isRetryableStatus = (s: number) => s === 429 || s >= 500;

export class WebhookSender {
  readonly options: ResolvedWebhookSenderOptions;
  private readonly closing = new AbortController();
  private readonly lookup: LookupFunction | undefined;

  constructor(options: WebhookSenderOptions = {}) {
    this.options = resolveSenderOptions(options);
    this.lookup = this.options.addressRule ? guardedLookup(this.options.addressRule) : undefined;
  }

  /** Aborts in-flight attempts and pending back-off waits; later sends fail immediately. */
  close(): void {
    this.closing.abort();
  }

  async send(url: string, payload: WebhookPayload): Promise<DeliveryResult> {
    const o = this.options;
    const relative = isRelativeWebhookUrl(url);
    if (relative && !o.dispatch) {
      o.log(`failed to call webhook ${urlForLog(url)} for run ${payload.run_id}: relative URLs cannot be delivered (no in-process dispatch)`);
      return { delivered: false, attempts: 0, error: "no in-process dispatch" };
    }
    const refused = relative || !o.addressRule ? null : refusedLiteral(url, o.addressRule);
    if (refused) return this.fail(url, payload, 0, { error: refused });
    let last: AttemptResult = {};
    for (let attempt = 1; attempt <= o.maxAttempts; attempt++) {
      if (this.closing.signal.aborted) return this.fail(url, payload, attempt - 1, { ...last, error: "sender closed" });
      const body = JSON.stringify(stampSentAt(payload, new Date().toISOString()));
      last = relative ? await this.dispatchOnce(url, body) : await this.postOnce(url, body);
      if (last.status !== undefined && !isRetryableStatus(last.status)) {
        return { delivered: true, attempts: attempt, status: last.status };
      }
      if (last.final) return this.fail(url, payload, attempt, last);
      if (attempt === o.maxAttempts) break;
      let waitMs = backoffMs(o.backoffBaseMs, attempt);
      if (last.retryAfterMs !== undefined) {
        if (last.retryAfterMs > o.maxRetryAfterMs) {
          return this.fail(url, payload, attempt, { ...last, error: `Retry-After ${Math.ceil(last.retryAfterMs / 1000)} s is too long` });
        }
        waitMs = Math.max(waitMs, last.retryAfterMs);
      }
      await sleep(waitMs, this.closing.signal);
    }
    return this.fail(url, payload, o.maxAttempts, last);
  }

  private fail(url: string, payload: WebhookPayload, attempts: number, r: AttemptResult): DeliveryResult {
    const why = r.error ?? `HTTP ${r.status}`;
    this.options.log(`failed to call webhook ${urlForLog(url)} for run ${payload.run_id} after ${attempts} attempt(s): ${why}`);
    return { delivered: false, attempts, status: r.status, error: why };
  }

  private requestHeaders(body: string): Record<string, string> {
    return { ...this.options.headers, "content-type": "application/json", "content-length": String(Buffer.byteLength(body)) };
  }

  private async dispatchOnce(path: string, body: string): Promise<AttemptResult> {
    const o = this.options;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<AttemptResult>((resolve) => {
      timer = setTimeout(() => resolve({ error: `timed out after ${o.requestTimeoutMs} ms` }), o.requestTimeoutMs);
    });
    const call = o.dispatch!("POST", path, this.requestHeaders(body), body).then(
      (r): AttemptResult => ({ status: r.status, retryAfterMs: parseRetryAfter(r.headers?.["retry-after"]) }),
      (err: unknown): AttemptResult => ({ error: `in-process dispatch failed: ${(err as Error)?.message ?? String(err)}` }),
    );
    try {
      return await Promise.race([call, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  private postOnce(url: string, body: string): Promise<AttemptResult> {
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
        req = mod.request(target, { method: "POST", headers: this.requestHeaders(body), signal: this.closing.signal, lookup: this.lookup });
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

/** Exponential back-off with "equal jitter": between half and all of base·2^(attempt-1). */
export function backoffMs(baseMs: number, attempt: number): number {
  const full = baseMs * 2 ** (attempt - 1);
  return Math.round(full / 2 + Math.random() * (full / 2));
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

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}
