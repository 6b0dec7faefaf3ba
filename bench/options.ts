// Command-line options: parsed once with node:util parseArgs, validated with messages that name
// the option, then resolved into a frozen object with units in the field names.
import path from "node:path";
import { parseArgs } from "node:util";
import type { ClientKind } from "./http/types.ts";

export const SCENARIO_NAMES = [
  "ok",
  "thread-create",
  "wait-c1",
  "wait-c16",
  "wait-c64",
  "stateless-wait",
  "stream-ttfe",
  "stream-join",
  "enqueue-1000",
  "slow-200",
  "ratelimit",
  "scale",
  "rss",
] as const;
export type ScenarioName = (typeof SCENARIO_NAMES)[number];
/** Scenarios a run without --only leaves out (long-running: ask for them by name). */
const OPT_IN: readonly ScenarioName[] = ["scale", "stream-join"];

export interface ResolvedOptions {
  /** the first of `urls` (reports name it) */
  readonly url: URL;
  /** every server given (`--url A,B` or `--url A --url B`): requests go to each in turn */
  readonly urls: readonly URL[];
  readonly scenarios: readonly ScenarioName[];
  readonly durationMs: number;
  readonly warmupMs: number;
  readonly echoGraph: string;
  readonly slowGraph: string;
  readonly slowSleepMs: number;
  readonly streamRuns: number;
  /** stream-join: sleep_ms of the joined slow run (long enough to still be running at the join) */
  readonly joinSleepMs: number;
  readonly enqueueRuns: number;
  readonly slowRuns: number;
  readonly pageSize: number;
  readonly idleTimeoutMs: number;
  readonly scenarioTimeoutMs: number;
  readonly client: ClientKind;
  readonly clientWorkers: number;
  readonly pid: number | null;
  readonly pidTree: boolean;
  /** idle time after the last scenario before rss_idle is read */
  readonly rssSettleMs: number;
  /** scale: threads to grow to, users their metadata is spread over, store items, samples per query, runs/wait per size */
  readonly scaleThreads: number;
  readonly scaleUsers: number;
  readonly scaleStoreItems: number;
  readonly scaleSamples: number;
  readonly scaleWaitRuns: number;
  /** scale: the server's data dir (local servers), for its size */
  readonly scaleDataDir: string | null;
  readonly outFile: string;
}

