// HTTP-thread side of run streams: per-run event logs fed by the actor workers, live
// subscribers (SSE), and waiters for completion (/wait, /join). Logs of finished runs are kept
// for a while so a late join still sees the events and the final output. Every run's start,
// events and end are also forwarded to its thread's stream (thread-stream-hub.ts).
import { EventBuffer } from "../bridge/event-buffer.ts";
import type { RunDone, RunEvent } from "../bridge/messages.ts";
import { ThreadStreamHub } from "./thread-stream-hub.ts";
import { ThreadProtocolHub } from "./thread-protocol-hub.ts";

export interface RunSubscriber {
  onEvent(e: RunEvent): void;
  onDone(done: RunDone): void;
}

interface RunLog {
  runId: string;
  threadId: string;
  resumable: boolean;
  /** started through the thread-centric protocol: its events go to the thread's protocol session */
  protocol: boolean;
  /** the worker holds this run's events until a reader joins (see event-gate.ts) */
  gated: boolean;
  /**
   * Cluster: fed from another node's channel (remote-runs.ts), not from this node's shard: its
   * thread's streams and protocol session get it from the node running it (remote-threads.ts).
   */
  remote: boolean;
  /** whole for a resumable run; bounded for a non-resumable one (oldest dropped first) */
  events: EventBuffer<RunEvent>;
  /** a non-resumable log is replayed to its first reader only (later readers get live events) */
  replayed: boolean;
  subscribers: Set<RunSubscriber>;
  done?: RunDone;
  waiters: ((d: RunDone) => void)[];
  expireTimer?: NodeJS.Timeout;
  /**
   * Thread streams wait for the worker's buffer of this run (holdThreadEnd): its run_end is
   * published only after it, so they see the events first even when the run ended meanwhile.
   */
  endHeld?: boolean;
  pendingEnd?: () => void;
  /** events from the run's interrupt chunk on, delivered when the run's end arrives (events()) */
  heldFromInterrupt?: RunEvent[];
}

/** A root `updates`/`values` chunk that is LangGraph's `{__interrupt__: [...]}`. */
const isInterruptEvent = (e: RunEvent): boolean => (e.event === "updates" || e.event === "values") && e.data.startsWith('{"__interrupt__"');

export interface RunHubOptions {
  /** how long a finished run's log and output stay available */
  retentionMs: number;
  /**
   * Event bytes kept per non-resumable run for a late first reader. Beyond it the oldest events
   * are dropped (memory stays bounded when thousands of background runs stream big states).
   * Resumable runs keep their whole log: the client asked for replay.
   */
  maxBufferedBytes?: number;
  /**
   * Bytes of final outputs (plus events) kept for finished runs. Past it the oldest finished runs
   * are forgotten early: a later /join falls back to the stored thread values (as upstream does
   * after a run's queue is gone). A long thread's output is its whole history, so 60 s of them
   * at full speed would otherwise hold hundreds of MB.
   */
  maxRetainedBytes?: number;
}

/**
 * What request handlers may do with run streams (ShardPool.runs): wait for, read and forget runs.
 * Feeding the hub (expect/started/events/finished) is the pool's job alone.
 */
export type RunStreams = Pick<RunHub, "doneOf" | "waitFor" | "subscribe" | "drop" | "gatedRunsOf" | "isAwaitedGated">;

export class RunHub {
  private readonly logs = new Map<string, RunLog>();

  private readonly maxBytes: number;
  private readonly maxRetained: number;
  /** finished runs, oldest first, with the bytes their log still holds */
  private readonly retained = new Map<string, number>();
  private retainedBytes = 0;
  /** runs whose events their worker still holds, by thread (a thread stream connecting observes them) */
  private readonly gatedByThread = new Map<string, Set<string>>();

  /** thread-level streams: every run of a thread, plus state updates published by the HTTP layer */
  readonly threads: ThreadStreamHub;
  /** thread-centric protocol sessions (runs started by run.start / input.respond / state.fork) */
  readonly protocol = new ThreadProtocolHub();

  constructor(private readonly opts: RunHubOptions = { retentionMs: 60_000 }) {
    this.maxBytes = opts.maxBufferedBytes ?? 256 * 1024;
    this.maxRetained = opts.maxRetainedBytes ?? 32 * 1024 * 1024;
    this.threads = new ThreadStreamHub();
  }

  private log(runId: string, threadId = ""): RunLog {
    let l = this.logs.get(runId);
    if (!l) {
      l = {
        runId,
        threadId,
        resumable: false,
        protocol: false,
        gated: false,
        remote: false,
        events: new EventBuffer(this.maxBytes),
        replayed: false,
        subscribers: new Set(),
        waiters: [],
      };
      this.logs.set(runId, l);
    } else if (threadId && !l.threadId) {
      l.threadId = threadId; // created by a join or wait that named only the run
    }
    return l;
  }

  /**
   * Called when the run-create reply arrives, before any event of the run can be processed.
   * `observed: false`: the worker keeps the run's events until a reader joins (markObserved + run.observe).
   */
  expect(runId: string, threadId: string, resumable: boolean, observed = true): void {
    const l = this.log(runId, threadId);
    this.setResumable(l, resumable);
    this.setGated(l, !observed);
  }

