// Small builders for the metric rows every scenario reports.
import type { LatencySummary } from "../stats.ts";
import type { Metric } from "./types.ts";

export function metric(name: string, value: number | string | boolean | null, unit: string): Metric {
  return { metric: name, value: typeof value === "number" && !Number.isFinite(value) ? null : value, unit };
}

/** p50 / p99 (plus mean and max) rows for a latency summary, names prefixed with `prefix`. */
export function latencyMetrics(s: LatencySummary, prefix = ""): Metric[] {
  return [
    metric(`${prefix}p50`, s.p50Ms, "ms"),
    metric(`${prefix}p99`, s.p99Ms, "ms"),
    metric(`${prefix}mean`, s.meanMs, "ms"),
    metric(`${prefix}max`, s.maxMs, "ms"),
  ];
}
