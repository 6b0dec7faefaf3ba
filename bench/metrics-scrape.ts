// How long GET /metrics takes on a loaded server (issue 23's target: ≤ 5 ms with 10,000 threads
// and 1,000 live runs). Starts `troupe serve` on a fresh data dir, creates the threads, starts the
// live runs (slow runs sleeping for minutes, some with a second run queued behind them), waits for
// the shards' queue snapshots, then scrapes sequentially and reports the server's own time per
// scrape (from its request log) and the client's round trip.
//
// Usage: npx tsx bench/metrics-scrape.ts [--threads 10000] [--running 800] [--queued 200] [--scrapes 200] [--workers N]
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import { summarize } from "./stats.ts";

const REPO = fileURLToPath(new URL("..", import.meta.url));
const { values } = parseArgs({
  options: {
    threads: { type: "string", default: "10000" },
    running: { type: "string", default: "800" },
    queued: { type: "string", default: "200" },
    scrapes: { type: "string", default: "200" },
    workers: { type: "string" },
  },
});
const THREADS = Number(values.threads);
const RUNNING = Number(values.running);
const QUEUED = Number(values.queued);
const SCRAPES = Number(values.scrapes);

const dataDir = mkdtempSync(join(tmpdir(), "troupe-scrape-"));
const args = [
  join(REPO, "bin/troupe.js"),
  "serve",
  "--host",
  "127.0.0.1",
  "--port",
  "0",
  "--rate-limit",
  "off",
  "--config",
  join(REPO, "examples/service.json"),
  "--data-dir",
  dataDir,
];
if (values.workers) args.push("--workers", values.workers);
const server = spawn(process.execPath, args, { cwd: REPO, stdio: ["ignore", "pipe", "inherit"] });
let out = "";
server.stdout!.on("data", (d: Buffer) => (out += d.toString()));
const url = await new Promise<string>((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error(`server did not start:\n${out}`)), 60_000);
  server.stdout!.on("data", () => {
    const m = /troupe listening on (http:\/\/\S+)/.exec(out);
    if (m) {
      clearTimeout(timer);
      resolve(m[1]);
    }
  });
});

async function post(path: string, body: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(`${url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`POST ${path}: HTTP ${res.status} ${await res.text()}`);
  return (await res.json()) as Record<string, unknown>;
}

/** `n` calls of `fn`, `concurrency` at a time */
async function pool(n: number, concurrency: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n) await fn(next++);
    }),
  );
}

try {
  let t0 = performance.now();
  const threadIds: string[] = new Array(THREADS);
  await pool(THREADS, 32, async (i) => {
    threadIds[i] = (await post("/threads", {})).thread_id as string;
  });
  console.log(`${THREADS} threads created in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  t0 = performance.now();
  const input = { messages: [{ role: "human", content: "x" }] };
  const slow = { configurable: { sleep_ms: 600_000 } };
  await pool(RUNNING, 32, async (i) => {
    await post(`/threads/${threadIds[i]}/runs`, { assistant_id: "slow", input, config: slow });
  });
  await pool(QUEUED, 32, async (i) => {
    await post(`/threads/${threadIds[i]}/runs`, { assistant_id: "slow", input, config: slow, multitask_strategy: "enqueue" });
  });
  console.log(`${RUNNING + QUEUED} runs created in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  await new Promise((r) => setTimeout(r, 2_500)); // the shards' 1 s queue snapshots

  const check = (await (await fetch(`${url}/metrics?format=json`)).json()) as { queue: { n_pending: number; n_running: number } };
  console.log(`gauges: ${check.queue.n_running} running, ${check.queue.n_pending} pending`);
  const client: number[] = [];
  const logFrom = out.length;
  for (let i = 0; i < SCRAPES; i++) {
    const start = performance.now();
    const res = await fetch(`${url}/metrics`);
    await res.text();
    client.push(performance.now() - start);
    await new Promise((r) => setTimeout(r, 15)); // under the request log's 100 lines/s: every scrape gets its own line
  }
  await new Promise((r) => setTimeout(r, 1_500)); // request lines and summaries written
  const serverMs: number[] = [];
  for (const line of out.slice(logFrom).split("\n")) {
    if (!line.startsWith("{")) continue;
    const l = JSON.parse(line) as { msg?: string; route?: string; duration_ms?: number; routes?: { route: string; avg_ms: number; count: number }[] };
    if (l.msg === "request" && l.route === "/metrics" && typeof l.duration_ms === "number") serverMs.push(l.duration_ms);
  }
  const fmt = (s: ReturnType<typeof summarize>) => `p50 ${s.p50Ms.toFixed(2)} ms, p99 ${s.p99Ms.toFixed(2)} ms, max ${s.maxMs.toFixed(2)} ms`;
  console.log(`scrapes: ${SCRAPES}; server time (${serverMs.length} logged one by one): ${serverMs.length ? fmt(summarize(serverMs)) : "n/a"}`);
  console.log(`client round trip: ${fmt(summarize(client))}`);
} finally {
  server.kill("SIGKILL");
  rmSync(dataDir, { recursive: true, force: true });
}
