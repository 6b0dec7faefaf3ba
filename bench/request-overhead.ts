// What metrics and the request log cost per HTTP request on the HTTP thread (issue 23), measured
// in-process on the Dispatcher with GET /ok: without an observer, and with the server's observer
// (per-route cells, stream tracking, the request log at info with its 100 lines/s budget), in
// alternating rounds. Also prices the pieces: a request id, one JSON request line.
// Log lines go to stdout: run with `> /dev/null` and read the report on stderr.
//
// Usage: npx tsx bench/request-overhead.ts [--requests 300000] [--rounds 6] > /dev/null
//   --only plain|observed: run one variant once (N requests after N/10 of warm-up) and exit, to
//   count instructions of each with `valgrind --tool=callgrind` (the difference / N is the cost;
//   pass --lines-per-second 0 there, as the budget is per wall-clock second)
import { randomUUID } from "node:crypto";
import { parseArgs } from "node:util";
import { Dispatcher, type RawRequest, type RequestObserver } from "../src/http/dispatch.ts";
import { json } from "../src/http/types.ts";
import { configureLogging, flushLogs } from "../src/log/logger.ts";
import { RequestLog } from "../src/log/request-log.ts";
import { RequestTelemetry } from "../src/metrics/request-telemetry.ts";

const { values } = parseArgs({
  options: {
    requests: { type: "string", default: "300000" },
    rounds: { type: "string", default: "6" },
    only: { type: "string" },
    "lines-per-second": { type: "string", default: "100" },
  },
});
const N = Number(values.requests);
const ROUNDS = Number(values.rounds);
configureLogging({ level: "info", format: "json" }, "http");

function dispatcher(observer?: RequestObserver): Dispatcher {
  const d = new Dispatcher({ maxBodyBytes: 1 << 20, commonHeaders: { "access-control-allow-origin": "*" }, observer });
  d.add({ method: "GET", path: "/ok", operationId: "ok", summary: "", tag: "system", handler: () => json({ ok: true }) });
  d.add({ method: "GET", path: "/threads/:thread_id", operationId: "t", summary: "", tag: "threads", params: { thread_id: "uuid" }, handler: () => json({}) });
  return d;
}

// the budget is per wall-clock second: under callgrind (~50x slower) 100 lines/s would be ~50x more lines per request
const observer = new RequestTelemetry(Number(values["lines-per-second"]));
const plain = dispatcher();
const observed = dispatcher(observer);
const signal = new AbortController().signal;
const req = (): RawRequest => ({
  method: "GET",
  path: "/ok",
  query: "",
  headers: { host: "x", "user-agent": "bench" },
  body: null,
  clientIp: "127.0.0.1",
  signal,
});

/** CPU time (ns) per request of N requests: CPU, not wall time, on a machine shared with others */
async function round(d: Dispatcher, n = N): Promise<number> {
  const start = process.cpuUsage();
  for (let i = 0; i < n; i++) await d.dispatch(req());
  const used = process.cpuUsage(start);
  return ((used.user + used.system) * 1000) / n;
}

const report = (s: string) => process.stderr.write(`${s}\n`);
if (values.only !== undefined) {
  const d = values.only === "observed" ? observed : plain;
  await round(d, Math.ceil(N / 10));
  await round(d);
  flushLogs();
  process.exit(0);
}
await round(plain);
await round(observed); // warm both
const a: number[] = [];
const b: number[] = [];
for (let r = 0; r < ROUNDS; r++) {
  a.push(await round(plain));
  b.push(await round(observed));
}
const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[xs.length >> 1];
report(`dispatch GET /ok, ${N} requests x ${ROUNDS} alternating rounds (CPU ns/request):`);
report(`  no observer:            ${a.map((x) => x.toFixed(0)).join(" ")}  median ${median(a).toFixed(0)}`);
report(`  metrics + request log:  ${b.map((x) => x.toFixed(0)).join(" ")}  median ${median(b).toFixed(0)}`);
report(`  difference (median):    ${(median(b) - median(a)).toFixed(0)} ns`);

const cpuNs = (fn: () => void, n: number) => {
  const start = process.cpuUsage();
  for (let i = 0; i < n; i++) fn();
  const used = process.cpuUsage(start);
  return (((used.user + used.system) * 1000) / n).toFixed(0);
};
report(`randomUUID (what a made-up request id would cost with it; ids use a counter): ${cpuNs(() => randomUUID(), N)} CPU ns`);
const unbudgeted = new RequestLog(Number.POSITIVE_INFINITY);
report(
  `one JSON request line (pino, async write to stdout): ${cpuNs(() => unbudgeted.record("0b4f1e1c-3e2a-4a63-9d7f-8f7b0b2b5d11", "GET", "/ok", "/ok", 200, 0.123, 0), 20_000)} CPU ns`,
);
flushLogs();
