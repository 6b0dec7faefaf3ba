// The pure parts of metrics and logs (issue 23): the shards' run metrics board as the HTTP thread
// reads it, the HTTP request cells, and the request log's per-second budget with its summaries.
import { describe, expect, it } from "vitest";
import { createShardMetricsBuffer, RUN_DURATION_BUCKETS, ShardMetricsReader, ShardMetricsWriter } from "../../src/bridge/shard-metrics.ts";
import { HttpRequestMetrics } from "../../src/metrics/http-requests.ts";
import { RequestLog } from "../../src/log/request-log.ts";
import type { ComponentLog, LogFields } from "../../src/log/logger.ts";

describe("shard metrics board", () => {
  const graphs = ["echo", "slow"];

  it("sums every shard's run counters and histograms per graph; unknown graphs count as other", () => {
    const buffer = createShardMetricsBuffer(2, graphs);
    const [a, b] = [0, 1].map((i) => new ShardMetricsWriter(buffer, i, graphs));
    a.runStarted("echo", 3);
    b.runStarted("echo", 2_000);
    b.runStarted("nope", 0);
    a.runEnded("echo", "success", 40);
    b.runEnded("echo", "success", 90_000);
    b.runEnded("echo", "interrupted", undefined); // cancelled while pending: counted, no duration
    const r = new ShardMetricsReader(buffer, 2, graphs);
    expect(r.graphLabels).toEqual(["echo", "slow", "other"]);
    expect([r.started(0), r.started(1), r.started(2)]).toEqual([2, 0, 1]);
    expect(r.finished(0, "success")).toBe(2);
    expect(r.finished(0, "interrupted")).toBe(1);
    const d = r.duration(0, "success");
    expect(d.count).toBe(2);
    expect(d.sum).toBeCloseTo(90.04, 5);
    expect(d.counts[RUN_DURATION_BUCKETS.indexOf(0.05)]).toBe(1); // 40 ms ≤ 0.05 s
    expect(d.counts[RUN_DURATION_BUCKETS.indexOf(120)]).toBe(1); // 90 s ≤ 120 s
    expect(r.duration(0, "interrupted").count).toBe(0);
    const w = r.queueWait(0);
    expect(w.count).toBe(2);
    expect(w.sum).toBeCloseTo(2.003, 5);
  });

  it("reports queue gauges from the latest snapshot, waits growing until the next one; a median within ~10%", () => {
    const buffer = createShardMetricsBuffer(2, graphs);
    const [a, b] = [0, 1].map((i) => new ShardMetricsWriter(buffer, i, graphs));
    const now = 1_700_000_000_000;
    // pending runs that became due 1, 2, 3, 4 and 100 s ago (the median: 3 s); one not yet due
    a.publishQueue({ pending: 3, running: 1, pendingDue: [now - 1_000, now - 2_000, now - 100_000], oldestUnblockedDue: now - 2_000 }, now);
    b.publishQueue({ pending: 3, running: 2, pendingDue: [now - 3_000, now - 4_000, now + 60_000], oldestUnblockedDue: Number.NaN }, now);
    b.publishHeap(5_000_000, 8_000_000);
    const r = new ShardMetricsReader(buffer, 2, graphs);
    const later = now + 500;
    expect(r.queue(0, later)).toMatchObject({ pending: 3, running: 1, oldestWaitSeconds: 100.5, oldestUnblockedWaitSeconds: 2.5 });
    expect(r.queue(1, later)).toMatchObject({ pending: 3, running: 2, oldestWaitSeconds: 4.5, oldestUnblockedWaitSeconds: 0, heapUsed: 5_000_000 });
    const median = r.medianPendingWaitSeconds(later);
    expect(Math.abs(median - 3.5) / 3.5).toBeLessThan(0.1);
    b.clearGauges();
    expect(r.queue(1, later)).toMatchObject({ pending: 0, running: 0, oldestWaitSeconds: 0, heapUsed: 0 });
  });
});

describe("HTTP request cells", () => {
  it("count by method, route and status, and fold unknown methods into OTHER", () => {
    const m = new HttpRequestMetrics();
    m.observe("GET", "/ok", 200, 0.0004);
    m.observe("GET", "/ok", 200, 0.003);
    m.observe("GET", "/ok", 503, 2);
    m.observe("BREW", "/ok", 405, 0.001);
    m.observe("PURGE", "/ok", 405, 0.001);
    const cells = m.cells();
    expect(cells.map((c) => [c.method, c.route, Object.fromEntries(c.statuses), c.count])).toEqual([
      ["GET", "/ok", { 200: 2, 503: 1 }, 3],
      ["OTHER", "/ok", { 405: 2 }, 2],
    ]);
    expect(cells[0].sum).toBeCloseTo(2.0034, 6);
  });
});

describe("request log", () => {
  function recorder(): ComponentLog & { lines: { level: string; msg: string; fields?: LogFields }[] } {
    const lines: { level: string; msg: string; fields?: LogFields }[] = [];
    const at = (level: string) => (msg: string, fields?: LogFields) => void lines.push({ level, msg, fields });
    return { lines, error: at("error"), warn: at("warn"), info: at("info"), debug: at("debug"), enabled: () => true };
  }

  it("writes up to its budget of lines a second, then tallies the rest into one summary; 5xx always get a line", () => {
    const log = recorder();
    const rl = new RequestLog(2, log);
    for (let i = 0; i < 5; i++) rl.record("r", "GET", "/ok", "/ok", 200, i, 10_000 + i);
    rl.record("r", "GET", "unmatched", "/x", 404, 7, 10_010);
    rl.record("r", "GET", "/threads", "/threads", 500, 3, 10_020);
    rl.record("r", "GET", "/ok", "/ok", 200, 1, 11_000); // a new second: a line again
    rl.flush();
    expect(log.lines.filter((l) => l.msg === "request").map((l) => [l.level, l.fields?.status])).toEqual([
      ["info", 200],
      ["info", 200],
      ["error", 500],
      ["info", 200],
    ]);
    const summary = log.lines.find((l) => l.msg === "requests summary")!;
    expect(summary.fields).toMatchObject({ requests: 4 });
    expect(summary.fields?.routes).toEqual([
      { method: "GET", route: "/ok", status: 200, count: 3, avg_ms: 3, max_ms: 4 },
      { method: "GET", route: "unmatched", status: 404, count: 1, avg_ms: 7, max_ms: 7 },
    ]);
    rl.flush(); // nothing new: no second summary
    expect(log.lines.filter((l) => l.msg === "requests summary")).toHaveLength(1);
  });
});
