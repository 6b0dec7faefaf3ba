// Worker-side gate for run events nobody reads yet. A background or /wait run's events would
// otherwise all be copied to the HTTP thread (a long thread's `values` event is its whole
// history, twice per run) just in case someone joins its stream. Unobserved runs keep a bounded
// buffer here instead; a join (run.observe) releases the buffer and switches the run to live.
// Events may come with deferred data (a values event: serializing a long thread's whole state is
// most of what emitting it costs), rendered only when forwarded, so an unobserved run's values
// are never serialized at all.
import { EventBuffer } from "../bridge/event-buffer.ts";
import type { RunEvent } from "../bridge/messages.ts";

/** Event data serialized only when someone reads it. */
export interface DeferredEventData {
  /** about how many bytes it serializes to: what the buffers' bounds count before it is rendered */
  estimate: number;
  render(): string;
}

/** A run event as the worker produces it: a RunEvent once its data is serialized. */
export interface ProducedRunEvent {
  id: number;
  event: string;
  data: string | DeferredEventData;
}

export function renderEvent(e: ProducedRunEvent): RunEvent {
  if (typeof e.data === "string") return e as RunEvent; // already serialized: passed on as it is
  try {
    return { id: e.id, event: e.event, data: e.data.render() };
  } catch (err) {
    // e.g. a state that does not serialize to JSON (the run itself fails on its final values):
    // the reader gets the error where the event was, as it would have when it was emitted
    const error = err instanceof Error ? { error: err.name, message: err.message } : { error: "Error", message: String(err) };
    return { id: e.id, event: "error", data: JSON.stringify(error) };
  }
}

interface Gate {
  observed: boolean;
  buffer: EventBuffer<ProducedRunEvent>;
  expiry?: NodeJS.Timeout;
}

export interface EventGateOptions {
  /** event bytes kept per unobserved run (oldest dropped first, the last event always kept) */
  maxBufferedBytes: number;
  /** how long an unobserved finished run's buffer waits for a late joiner */
  retainAfterDoneMs: number;
  /** all buffers together; past it the buffers of finished runs go first, oldest first */
  maxTotalBytes: number;
}

export const EVENT_GATE_DEFAULTS: EventGateOptions = { maxBufferedBytes: 256 * 1024, retainAfterDoneMs: 5_000, maxTotalBytes: 32 * 1024 * 1024 };

export class RunEventGates {
  private readonly gates = new Map<string, Gate>();
  /** unobserved runs that ended, oldest first (their buffers are dropped first) */
  private readonly finished = new Set<string>();
  private total = 0;
  private readonly opts: EventGateOptions;

  constructor(
    /** posts events to the HTTP thread */
    private readonly forward: (runId: string, events: RunEvent[]) => void,
    opts: Partial<EventGateOptions> = {},
  ) {
    this.opts = { ...EVENT_GATE_DEFAULTS, ...opts };
  }

  /** A run was created; unknown runs (e.g. recovered after a restart) are treated as observed. */
  open(runId: string, observed: boolean): void {
    if (!observed) this.gates.set(runId, { observed: false, buffer: new EventBuffer(this.opts.maxBufferedBytes) });
  }

  /** The event to forward now, serialized; undefined when it was buffered (nobody reads the run yet). */
  accept(runId: string, event: ProducedRunEvent): RunEvent | undefined {
    const gate = this.gates.get(runId);
    if (gate === undefined || gate.observed) return renderEvent(event);
    this.total += gate.buffer.push(event);
    for (const oldest of this.finished) {
      if (this.total <= this.opts.maxTotalBytes) break;
      this.drop(oldest);
    }
    return undefined;
  }

  /**
   * Someone reads the run now: forward what was buffered (when `replay`) and every later event.
   * Returns whether the run was gated (false: it was observed already, finished long ago or unknown).
   */
  observe(runId: string, replay: boolean): boolean {
    const gate = this.gates.get(runId);
    if (gate === undefined || gate.observed) return false;
    gate.observed = true;
    this.total -= gate.buffer.bytes;
    const buffered = gate.buffer.take();
    if (replay && buffered.length > 0) this.forward(runId, buffered.map(renderEvent));
    if (gate.expiry !== undefined) this.drop(runId);
    return true;
  }

  /**
   * The run ended (or was refused): an observed gate goes now, an unobserved buffer waits a while
   * for a late joiner — unless none can come (`joinable: false`: a stateless run whose temporary
   * thread is gone, a create that was refused).
   */
  done(runId: string, joinable = true): void {
    const gate = this.gates.get(runId);
    if (gate === undefined) return;
    if (gate.observed || !joinable) return this.drop(runId);
    gate.expiry = setTimeout(() => this.drop(runId), this.opts.retainAfterDoneMs);
    gate.expiry.unref();
    this.finished.add(runId);
  }

  get size(): number {
    return this.gates.size;
  }

  /** bytes buffered over all gates */
  get bufferedBytes(): number {
    return this.total;
  }

  private drop(runId: string): void {
    const gate = this.gates.get(runId);
    if (gate === undefined) return;
    if (gate.expiry !== undefined) clearTimeout(gate.expiry);
    this.total -= gate.buffer.bytes;
    this.finished.delete(runId);
    this.gates.delete(runId);
  }
}
