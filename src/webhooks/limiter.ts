// Runs async jobs with a cap on how many are in flight and how many may wait, so one slow
// receiver neither serialises every webhook nor lets a backlog grow without bound.

export class BoundedRunner {
  private inFlight = 0;
  private readonly waiting: (() => Promise<unknown>)[] = [];
  private idleWaiters: (() => void)[] = [];

  constructor(
    readonly maxInFlight: number,
    readonly maxQueued: number,
  ) {}

  get active(): number {
    return this.inFlight;
  }

  get queued(): number {
    return this.waiting.length;
  }

  /** Starts `job` now or queues it; returns false (job dropped) when the queue is full. */
  run(job: () => Promise<unknown>): boolean {
    if (this.inFlight < this.maxInFlight) {
      this.start(job);
      return true;
    }
    if (this.waiting.length >= this.maxQueued) return false;
    this.waiting.push(job);
    return true;
  }

  /** Resolves once nothing is running or queued. */
  idle(): Promise<void> {
    if (this.inFlight === 0 && this.waiting.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private start(job: () => Promise<unknown>): void {
    this.inFlight++;
    let p: Promise<unknown>;
    try {
      p = job();
    } catch (err) {
      p = Promise.reject(err);
    }
    p.catch(() => {}).finally(() => {
      this.inFlight--;
      const next = this.waiting.shift();
      if (next) this.start(next);
      else if (this.inFlight === 0) {
        const ws = this.idleWaiters;
        this.idleWaiters = [];
        for (const w of ws) w();
      }
    });
  }
}
