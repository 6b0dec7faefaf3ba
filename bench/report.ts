// Output: the human table on stdout and the JSON results file (run context + every scenario).
import fs from "node:fs";
import path from "node:path";
import type { ResolvedOptions } from "./options.ts";
import type { Metric, ScenarioResult } from "./scenarios/types.ts";

function formatValue(v: Metric["value"]): string {
  if (v === null) return "-";
  if (typeof v === "boolean") return v ? "yes" : "no";
  if (typeof v === "string") return v;
  if (Number.isInteger(v)) return String(v);
  const abs = Math.abs(v);
  return v.toFixed(abs >= 1000 ? 0 : abs >= 100 ? 1 : abs >= 1 ? 2 : 3);
}

export function formatTable(results: readonly ScenarioResult[]): string {
  const rows: string[][] = [["scenario", "metric", "value", "unit"]];
  for (const r of results) {
    for (const m of r.metrics) rows.push([r.scenario, m.metric, formatValue(m.value), m.unit]);
    rows.push([r.scenario, "errors", String(r.errors.count), "count"]);
  }
  const widths = rows[0].map((_, c) => Math.max(...rows.map((row) => row[c].length)));
  const line = (row: string[]): string =>
    row
      .map((cell, c) => (c === 2 ? cell.padStart(widths[c]) : cell.padEnd(widths[c])))
      .join("  ")
      .trimEnd();
  const out = [line(rows[0]), widths.map((w) => "-".repeat(w)).join("  ")];
  let prev = "";
  for (const row of rows.slice(1)) {
    if (prev !== "" && row[0] !== prev) out.push("");
    out.push(line(row));
    prev = row[0];
  }
  return out.join("\n");
}

/** Error kinds and notes, one block per scenario that has any. */
export function formatNotes(results: readonly ScenarioResult[]): string {
  const out: string[] = [];
  for (const r of results) {
    const kinds = Object.entries(r.errors.byKind).map(([k, n]) => `${k} ×${n}`);
    if (kinds.length === 0 && r.notes.length === 0) continue;
    out.push(`${r.scenario}:`);
    if (kinds.length > 0) out.push(`  errors: ${kinds.join(", ")}`, ...r.errors.samples.map((s) => `    e.g. ${s}`));
    for (const n of r.notes) out.push(`  note: ${n}`);
  }
  return out.join("\n");
}

function round(v: Metric["value"]): Metric["value"] {
  return typeof v === "number" && !Number.isInteger(v) ? Math.round(v * 1000) / 1000 : v;
}

export interface RunInfo {
  startedAt: Date;
  finishedAt: Date;
  serverInfo: unknown;
}

export function buildJson(options: ResolvedOptions, info: RunInfo, results: readonly ScenarioResult[]): unknown {
  return {
    tool: "troupe-bench",
    server_url: options.url.href,
    server_urls: options.urls.map((u) => u.href),
    server_info: info.serverInfo,
    timestamp: info.startedAt.toISOString(),
    finished_at: info.finishedAt.toISOString(),
    node_version: process.version,
    platform: `${process.platform}/${process.arch}`,
    options: {
      scenarios: options.scenarios,
      duration_s: options.durationMs / 1000,
      warmup_s: options.warmupMs / 1000,
      echo_graph: options.echoGraph,
      slow_graph: options.slowGraph,
      slow_sleep_ms: options.slowSleepMs,
      stream_runs: options.streamRuns,
      enqueue_runs: options.enqueueRuns,
      slow_runs: options.slowRuns,
      page_size: options.pageSize,
      timeout_s: options.idleTimeoutMs / 1000,
      scenario_timeout_s: options.scenarioTimeoutMs / 1000,
      client: options.client,
      client_workers: options.clientWorkers,
      pid: options.pid,
      pid_tree: options.pidTree,
      ...(options.scenarios.includes("scale")
        ? {
            scale_threads: options.scaleThreads,
            scale_users: options.scaleUsers,
            scale_store_items: options.scaleStoreItems,
            scale_samples: options.scaleSamples,
            scale_wait_runs: options.scaleWaitRuns,
            scale_data_dir: options.scaleDataDir,
          }
        : {}),
    },
    scenarios: results.map((r) => ({
      name: r.scenario,
      description: r.description,
      wall_s: Math.round(r.wallSeconds * 1000) / 1000,
      metrics: r.metrics.map((m) => ({ ...m, value: round(m.value) })),
      errors: r.errors,
      notes: r.notes,
    })),
  };
}

export function writeJson(file: string, data: unknown): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, `${JSON.stringify(data, null, 2)}\n`);
}
