// Buffered stream events held for a later reader (a worker's unobserved run, a run's log on the
// HTTP thread, a thread stream's resume buffer). Bounded by bytes of event data and optionally by
// count: the oldest events go first and the newest always stays, so a late reader still gets at
// least the latest state.

export interface BufferedEvent {
  /**
   * serialized event data, whose length is what the byte bound counts, or data serialized only
   * when read (a worker's unobserved run: see DeferredEventData), counted by its estimate
   */
  data: string | { estimate: number };
}

function sizeOf(event: BufferedEvent): number {
  return typeof event.data === "string" ? event.data.length : event.data.estimate;
}

export class EventBuffer<E extends BufferedEvent> {
  private held: E[] = [];
  private heldBytes = 0;

  constructor(
    private maxBytes = Number.POSITIVE_INFINITY,
    private readonly maxEvents = Number.POSITIVE_INFINITY,
  ) {}

  /** The events held, oldest first (do not mutate). */
  get events(): readonly E[] {
    return this.held;
  }

  /** Bytes of event data held. */
  get bytes(): number {
    return this.heldBytes;
  }

  /** Changes the byte bound (a run learns whether it is resumable after its log exists). */
  bound(maxBytes: number): void {
    this.maxBytes = maxBytes;
    this.trim();
  }

  /** Appends an event, then drops the oldest while over a bound. Returns the change in bytes held. */
  push(event: E): number {
    const before = this.heldBytes;
    this.held.push(event);
    this.heldBytes += sizeOf(event);
    this.trim();
    return this.heldBytes - before;
  }

  /** Empties the buffer and returns what it held. */
  take(): E[] {
    const out = this.held;
    this.held = [];
    this.heldBytes = 0;
    return out;
  }

  private trim(): void {
    while (this.held.length > 1 && (this.heldBytes > this.maxBytes || this.held.length > this.maxEvents)) {
      this.heldBytes -= sizeOf(this.held.shift()!);
    }
  }
}
