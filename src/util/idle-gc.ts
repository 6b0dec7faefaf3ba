// Gives memory back after a burst of work: when this thread has been idle for a while after being
// busy, run one full GC. V8 keeps a heap at the size a burst grew it to and only shrinks it much
// later (its memory reducer waits tens of seconds), so a server that handled a load spike sat on
// hundreds of MB while idle. After the GC, free C-heap pages go back to the OS too (native-memory.ts).
import { constants, performance, PerformanceObserver } from "node:perf_hooks";
import v8 from "node:v8";
import vm from "node:vm";
import { reduceHeap, trimCHeap } from "./native-memory.ts";

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

/** time for V8's array-buffer sweeper to free what the GC found dead before the C heap is trimmed */
const TRIM_DELAY_MS = 300;

let gcFn: (() => void) | undefined;

/** V8's gc() without starting node with --expose-gc (the flag only has to be set before the lookup). */
function collector(): () => void {
  if (gcFn === undefined) {
    v8.setFlagsFromString("--expose-gc");
    gcFn = vm.runInNewContext("gc") as () => void;
  }
  return gcFn;
}

/**
 * Starts the idle watcher for the calling thread; returns a stop function. `onCollect` runs right
 * after each idle collection: tests, logs, and further releases (the HTTP thread unmaps the data file).
 */
export function startIdleGc(opts: Partial<IdleGcOptions> = {}, onCollect?: (busyMs: number) => void): () => void {
  const o = { ...IDLE_GC_DEFAULTS, ...opts };
  const trims = new IdleTrims();
  let last = performance.eventLoopUtilization();
  let busySinceGc = 0;
  let idleRun = 0;
  let justCollected = false;
  const timer = setInterval(() => {
    const now = performance.eventLoopUtilization();
    const delta = performance.eventLoopUtilization(now, last);
    last = now;
    busySinceGc += delta.active;
    idleRun = delta.utilization < o.idleBelow ? idleRun + 1 : 0;
    if (idleRun === 0 && !justCollected) trims.stop(); // our own GC's pause is not "busy again"
    justCollected = false;
    if (idleRun >= o.idleSamples && busySinceGc >= o.minBusyMs) {
      const busy = busySinceGc;
      busySinceGc = 0;
      idleRun = 0;
      // the addon's memory-pressure GC also compacts and shrinks (after the full bench the actor
      // workers' heaps went to ~33 MB instead of 45-75 MB with gc(), which only V8's own memory
      // reducer would shrink further, ~10-20 s later)
      if (!reduceHeap()) collector()();
      justCollected = true;
      trims.start();
      onCollect?.(busy);
    }
  }, o.intervalMs);
  timer.unref();
  return () => {
    clearInterval(timer);
    trims.stop();
  };
}

/**
 * Trims the C heap after our idle GC and after every major GC that follows while the thread stays
 * idle. GC frees ArrayBuffer backing stores (V8 sweeps them off-thread, hence the delay), but glibc
 * keeps freed chunks in its arenas (after the full bench: ~100 MB in the main arena alone). V8's
 * own memory reducer runs further major GCs ~10-20 s into an idle period and frees more then.
 * (gc({flavor: "last-resort"}) instead was tried: workers' heaps stayed at ~130 MB, not less.)
 */
class IdleTrims {
  private observer: PerformanceObserver | null = null;
  private pending: NodeJS.Timeout | null = null;

  start(): void {
    this.schedule();
    if (this.observer !== null) return;
    this.observer = new PerformanceObserver((list) => {
      if (list.getEntries().some((e) => (e as { detail?: { kind?: number } }).detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR)) this.schedule();
    });
    this.observer.observe({ entryTypes: ["gc"] });
  }

  /** busy again: stop watching GCs (a trim already scheduled still runs) */
  stop(): void {
    this.observer?.disconnect();
    this.observer = null;
  }

  private schedule(): void {
    if (this.pending !== null) return;
    this.pending = setTimeout(() => {
      this.pending = null;
      trimCHeap();
    }, TRIM_DELAY_MS);
    this.pending.unref();
  }
}