  /** Whether the run's events are still held in its worker (a joiner must send run.observe first). */
  isGated(runId: string): boolean {
    return this.logs.get(runId)?.gated === true;
  }

  /** Whether the run's log keeps every event (a resumable run): a remote reader's node is told. */
  isResumable(runId: string): boolean {
    return this.logs.get(runId)?.resumable === true;
  }

  markObserved(runId: string): void {
    const l = this.logs.get(runId);
    if (l) this.setGated(l, false);
  }

  /**
   * Whether the run is gated and its end has not reached the hub: it may be final in storage
   * already (the worker's commit landed) while its run.done is still on its way.
   */
  isAwaitedGated(runId: string): boolean {
    const l = this.logs.get(runId);
    return l?.gated === true && l.done === undefined;
  }

  /** Gated runs of a thread that have not finished (a thread stream starts observing them live). */
  gatedRunsOf(threadId: string): string[] {
    return [...(this.gatedByThread.get(threadId) ?? [])];
  }

  started(runId: string, threadId: string, resumable: boolean, attempt: number, protocol = false, remote = false): void {
    const l = this.log(runId, threadId);
    this.setResumable(l, resumable);
    l.protocol = protocol;
    l.remote = remote;
    if (protocol) this.protocol.started(threadId, runId, attempt);
    if (attempt > 1) {
      l.events.take(); // a re-executed run restarts its stream (metadata.attempt > 1)
      l.heldFromInterrupt = undefined;
    }
    l.done = undefined;
    this.release(runId);
    if (!remote && this.threads.has(threadId)) {
      this.threads.publish(threadId, "lifecycle", "run_start", JSON.stringify({ run_id: runId, thread_id: threadId, status: "running", attempt }));
    }
  }

  /** `remote`: from another node's channel (remote-runs.ts) rather than this node's shard. */
  events(runId: string, events: RunEvent[], remote = false): void {
    const l = this.log(runId);
    l.remote = remote;
    if (l.protocol) this.protocol.publish(l.threadId, runId, events);
    // From the root chunk that says the run stopped at an interrupt on, events wait for the run's
    // end: a client acting on the interrupt at once (RemoteGraph raises GraphInterrupt on it) must
    // find the thread already `interrupted`, which the run's final commit writes.
    if (l.done === undefined) {
      if (l.heldFromInterrupt) {
        l.heldFromInterrupt.push(...events);
        return;
      }
      const i = events.findIndex(isInterruptEvent);
      if (i >= 0) {
        l.heldFromInterrupt = events.slice(i);
        events = events.slice(0, i);
      }
    }
    this.deliver(l, events);
  }

  private deliver(l: RunLog, events: readonly RunEvent[]): void {
    const runId = l.runId;
    // Events that arrive after the run's end are a replay of its worker buffer for a late reader
    // (run.observe raced the run's end): the run's own readers get them; thread streams only while
    // its run_end is held for them (holdThreadEnd), since otherwise they had the run_end already.
    if (l.threadId && !l.remote && (l.done === undefined || l.endHeld) && this.threads.has(l.threadId)) {
      for (const e of events) this.threads.publish(l.threadId, "run_modes", e.event, e.data);
    }
    for (const e of events) {
      for (const s of l.subscribers) s.onEvent(e);
      // a non-resumable log that was already read has no later reader to serve
      if (!l.resumable && l.replayed) continue;
      const added = l.events.push(e);
      // a late join's replay of a finished run's worker buffer: count it against the retention
      if (l.done) this.grow(runId, added);
    }
  }

  finished(done: RunDone, remote = false): void {
    const l = this.log(done.runId, done.threadId);
    l.remote = remote;
    const held = l.heldFromInterrupt;
    l.heldFromInterrupt = undefined;
    if (held) this.deliver(l, held); // before `done`: to the run's readers and thread streams as live events
    l.done = done;
    if (remote) this.protocol.settled(done.threadId, done.runId);
    else {
      this.protocol.ended(done.threadId, done.runId, done.status); // also a queued protocol run cancelled before it started
      if (done.threadStatus === "deleted") this.protocol.close(done.threadId);
    }
    this.unindexGated(l); // stays gated: a late join still fetches the worker's buffer (run.observe)
    for (const s of l.subscribers) s.onDone(done);
    l.subscribers.clear();
    for (const w of l.waiters) w(done);
    l.waiters = [];
    // Events of a finished non-resumable run matter only to a reader arriving right after it ended;
    // drop them soon to bound memory under load. The final output stays for the full retention.
    if (!l.resumable) {
      setTimeout(() => this.dropEvents(l), Math.min(5_000, this.opts.retentionMs)).unref();
    }
    l.expireTimer = setTimeout(() => this.forget(done.runId), this.opts.retentionMs);
    l.expireTimer.unref();
    this.retain(done.runId, (done.output?.byteLength ?? 0) + l.events.bytes);
    const publishEnd = () => {
      if (remote || !this.threads.has(done.threadId)) return;
      const end = { run_id: done.runId, thread_id: done.threadId, status: done.status, thread_status: done.threadStatus };
      this.threads.publish(done.threadId, "lifecycle", "run_end", JSON.stringify(end));
      if (done.threadStatus === "deleted") this.threads.close(done.threadId); // a stateless run's temporary thread
    };
    if (l.endHeld) l.pendingEnd = publishEnd;
    else publishEnd();
  }