export const HELP = `troupe-bench — load benchmark for any LangGraph-compatible deployment server

Usage: npm run bench -- --url http://127.0.0.1:PORT [options]
       node bin/troupe-bench.js --url http://127.0.0.1:PORT [options]

Scenarios (all but scale by default, in this order; pick with --only a,b,c):
  ok              GET /ok at concurrency 64 for --duration s: req/s, p50/p99
  thread-create   POST /threads {} at concurrency 16: creates/s, p50/p99
  wait-c1         POST /threads, then POST /threads/{id}/runs/wait (echo graph) on that
  wait-c16        fresh thread, at concurrency 1 / 16 / 64: runs/s; p50/p99 are of the
  wait-c64        wait request alone (thread creation is not in the latency)
  stateless-wait  POST /runs/wait (echo graph) at concurrency 16: runs/s, p50/p99
  stream-ttfe     sequential POST /threads/{id}/runs/stream on fresh threads: time to the
                  first complete SSE event (must be "metadata"), p50/p99; each stream is
                  read to its end (--stream-runs runs)
  stream-join     (only with --only) sequential: a thread, a background run of the slow graph
                  (--join-sleep-ms), then GET /threads/{id}/runs/{run_id}/stream: time to the
                  first SSE event (--stream-runs joins). With three --url servers each join
                  reaches a server that is not running the run (a cluster's cross-node stream)
  enqueue-1000    --enqueue-runs background runs on ONE thread (POST /threads/{id}/runs,
                  multitask_strategy "enqueue", concurrency 16), join the last one, then
                  page GET /threads/{id}/runs until all are "success": total seconds
  slow-200        --slow-runs threads created first, then that many POST .../runs/wait on
                  the slow graph all at once: total wall seconds (ideal ≈ --slow-sleep-ms)
  ratelimit       Troupe's own rate limiter, in the bench process (not the server's): CPU ns
                  per check as a share of /ok req/s, and a 2-thread race on one bucket
  scale           (only with --only) grows threads (metadata.user_id over --scale-users users)
                  and store items to 1k, 10k, 100k, ... --scale-threads; at each size: thread
                  search by user, count, count of all, newest 10 by updated_at, get (p50/p99 of
                  --scale-samples sequential requests), GET /ok while 4 clients search (for
                  --duration s), runs/wait (--scale-wait-runs), store search by namespace +
                  filter; creates/s and puts/s while growing; data dir bytes (--scale-data-dir)
  rss             VmRSS of --pid (plus descendants with --pid-tree) at the end, again
                  after --rss-settle s of idle (rss_idle: a server at rest after the load),
                  and the peak sampled every 500 ms during the whole bench; "n/a" without --pid

Options:
  --url URL[,URL...]        server base URL, http only (required); several (comma-separated or
                            --url repeated): each request goes to the next server in turn
  --only LIST               comma-separated scenario names (default: all but scale)
  --duration S              measured seconds of each concurrency scenario (default 5)
  --warmup S                unmeasured seconds before each of them (default 1)
  --echo-graph ID           graph/assistant id of the echo graph (default "echo")
  --slow-graph ID           graph/assistant id of the slow graph (default "slow")
  --slow-sleep-ms MS        sent as config.configurable.sleep_ms to the slow graph (default 200)
  --stream-runs N           runs in stream-ttfe and stream-join (default 200)
  --join-sleep-ms MS        sleep_ms of the slow run stream-join joins (default 300)
  --enqueue-runs N          runs in enqueue-1000 (default 1000)
  --slow-runs N             runs in slow-200 (default 200)
  --page-size N             limit used when paging GET /threads/{id}/runs (default 100)
  --timeout S               a request fails when the server sends nothing for S s (default 60)
  --scenario-timeout S      cap on stream-ttfe, enqueue-1000 and slow-200, which then report
                            what they finished (default 300)
  --client raw|node         HTTP client: raw keep-alive sockets (default, cheapest per request)
                            or node:http with a keep-alive Agent (cross-check)
  --client-workers N        spread ok / thread-create / wait-* / stateless-wait over N worker
                            threads, each with its own sockets (default 1 = main thread only)
  --pid PID                 server process whose memory the rss scenario reports
  --pid-tree                add the RSS of every descendant process of --pid
  --rss-settle S            idle seconds before rss_idle is read (default 5; 0 = skip)
  --scale-threads N         threads the scale scenario grows to (default 1000000)
  --scale-users N           distinct metadata.user_id values (default 1000)
  --scale-store-items N     store items it grows to alongside (default: --scale-threads; 0 = none)
  --scale-samples N         sequential requests per query and size (default 200)
  --scale-wait-runs N       runs/wait per size (default 50)
  --scale-data-dir DIR      the server's data directory, to report its size per thread
  --out FILE                JSON results file (default bench/out/<timestamp>.json)
  -h, --help                this text

Errors (non-2xx, run outputs carrying "__error__", resets, timeouts) are counted per scenario
and never stop the run. Exit code: 0 when the run completed (even with request errors), 2 on
bad options or an unreachable server.
`;

export class OptionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "OptionError";
  }
}

function num(raw: string | undefined, name: string, def: number, { min = 0, integer = false } = {}): number {
  if (raw === undefined) return def;
  const v = Number(raw);
  if (!Number.isFinite(v) || v < min || (integer && !Number.isInteger(v))) {
    throw new OptionError(`--${name} must be ${integer ? "an integer" : "a number"} ≥ ${min}, got "${raw}"`);
  }
  return v;
}

function defaultOutFile(now: Date): string {
  const stamp = now.toISOString().replace(/[:.]/g, "-");
  return path.join(path.dirname(new URL(import.meta.url).pathname), "out", `${stamp}.json`);
}

/** `--url` values: each may list several URLs, comma-separated; at least one, all http://. */
function parseUrls(values: readonly string[] | undefined): URL[] {
  const listed = (values ?? [])
    .flatMap((v) => v.split(","))
    .map((s) => s.trim())
    .filter((s) => s !== "");
  if (listed.length === 0) throw new OptionError("--url is required (e.g. --url http://127.0.0.1:2124)");
  return listed.map((text) => {
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      throw new OptionError(`--url is not a URL: "${text}"`);
    }
    if (url.protocol !== "http:") throw new OptionError(`--url must be http:// (got ${url.protocol})`);
    return url;
  });
}

