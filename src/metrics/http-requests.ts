// Per-request HTTP counters on the HTTP thread: requests by method, route template and status,
// latency by method and route. Plain numbers in cells found with two map lookups (no label
// hashing, no allocation per request); /metrics turns them into series when it is scraped.

/** Upper bounds (seconds) of the latency histogram (time to the response head); +Inf follows. */
export const HTTP_LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10] as const;

const METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);

export interface RouteCell {
  readonly method: string;
  readonly route: string;
  /** status → requests */
  readonly statuses: Map<number, number>;
  /** per bucket, not cumulative; +Inf last */
  readonly buckets: Float64Array;
  sum: number;
  count: number;
}

export class HttpRequestMetrics {
  /** route → method → cell */
  private readonly byRoute = new Map<string, Map<string, RouteCell>>();

  observe(method: string, route: string, status: number, seconds: number): void {
    let byMethod = this.byRoute.get(route);
    if (byMethod === undefined) this.byRoute.set(route, (byMethod = new Map()));
    let cell = byMethod.get(method);
    if (cell === undefined) {
      const label = METHODS.has(method) ? method : "OTHER";
      cell = byMethod.get(label);
      if (cell === undefined) {
        cell = { method: label, route, statuses: new Map(), buckets: new Float64Array(HTTP_LATENCY_BUCKETS.length + 1), sum: 0, count: 0 };
        byMethod.set(label, cell);
      }
    }
    cell.statuses.set(status, (cell.statuses.get(status) ?? 0) + 1);
    let i = 0;
    while (i < HTTP_LATENCY_BUCKETS.length && seconds > HTTP_LATENCY_BUCKETS[i]) i++;
    cell.buckets[i]++;
    cell.sum += seconds;
    cell.count++;
  }

  cells(): RouteCell[] {
    const out: RouteCell[] = [];
    for (const byMethod of this.byRoute.values()) for (const cell of new Set(byMethod.values())) out.push(cell);
    return out;
  }
}
