// One log line per HTTP request (request id, route template, status, duration) up to a budget of
// lines per second; past it, requests are counted per route and status and summarized in one
// line a second, so a flood of requests never makes logging the server's main work.
// Server errors (5xx) are always logged one by one.
import { componentLog, type ComponentLog } from "./logger.ts";

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
  private windowStart = Number.NEGATIVE_INFINITY;
  private infoEnabled = true;
  private linesInWindow = 0;
  private readonly tallies = new Map<string, Map<string, Map<number, Tally>>>();
  private suppressed = 0;
  private timer: NodeJS.Timeout | undefined;

  /** `linesPerSecond`: individual lines per second before summarizing (0: always summarize) */
  constructor(
    private readonly linesPerSecond: number,
    log: ComponentLog = componentLog("http"),
  ) {
    this.log = log;
  }

  /**
   * One request: `route` its template (or the label of unrouted requests), `path` without its query
   * string (which may carry credentials); `nowMs` a monotonic clock reading (performance.now())
   * the caller already has. Positional: nothing is allocated for a request that is only counted.
   */
  record(requestId: string, method: string, route: string, path: string, status: number, durationMs: number, nowMs: number): void {
    if (nowMs - this.windowStart >= 1_000) {
      this.windowStart = nowMs;
      this.linesInWindow = 0;
      this.infoEnabled = this.log.enabled("info"); // looked up once a second, not per request
    }
    if (status >= 500) return this.line("error", requestId, method, route, path, status, durationMs);
    if (!this.infoEnabled) return;
    if (this.linesInWindow < this.linesPerSecond) {
      this.linesInWindow++;
      return this.line("info", requestId, method, route, path, status, durationMs);
    }
    this.tally(method, route, status, durationMs);
  }

  private line(level: "info" | "error", requestId: string, method: string, route: string, path: string, status: number, durationMs: number): void {
    this.log[level]("request", { req_id: requestId, method, route, path, status, duration_ms: round(durationMs) });
  }

  private tally(method: string, route: string, status: number, durationMs: number): void {
    // route → method → status: no key string built per request
    let byMethod = this.tallies.get(route);
    if (byMethod === undefined) this.tallies.set(route, (byMethod = new Map()));
    let byStatus = byMethod.get(method);
    if (byStatus === undefined) byMethod.set(method, (byStatus = new Map()));
    let t = byStatus.get(status);
    if (t === undefined) byStatus.set(status, (t = { method, route, status, count: 0, totalMs: 0, maxMs: 0 }));
    t.count++;
    t.totalMs += durationMs;
    if (durationMs > t.maxMs) t.maxMs = durationMs;
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
      method: t.method,
      route: t.route,
      status: t.status,
      count: t.count,
      avg_ms: round(t.totalMs / t.count),
      max_ms: round(t.maxMs),
    }));
    this.log.info("requests summary", { requests: this.suppressed, interval_ms: SUMMARY_EVERY_MS, routes });
    this.tallies.clear();
    this.suppressed = 0;
  }
}

const round = (ms: number): number => Math.round(ms * 1000) / 1000;
