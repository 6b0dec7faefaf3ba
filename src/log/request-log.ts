// One log line per HTTP request (request id, route template, status, duration) up to a budget of
// lines per second; past it, requests are counted per route and status and summarized in one
// line a second, so a flood of requests never makes logging the server's main work.
// Server errors (5xx) are always logged one by one.
import { componentLog, type ComponentLog } from "./logger.ts";

export interface RequestLogEntry {
  requestId: string;
  method: string;
  /** route template (`/threads/:thread_id/runs`), or the label of unrouted requests */
  route: string;
  /** the path without its query string (which may carry credentials) */
  path: string;
  status: number;
  durationMs: number;
}

interface Tally {
  method: string;
  route: string;
  status: number;
  count: number;
  totalMs: number;
  maxMs: number;
}

const SUMMARY_EVERY_MS = 1_000;

export class RequestLog {
  private readonly log: ComponentLog;
  private windowStart = 0;
  private linesInWindow = 0;
  private readonly tallies = new Map<string, Map<string, Map<number, Tally>>>();
  private suppressed = 0;
  private timer: NodeJS.Timeout | undefined;

  /** `linesPerSecond`: individual lines per second before summarizing (0: always summarize) */
  constructor(private readonly linesPerSecond: number, log: ComponentLog = componentLog("http")) {
    this.log = log;
  }

  /** `nowMs`: a monotonic clock reading (performance.now()) the caller already has */
  record(e: RequestLogEntry, nowMs: number): void {
    if (e.status >= 500) return this.line(e, "error");
    if (!this.log.enabled("info")) return;
    if (nowMs - this.windowStart >= 1_000) {
      this.windowStart = nowMs;
      this.linesInWindow = 0;
    }
    if (this.linesInWindow < this.linesPerSecond) {
      this.linesInWindow++;
      return this.line(e, "info");
    }
    this.tally(e);
  }

  private line(e: RequestLogEntry, level: "info" | "error"): void {
    this.log[level]("request", {
      req_id: e.requestId, method: e.method, route: e.route, path: e.path, status: e.status, duration_ms: round(e.durationMs),
    });
  }

  private tally(e: RequestLogEntry): void {
    // route → method → status: no key string built per request
    let byMethod = this.tallies.get(e.route);
    if (byMethod === undefined) this.tallies.set(e.route, (byMethod = new Map()));
    let byStatus = byMethod.get(e.method);
    if (byStatus === undefined) byMethod.set(e.method, (byStatus = new Map()));
    let t = byStatus.get(e.status);
    if (t === undefined) byStatus.set(e.status, (t = { method: e.method, route: e.route, status: e.status, count: 0, totalMs: 0, maxMs: 0 }));
    t.count++;
    t.totalMs += e.durationMs;
    if (e.durationMs > t.maxMs) t.maxMs = e.durationMs;
    this.suppressed++;
    if (this.timer === undefined) {
      this.timer = setTimeout(() => this.flush(), SUMMARY_EVERY_MS);
      this.timer.unref();
    }
  }

  /** Writes the summary of the requests not logged one by one since the last summary. */
  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.suppressed === 0) return;
    const tallies = [...this.tallies.values()].flatMap((byMethod) => [...byMethod.values()].flatMap((byStatus) => [...byStatus.values()]));
    const routes = tallies.map((t) => ({
      method: t.method, route: t.route, status: t.status, count: t.count, avg_ms: round(t.totalMs / t.count), max_ms: round(t.maxMs),
    }));
    this.log.info("requests summary", { requests: this.suppressed, interval_ms: SUMMARY_EVERY_MS, routes });
    this.tallies.clear();
    this.suppressed = 0;
  }
}

const round = (ms: number): number => Math.round(ms * 1000) / 1000;
