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
  /** shared with the server's other threads: a sample counts as idle only if none of them is busy */
  board?: IdleBoardSlot;
  /** another thread's utilisation (0–1) from which it counts as busy */
  othersBusyFrom: number;
}

const IDLE_GC_DEFAULTS: IdleGcOptions = { intervalMs: 1_000, idleSamples: 2, idleBelow: 0.02, minBusyMs: 2_000, othersBusyFrom: 0.1 };

/**
 * One server's threads (HTTP thread, actor workers) each publish their latest utilisation sample
 * in their slot of a shared board (permille, an Int32 per thread, Atomics only), so a thread
 * collects only once the burst is over for the whole server: not while another thread is busy
 * (light traffic, under `othersBusyFrom`, holds nobody back). An actor worker idle while the other
 * runs a long queue would otherwise run its full, compacting GC and helper threads on the cores
 * that work needs (seen in the bench: an actor worker's idle GC 2 s into enqueue-1000), and the
 * threads' GCs would not line up at the end of a burst (after the full bench, a worker that had
 * collected mid-bench was not busy long enough since to collect again: idle RSS 217-222 MB,
 * ~190 MB with the board).
 */
export interface IdleBoardSlot {
  /** from createIdleBoard */
  buffer: SharedArrayBuffer;
  /** this thread's slot */
  slot: number;
}

export function createIdleBoard(threads: number): SharedArrayBuffer {
  return new SharedArrayBuffer(threads * Int32Array.BYTES_PER_ELEMENT);
}

/** Whether every slot but `own` holds a sample under `limit` permille. */
function othersQuiet(board: Int32Array, own: number, limit: number): boolean {
  for (let i = 0; i < board.length; i++) if (i !== own && Atomics.load(board, i) >= limit) return false;
  return true;
}

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
  const board = o.board === undefined ? undefined : new Int32Array(o.board.buffer);
  const slot = o.board?.slot ?? 0;
  const busyPermille = Math.round(o.othersBusyFrom * 1000);
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
    const idleHere = delta.utilization < o.idleBelow;
    // our own GC's pause is not "busy again", here or for the other threads
    if (board !== undefined) Atomics.store(board, slot, justCollected ? 0 : Math.round(delta.utilization * 1000));
    idleRun = idleHere && (board === undefined || othersQuiet(board, slot, busyPermille)) ? idleRun + 1 : 0;
    if (!idleHere && !justCollected) trims.stop();
    justCollected = false;
    if (idleRun >= o.idleSamples && busySinceGc >= o.minBusyMs) {
      const busy = busySinceGc;
      busySinceGc = 0;
      idleRun = 0;
      // the addon's memory-pressure GC also compacts and shrinks (after the full bench the actor
      // workers' heaps went to ~33 MB instead of 45-75 MB with gc(), which only V8's own memory
      // reducer would shrink further, ~10-20 s later)
      if (!reduceHeap()) collector()();
      // the collection's own time is not busy time that earns the next one (a GC slower than
      // minBusyMs, e.g. on a loaded machine, would otherwise collect again at every idle pair)
      last = performance.eventLoopUtilization();
      justCollected = true;
      trims.start();
      onCollect?.(busy);
    }
  }, o.intervalMs);
  timer.unref();
  return () => {
    clearInterval(timer);
    trims.stop();
    if (board !== undefined) Atomics.store(board, slot, 0); // a stopped thread holds nobody back
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
