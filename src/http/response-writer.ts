// Chunked reply bodies (SSE, streamed custom-route responses) written no faster than the client
// takes them. uWebSockets.js keeps whatever a res.write() could not send and reports it by
// returning false; writing on regardless would make the server buffer a slow reader's stream
// without bound. So after a false, later chunks wait here, bounded per reader, and go out in order
// when uWS reports the socket writable again (onWritable). A reader further behind than the bound
// is dropped (its connection closed), without slowing the producer or the other readers.
import type { HttpResponse } from "uWebSockets.js";

export interface ResponseWriterOptions {
  /**
   * Chunks waiting here (beyond the one uWS holds) past which the reader is dropped: bytes of
   * binary chunks, characters of text ones. One chunk may always wait, however large.
   */
  maxQueued: number;
  /**
   * Written on a writable event with nothing queued. Once onWritable is set, uWS drains what it
   * holds only on a write, so a stream that goes quiet after backpressure would keep its tail
   * back: an SSE comment line (`":\n"`) flushes it harmlessly. null for bodies that must stay
   * byte-exact: their tail goes out with the next chunk or the end.
   */
  filler: string | null;
}

/** SSE: a reader more than 8 MiB of events behind is dropped (README, "Streams"). */
export const SSE_MAX_QUEUED = 8 * 1024 * 1024;

export class ResponseWriter {
  private readonly queue: (string | Uint8Array)[] = [];
  private queued = 0;
  /** uWS holds data it could not send: write nothing more until it reports the socket writable */
  private blocked = false;
  private writableHandlerSet = false;
  /** ended, dropped or aborted: nothing more is written */
  private closed = false;
  private endRequested = false;
  private readyWaiters: (() => void)[] = [];

  constructor(
    private readonly res: HttpResponse,
    private readonly opts: ResponseWriterOptions,
    private readonly aborted: () => boolean,
  ) {}

  /** Nothing waits: a write goes straight to the socket. */
  get idle(): boolean {
    return !this.closed && !this.blocked && this.queue.length === 0;
  }

  get isClosed(): boolean {
    return this.closed || this.aborted();
  }

  /** Sends or queues a chunk; false once the reply is over (ended, aborted, or this reader dropped). */
  write(chunk: string | Uint8Array): boolean {
    if (this.endRequested || this.isClosed) return false;
    if (!this.idle) {
      this.queue.push(chunk);
      this.queued += typeof chunk === "string" ? chunk.length : chunk.byteLength;
      if (this.queued > this.opts.maxQueued && this.queue.length > 1) {
        this.drop();
        return false;
      }
      return true;
    }
    let sent = true;
    this.res.cork(() => (sent = this.res.write(chunk)));
    if (!sent) this.block();
    return true;
  }

  /** Ends the reply once everything queued is out. */
  end(): void {
    if (this.endRequested || this.isClosed) return;
    this.endRequested = true;
    if (this.idle) this.finish();
  }

  /** Resolves once a write would go straight out (or the reply is over): pull-based producers wait here. */
  ready(): Promise<void> {
    if (this.idle || this.isClosed) return Promise.resolve();
    return new Promise((resolve) => this.readyWaiters.push(resolve));
  }

  /** The client left (uWS onAborted): release what waits. */
  abort(): void {
    this.close();
  }

  private block(): void {
    this.blocked = true;
    if (this.writableHandlerSet) return;
    this.writableHandlerSet = true;
    this.res.onWritable(() => this.onWritable());
  }

  /** uWS: the socket takes data again. Send what waits, in order, until it pushes back. */
  private onWritable(): boolean {
    if (this.isClosed) return true;
    let drained = true;
    this.res.cork(() => (drained = this.flush()));
    return drained;
  }

  private flush(): boolean {
    this.blocked = false;
    let wrote = false;
    while (this.queue.length > 0) {
      const chunk = this.queue.shift()!;
      this.queued -= typeof chunk === "string" ? chunk.length : chunk.byteLength;
      wrote = true;
      if (!this.res.write(chunk)) {
        this.blocked = true;
        return false;
      }
    }
    if (!wrote && this.opts.filler !== null && !this.res.write(this.opts.filler)) {
      this.blocked = true;
      return false;
    }
    if (this.endRequested) this.finish();
    this.wakeReady();
    return true;
  }

  private finish(): void {
    this.closed = true;
    if (!this.aborted()) this.res.cork(() => this.res.end());
    this.wakeReady();
  }

  /** Too far behind: close the connection (uWS then runs the response's onAborted: the subscription goes). */
  private drop(): void {
    this.close();
    // not from inside the producer's fan-out loop that called write()
    setImmediate(() => {
      if (!this.aborted()) this.res.close();
    });
  }

  private close(): void {
    this.closed = true;
    this.queue.length = 0;
    this.queued = 0;
    this.wakeReady();
  }

  private wakeReady(): void {
    const waiters = this.readyWaiters;
    this.readyWaiters = [];
    for (const w of waiters) w();
  }
}
