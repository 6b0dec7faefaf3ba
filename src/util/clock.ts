// Time as a dependency: code that waits for a moment (cron ticks, a run's after_seconds) asks a
// Clock, so tests drive it with a ManualClock instead of sleeping on the real one.

export interface Clock {
  /** epoch milliseconds */
  now(): number;
  /** calls `fn` once at (or after) epoch ms `at`; the returned function cancels it */
  at(at: number, fn: () => void): () => void;
}

/** setTimeout's longest delay; later moments are reached in steps. */
const MAX_DELAY_MS = 2 ** 31 - 1;

/** The real clock. Its timers do not keep the process alive. */
export const systemClock: Clock = {
  now: () => Date.now(),
  at(at, fn) {
    let timer: NodeJS.Timeout;
    const arm = () => {
      const delay = at - Date.now();
      if (delay > MAX_DELAY_MS) timer = setTimeout(arm, MAX_DELAY_MS);
      else timer = setTimeout(fn, Math.max(0, delay));
      timer.unref();
    };
    arm();
    return () => clearTimeout(timer);
  },
};

/** A clock that moves only when told to (tests). Timers due at the same moment fire in the order they were set. */
export class ManualClock implements Clock {
  private timers: { at: number; seq: number; fn: () => void }[] = [];
  private seq = 0;

  constructor(private time = Date.UTC(2026, 0, 1)) {}

  now(): number {
    return this.time;
  }

  at(at: number, fn: () => void): () => void {
    const timer = { at, seq: this.seq++, fn };
    this.timers.push(timer);
    return () => {
      this.timers = this.timers.filter((t) => t !== timer);
    };
  }

  /** Moves time forward by `ms`, firing every timer due on the way (each at its own moment) and letting the work it starts settle. */
  async advance(ms: number): Promise<void> {
    const until = this.time + ms;
    for (;;) {
      const due = this.timers.filter((t) => t.at <= until).sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (!due) break;
      this.timers = this.timers.filter((t) => t !== due);
      this.time = Math.max(this.time, due.at);
      due.fn();
      await settle();
    }
    this.time = until;
    await settle();
  }

  /** How many timers are waiting. */
  get pending(): number {
    return this.timers.length;
  }
}

/** Lets promise chains and I/O callbacks started by a timer run before time moves on. */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
}
