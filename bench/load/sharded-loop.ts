// Spreads one closed loop over N worker threads (`--client-workers`) so the load generator is
// not capped by one core; merges their samples into one LoopResult.
import { Worker } from "node:worker_threads";
import { ErrorTally } from "../error-tally.ts";
import type { ClientKind } from "../http/types.ts";
import type { LoopPlan, LoopResult } from "./closed-loop.ts";
import type { LoopSpec } from "./loops.ts";
import type { WorkerInput, WorkerMessage } from "./worker-messages.ts";

export interface ShardOptions {
  workers: number;
  clientKind: ClientKind;
  baseUrl: URL;
  /** every server of `--url` (default: baseUrl alone) */
  baseUrls?: readonly URL[];
  idleTimeoutMs: number;
}

/** Splits `total` into at most `parts` positive shares that differ by at most one. */
export function splitConcurrency(total: number, parts: number): number[] {
  const n = Math.max(1, Math.min(parts, total));
  return Array.from({ length: n }, (_, i) => Math.floor(total / n) + (i < total % n ? 1 : 0));
}

/** Worker threads do not inherit the tsx loader, so each one registers it before importing the entry. */
function spawn(input: WorkerInput): Worker {
  const tsxApi = import.meta.resolve("tsx/esm/api");
  const entry = new URL("./client-worker.ts", import.meta.url).href;
  const code = `import(${JSON.stringify(tsxApi)}).then((m) => { m.register(); return import(${JSON.stringify(entry)}); });`;
  return new Worker(code, { eval: true, workerData: input });
}

export async function runShardedLoop(spec: LoopSpec, plan: LoopPlan, opts: ShardOptions): Promise<LoopResult> {
  const shares = splitConcurrency(plan.concurrency, opts.workers);
  const workers = shares.map((concurrency) =>
    spawn({
      spec,
      plan: { ...plan, concurrency },
      clientKind: opts.clientKind,
      baseUrl: opts.baseUrl.href,
      baseUrls: (opts.baseUrls ?? [opts.baseUrl]).map((u) => u.href),
      idleTimeoutMs: opts.idleTimeoutMs,
    }),
  );
  try {
    const ready = workers.map((w) => nextMessage(w));
    for (const msg of await Promise.all(ready)) if (msg.type !== "ready") throw workerFailure(msg);
    const results = workers.map((w) => nextMessage(w));
    for (const w of workers) w.postMessage({ type: "start" });
    const done = await Promise.all(results);

    const errors = new ErrorTally();
    const parts: Float64Array[] = [];
    let completed = 0;
    let elapsedMs = 0;
    for (const msg of done) {
      if (msg.type !== "result") throw workerFailure(msg);
      completed += msg.completed;
      elapsedMs = Math.max(elapsedMs, msg.elapsedMs);
      parts.push(msg.latenciesMs);
      errors.merge(msg.errors);
    }
    const latenciesMs = new Float64Array(parts.reduce((n, p) => n + p.length, 0));
    let off = 0;
    for (const p of parts) {
      latenciesMs.set(p, off);
      off += p.length;
    }
    return { completed, elapsedMs, latenciesMs, errors: errors.report() };
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
}

function nextMessage(worker: Worker): Promise<WorkerMessage> {
  return new Promise((resolve, reject) => {
    const onMessage = (msg: WorkerMessage): void => {
      cleanup();
      resolve(msg);
    };
    const onError = (err: Error): void => {
      cleanup();
      reject(err);
    };
    const onExit = (code: number): void => {
      cleanup();
      reject(new Error(`client worker exited early with code ${code}`));
    };
    const cleanup = (): void => {
      worker.off("message", onMessage);
      worker.off("error", onError);
      worker.off("exit", onExit);
    };
    worker.on("message", onMessage);
    worker.on("error", onError);
    worker.on("exit", onExit);
  });
}

function workerFailure(msg: WorkerMessage): Error {
  if (msg.type === "error") {
    const err = new Error(`client worker failed: ${msg.message}`);
    err.stack = msg.stack;
    return err;
  }
  return new Error(`unexpected client worker message: ${msg.type}`);
}