  /**
   * A thread stream is about to fetch this gated run's events from the worker: hold its run_end
   * for thread streams until releaseThreadEnd. False (nothing held) when the run already ended.
   */
  holdThreadEnd(runId: string): boolean {
    const l = this.logs.get(runId);
    if (l === undefined || l.done !== undefined) return false;
    l.endHeld = true;
    return true;
  }

  releaseThreadEnd(runId: string): void {
    const l = this.logs.get(runId);
    if (l === undefined || !l.endHeld) return;
    l.endHeld = false;
    const publishEnd = l.pendingEnd;
    l.pendingEnd = undefined;
    publishEnd?.();
  }

  /** Final result if the run is known to have finished (in this process, recently). */
  doneOf(runId: string): RunDone | undefined {
    return this.logs.get(runId)?.done;
  }

  /** Resolves when the run finishes. Caller must check storage first for runs finished earlier. */
  waitFor(runId: string): Promise<RunDone> {
    const l = this.log(runId);
    if (l.done) return Promise.resolve(l.done);
    return new Promise((resolve) => l.waiters.push(resolve));
  }

  /**
   * Subscribe to a run's events. `from`: "start" replays the whole log (create-and-stream,
   * Last-Event-ID -1), a number replays events with id > from, "live" only new events — except
   * that the first reader of a non-resumable run gets the buffer (upstream behaviour).
   * Returns an unsubscribe function.
   */
  subscribe(runId: string, from: "start" | "live" | number, sub: RunSubscriber): () => void {
    const l = this.log(runId);
    let replay: readonly RunEvent[] = [];
    if (from === "start") replay = l.events.events;
    else if (typeof from === "number") replay = l.resumable ? l.events.events.filter((e) => e.id > from) : [];
    else if (!l.resumable && !l.replayed) replay = l.events.events;
    l.replayed = true;
    for (const e of replay) sub.onEvent(e);
    if (l.done) {
      sub.onDone(l.done);
      return () => undefined;
    }
    l.subscribers.add(sub);
    return () => l.subscribers.delete(sub);
  }

  /** Forget a run that will never produce events here (e.g. deleted). */
  drop(runId: string): void {
    const l = this.logs.get(runId);
    if (l?.expireTimer) clearTimeout(l.expireTimer);
    this.forget(runId);
  }

  /** Bytes held for finished runs (outputs and buffered events). */
  get retainedSize(): number {
    return this.retainedBytes;
  }

  private retain(runId: string, bytes: number): void {
    this.release(runId);
    this.retained.set(runId, bytes);
    this.retainedBytes += bytes;
    for (const [oldest] of this.retained) {
      if (this.retainedBytes <= this.maxRetained || oldest === runId) break;
      this.drop(oldest);
    }
  }

  /** Map.set on an existing key keeps its place in the oldest-first order. */
  private grow(runId: string, bytes: number): void {
    const held = this.retained.get(runId);
    if (held === undefined) return;
    this.retained.set(runId, held + bytes);
    this.retainedBytes += bytes;
  }

  private setResumable(l: RunLog, resumable: boolean): void {
    l.resumable = resumable;
    l.events.bound(resumable ? Number.POSITIVE_INFINITY : this.maxBytes); // resumable: the client asked for replay
  }

  /** gatedByThread holds the runs that are gated and not finished. */
  private setGated(l: RunLog, gated: boolean): void {
    l.gated = gated;
    if (!gated || l.done) return this.unindexGated(l);
    const runs = this.gatedByThread.get(l.threadId);
    if (runs) runs.add(l.runId);
    else this.gatedByThread.set(l.threadId, new Set([l.runId]));
  }

  private unindexGated(l: RunLog): void {
    const runs = this.gatedByThread.get(l.threadId);
    if (!runs?.delete(l.runId)) return;
    if (runs.size === 0) this.gatedByThread.delete(l.threadId);
  }

  /** A finished non-resumable run's events go early; its output stays (and stays counted). */
  private dropEvents(l: RunLog): void {
    const bytes = l.events.bytes;
    l.events.take();
    if (this.logs.get(l.runId) === l) this.grow(l.runId, -bytes); // unless forgotten (or restarted) meanwhile
  }

  private release(runId: string): void {
    const bytes = this.retained.get(runId);
    if (bytes === undefined) return;
    this.retained.delete(runId);
    this.retainedBytes -= bytes;
  }

  private forget(runId: string): void {
    this.release(runId);
    this.releaseThreadEnd(runId); // a held run_end is never lost
    const l = this.logs.get(runId);
    if (l) this.unindexGated(l);
    this.logs.delete(runId);
  }
}
