// Gives memory back after a burst of work: when this thread has been idle for a while after being
// busy, run one full GC. V8 keeps a heap at the size a burst grew it to and only shrinks it much
// later (its memory reducer waits tens of seconds), so a server that handled a load spike sat on
// hundreds of MB while idle.
import { performance } from "node:perf_hooks";
import v8 from "node:v8";
import vm from "node:vm";

export interface IdleGcOptions {
  /** how often utilisation is sampled */
  intervalMs: number;
  /** consecutive idle samples (utilisation below `idleBelow`) before collecting */
  idleSamples: number;
  /** event-loop utilisation (0–1) under which a sample counts as idle */
  idleBelow: number;
  /** busy time (ms) since the last collection that makes another one worth it */
  minBusyMs: number;
}

const IDLE_GC_DEFAULTS: IdleGcOptions = { intervalMs: 1_000, idleSamples: 2, idleBelow: 0.02, minBusyMs: 2_000 };

let gcFn: (() => void) | undefined;

/** V8's gc() without starting node with --expose-gc (the flag only has to be set before the lookup). */
function collector(): () => void {
  if (gcFn === undefined) {
    v8.setFlagsFromString("--expose-gc");
    gcFn = vm.runInNewContext("gc") as () => void;
  }
  return gcFn;
}

/** Starts the idle watcher for the calling thread; returns a stop function. `onCollect` is for tests and logs. */
export function startIdleGc(opts: Partial<IdleGcOptions> = {}, onCollect?: (busyMs: number) => void): () => void {
  const o = { ...IDLE_GC_DEFAULTS, ...opts };
  const gc = collector();
  let last = performance.eventLoopUtilization();
  let busySinceGc = 0;
  let idleRun = 0;
  const timer = setInterval(() => {
    const now = performance.eventLoopUtilization();
    const delta = performance.eventLoopUtilization(now, last);
    last = now;
    busySinceGc += delta.active;
    idleRun = delta.utilization < o.idleBelow ? idleRun + 1 : 0;
    if (idleRun >= o.idleSamples && busySinceGc >= o.minBusyMs) {
      const busy = busySinceGc;
      busySinceGc = 0;
      idleRun = 0;
      gc();
      onCollect?.(busy);
    }
  }, o.intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