/** Returns null when --help was asked for. */
export function parseOptions(argv: string[], now = new Date()): ResolvedOptions | null {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        url: { type: "string", multiple: true },
        only: { type: "string" },
        duration: { type: "string" },
        warmup: { type: "string" },
        "echo-graph": { type: "string" },
        "slow-graph": { type: "string" },
        "slow-sleep-ms": { type: "string" },
        "stream-runs": { type: "string" },
        "join-sleep-ms": { type: "string" },
        "enqueue-runs": { type: "string" },
        "slow-runs": { type: "string" },
        "page-size": { type: "string" },
        timeout: { type: "string" },
        "scenario-timeout": { type: "string" },
        client: { type: "string" },
        "client-workers": { type: "string" },
        pid: { type: "string" },
        "pid-tree": { type: "boolean" },
        "rss-settle": { type: "string" },
        "scale-threads": { type: "string" },
        "scale-users": { type: "string" },
        "scale-store-items": { type: "string" },
        "scale-samples": { type: "string" },
        "scale-wait-runs": { type: "string" },
        "scale-data-dir": { type: "string" },
        out: { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    }));
  } catch (err) {
    throw new OptionError((err as Error).message);
  }
  if (values.help === true) return null;

  const urls = parseUrls(values.url);
  const url = urls[0];

  let scenarios: ScenarioName[] = SCENARIO_NAMES.filter((s) => !OPT_IN.includes(s));
  if (values.only !== undefined) {
    const picked = values.only
      .split(",")
      .map((s) => s.trim())
      .filter((s) => s !== "");
    for (const s of picked) {
      if (!(SCENARIO_NAMES as readonly string[]).includes(s)) {
        throw new OptionError(`--only: unknown scenario "${s}" (known: ${SCENARIO_NAMES.join(", ")})`);
      }
    }
    if (picked.length === 0) throw new OptionError("--only needs at least one scenario name");
    scenarios = SCENARIO_NAMES.filter((s) => picked.includes(s));
  }

  const client = values.client ?? "raw";
  if (client !== "raw" && client !== "node") throw new OptionError(`--client must be raw or node, got "${client}"`);

  const pid = values.pid === undefined ? null : num(values.pid, "pid", 0, { min: 1, integer: true });
  if (values["pid-tree"] === true && pid === null) throw new OptionError("--pid-tree needs --pid");

  const graph = (v: string | undefined, name: string, def: string): string => {
    if (v === undefined) return def;
    if (v.trim() === "") throw new OptionError(`--${name} must not be empty`);
    return v;
  };

  const scaleThreads = num(values["scale-threads"], "scale-threads", 1_000_000, { min: 1, integer: true });
  return Object.freeze({
    url,
    urls: Object.freeze(urls),
    scenarios: Object.freeze(scenarios),
    durationMs: num(values.duration, "duration", 5, { min: 0.1 }) * 1000,
    warmupMs: num(values.warmup, "warmup", 1) * 1000,
    echoGraph: graph(values["echo-graph"], "echo-graph", "echo"),
    slowGraph: graph(values["slow-graph"], "slow-graph", "slow"),
    slowSleepMs: num(values["slow-sleep-ms"], "slow-sleep-ms", 200, { integer: true }),
    streamRuns: num(values["stream-runs"], "stream-runs", 200, { min: 1, integer: true }),
    joinSleepMs: num(values["join-sleep-ms"], "join-sleep-ms", 300, { integer: true }),
    enqueueRuns: num(values["enqueue-runs"], "enqueue-runs", 1000, { min: 1, integer: true }),
    slowRuns: num(values["slow-runs"], "slow-runs", 200, { min: 1, integer: true }),
    pageSize: num(values["page-size"], "page-size", 100, { min: 1, integer: true }),
    idleTimeoutMs: num(values.timeout, "timeout", 60, { min: 0.1 }) * 1000,
    scenarioTimeoutMs: num(values["scenario-timeout"], "scenario-timeout", 300, { min: 1 }) * 1000,
    client,
    clientWorkers: num(values["client-workers"], "client-workers", 1, { min: 1, integer: true }),
    pid,
    pidTree: values["pid-tree"] === true,
    rssSettleMs: num(values["rss-settle"], "rss-settle", 5, { min: 0 }) * 1000,
    scaleThreads,
    scaleUsers: num(values["scale-users"], "scale-users", 1_000, { min: 1, integer: true }),
    scaleStoreItems: num(values["scale-store-items"], "scale-store-items", scaleThreads, { min: 0, integer: true }),
    scaleSamples: num(values["scale-samples"], "scale-samples", 200, { min: 1, integer: true }),
    scaleWaitRuns: num(values["scale-wait-runs"], "scale-wait-runs", 50, { min: 1, integer: true }),
    scaleDataDir: values["scale-data-dir"] === undefined ? null : path.resolve(process.env.INIT_CWD ?? process.cwd(), values["scale-data-dir"]),
    outFile: values.out === undefined ? defaultOutFile(now) : path.resolve(process.env.INIT_CWD ?? process.cwd(), values.out),
  });
}
